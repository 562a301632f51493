"""The chat's HTTP side: a Responses API client over httpx, streaming, as any other client would be.

``ChatClient.stream(body)`` posts to ``/v1/responses`` with ``stream: true`` and yields typed
events parsed from the SSE stream. Closing that generator (Ctrl-C in the UI) closes the HTTP
response, and the server cancels the generation when its client goes away. Every failure is a
``ChatError`` carrying one line for the user.
"""

from __future__ import annotations

import json
import os
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any

import httpx

from tinytitan.engine.events import ReasoningDelta, TextDelta  # the server's own text pieces
from tinytitan.eventstream import read_frames

__all__ = [
    "ChatClient",
    "ChatError",
    "Completed",
    "ReasoningDelta",
    "ServerDown",
    "TextDelta",
    "ToolCallItem",
    "TurnEvent",
    "not_tinytitan",
    "server_root",
]


class ChatError(Exception):
    """A turn or command that failed; ``str()`` is the one line the user sees."""


class ServerDown(ChatError):
    """The server could not be reached at all."""


@dataclass(frozen=True, slots=True)
class ToolCallItem:
    item: dict[str, Any]  # the function_call output item as the server sent it

    @property
    def name(self) -> str:
        return str(self.item.get("name", ""))

    @property
    def arguments(self) -> str:
        return str(self.item.get("arguments", ""))

    @property
    def call_id(self) -> str:
        return str(self.item.get("call_id", ""))


@dataclass(frozen=True, slots=True)
class Completed:
    response: dict[str, Any]  # the final response object (status completed or incomplete)

    @property
    def output(self) -> list[dict[str, Any]]:
        return list(self.response.get("output") or [])

    @property
    def usage(self) -> dict[str, Any]:
        return dict(self.response.get("usage") or {})


TurnEvent = ReasoningDelta | TextDelta | ToolCallItem | Completed


def _error_line(response: httpx.Response, interactive: bool) -> str:
    """The server's own message from an error envelope (OpenAI shape), else the status; a conversation
    too long for the model says how to go on (``interactive``: with the chat's commands)."""
    try:
        body = json.loads(response.read() or b"{}")
    except ValueError:
        body = {}
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict) and error.get("message"):
        param = f" ({error['param']})" if error.get("param") else ""
        hint = ""
        if error.get("code") == "context_length_exceeded" and interactive:
            hint = "; /compact replaces the conversation by a short note, /clear starts a new one"
        elif error.get("code") == "context_length_exceeded":
            hint = "; send less text (the answer needs room in the window too), or ask about it part by part"
        return f"{error['message']}{param}{hint}"
    return f"the server answered {response.status_code} {response.reason_phrase}"


def server_root(url: str) -> str:
    """The base URL the client talks to: ``http://`` when no scheme is given, no trailing ``/`` or ``/v1``."""
    url = url.strip()
    if "://" not in url:
        url = "http://" + url  # `--url localhost:8096`, as people type it
    return url.rstrip("/").removesuffix("/v1")


def not_tinytitan(url: str, detail: str) -> str:
    """The one line for a URL where something answers that is not a TinyTitan server."""
    from tinytitan.settings import DEFAULT_PORT

    return (
        f"something other than a TinyTitan server answers at {url} ({detail}); check the port "
        f"(tinytitan serve listens on {DEFAULT_PORT} unless --port says otherwise)"
    )


def _origin(url: str) -> str:
    """``scheme://host:port`` of a URL (what ``--url`` should be when a path was pasted with it)."""
    parsed = httpx.URL(url)
    port = f":{parsed.port}" if parsed.port else ""
    return f"{parsed.scheme}://{parsed.host}{port}"


def _cwd() -> str | None:
    """The directory the chat runs in, when it can travel in a header (ASCII, still there)."""
    try:
        cwd = os.getcwd()
    except OSError:
        return None
    return cwd if cwd.isascii() else None


@dataclass
class ChatClient:
    """One server: its base URL (no ``/v1``), an optional API key, and a connection pool."""

    url: str
    api_key: str | None = None
    interactive: bool = True  # a person at the chat's prompt (its commands are a way out)
    _http: httpx.Client = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.url = server_root(self.url)
        headers = {"authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        workspace = _cwd()
        if workspace is not None:  # a server with memory on files what this chat remembers under it
            headers["x-tinytitan-workspace"] = workspace
        # no read timeout: a long prefill on a laptop CPU is silent for minutes (keepalives aside)
        timeout = httpx.Timeout(connect=5.0, read=None, write=30.0, pool=5.0)
        try:
            self._http = httpx.Client(base_url=self.url, headers=headers, timeout=timeout)
            _origin(self.url)  # a port that is no number is refused here, not on the first request
        except (httpx.InvalidURL, ValueError) as exc:
            raise ServerDown(f"{self.url} is not a server URL ({exc}); give one like http://127.0.0.1:8096") from None

    def close(self) -> None:
        self._http.close()

    def reset(self) -> None:
        """Drop every pooled connection (after an interrupted stream) and start afresh."""
        self._http.close()
        self.__post_init__()

    def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            response = self._http.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            raise self._down(exc) from None
        if response.status_code >= 400:
            raise self._refused(response)
        return response

    def _down(self, exc: httpx.TransportError) -> ServerDown:
        if self.url.startswith("https://") and "ssl" in str(exc).lower():
            plain = "http://" + self.url.removeprefix("https://")
            return ServerDown(f"the server at {self.url} does not speak HTTPS; use --url {plain}")
        return ServerDown(f"cannot reach the server at {self.url}: {_reason(exc)}")

    def _refused(self, response: httpx.Response) -> ChatError:
        """A refusal as one line that says what to do: a missing or wrong key, else the server's message."""
        if response.status_code == 401:
            what = "refused the API key given" if self.api_key else "needs an API key"
            return ChatError(f"the server at {self.url} {what}: pass --api-key KEY or set TINYTITAN_API_KEY")
        return ChatError(_error_line(response, self.interactive))

    def health(self, timeout: float = 2.0) -> bool:
        try:
            return self._http.get("/health", timeout=timeout).status_code == 200
        except httpx.TransportError:
            return False

    def model_list(self, *, details: bool = False) -> list[dict[str, Any]]:
        """``GET /v1/models`` (``details``: with each model's facts); a URL that is no server root says so."""
        try:
            response = self._http.get("/v1/models", params={"details": "true"} if details else None)
        except httpx.TransportError as exc:
            raise self._down(exc) from None
        if response.status_code == 404 and self.url == _origin(self.url):  # the root, and no model list
            raise ChatError(not_tinytitan(self.url, "no /v1/models there"))
        if response.status_code == 404:
            raise ChatError(
                f"{self.url} is not a TinyTitan server root (no /v1/models there); "
                f"give the server root, e.g. --url {_origin(self.url)}"
            )
        if response.status_code >= 400:
            raise self._refused(response)
        try:
            data = response.json().get("data") or []
        except (ValueError, AttributeError):
            raise ChatError(not_tinytitan(self.url, "its /v1/models is no model list")) from None
        return [m for m in data if isinstance(m, dict) and "id" in m]

    def models(self) -> list[str]:
        return [str(m["id"]) for m in self.model_list()]

    def facts(self, model: str) -> dict[str, Any]:
        """What ``/v1/models?details=true`` says of ``model`` (``{}`` when it says nothing)."""
        try:
            data = self._request("GET", "/v1/models", params={"details": "true"}).json().get("data") or []
        except (ChatError, ValueError, AttributeError):  # another server's refusal, or not JSON: it does not say
            return {}
        for entry in data:
            facts = entry.get("tinytitan") if isinstance(entry, dict) and entry.get("id") == model else None
            if isinstance(facts, dict):
                return facts
        return {}

    def tool_calls(self, model: str) -> bool | None:
        """Whether ``model`` can call tools, as the server says; None when it does not say."""
        said = self.facts(model).get("tool_calls")
        return said if isinstance(said, bool) else None

    def reasoning_levels(self, model: str) -> tuple[str, ...] | None:
        """The reasoning levels ``model``'s template renders, as the server says (``()``: no switch);
        None when it does not say."""
        said = self.facts(model).get("reasoning_levels")
        return tuple(str(level) for level in said) if isinstance(said, list) else None

    def takes_images(self, model: str) -> bool | None:
        """Whether ``model`` takes pictures (``input_modalities`` in the model list); None when unsaid."""
        for entry in self.model_list():
            said = entry.get("input_modalities") if entry.get("id") == model else None
            if isinstance(said, list):
                return "image" in said
        return None

    def accepts(self, model: str) -> bool:
        """Whether the server takes this name (any id it would serve, listed or not)."""
        try:
            self._request("GET", f"/v1/models/{model}")
        except ServerDown:
            raise
        except ChatError:
            return False
        return True

    def compact(self, body: dict[str, Any]) -> dict[str, Any]:
        return dict(self._request("POST", "/v1/responses/compact", json=body).json())

    def stream(self, body: dict[str, Any]) -> Generator[TurnEvent, None, None]:
        """Run one response, streaming; closing the iterator closes the connection (cancels it)."""
        request = self._http.build_request("POST", "/v1/responses", json={**body, "stream": True})
        try:
            response = self._http.send(request, stream=True)
        except httpx.TransportError as exc:
            raise self._down(exc) from None
        try:
            if response.status_code >= 400:
                raise self._refused(response)
            finished = False
            try:
                for frame in read_frames(response.iter_lines()):
                    event = _event(frame.data)
                    if event is not None:
                        finished = finished or isinstance(event, Completed)
                        yield event
            except httpx.TransportError as exc:
                raise ServerDown(f"the server at {self.url} went away: {_reason(exc)}") from None
            if not finished:
                raise ServerDown(f"the server at {self.url} ended the answer early")
        finally:
            response.close()


def _reason(exc: httpx.TransportError) -> str:
    if isinstance(exc, httpx.ConnectError):
        return "connection refused"
    return str(exc) or type(exc).__name__


def _event(data: str) -> TurnEvent | None:
    if not data.strip():
        return None  # an empty data field (some servers' keepalive): nothing to read
    try:
        event = json.loads(data)
    except ValueError:
        raise ChatError(f"the server sent an unreadable event: {data[:80]!r}") from None
    kind = event.get("type") if isinstance(event, dict) else None
    if kind == "response.output_text.delta":
        return TextDelta(str(event.get("delta", "")))
    if kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
        return ReasoningDelta(str(event.get("delta", "")))
    if kind == "response.output_item.done" and (event.get("item") or {}).get("type") == "function_call":
        return ToolCallItem(dict(event["item"]))
    if kind in ("response.completed", "response.incomplete"):
        return Completed(dict(event.get("response") or {}))
    if kind == "response.failed":
        error = (event.get("response") or {}).get("error") or {}
        raise ChatError(str(error.get("message") or "the generation failed"))
    if kind == "error":
        raise ChatError(str(event.get("message") or (event.get("error") or {}).get("message") or "error"))
    return None
