"""The server an agent is launched against: the one ``--url`` names, the local one, or a child ``serve``.

``served(...)`` answers what the agent needs to know about it — the base URL, the model id, its
context window and output cap, the API key — read over HTTP exactly as any client would
(``/health``, ``/v1/models``), so a server started elsewhere and one started here look the same.
``ChildServer`` runs ``tinytitan serve`` in its own session (a Ctrl-C meant for the agent never
reaches it) on a free loopback port, waits until ``/health`` says it is ready, and stops it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tinytitan.engine.request.limits import planning_cap
from tinytitan.settings import DEFAULT_HOST, DEFAULT_PORT

__all__ = ["ChildServer", "LaunchError", "Served", "alive", "local_url", "served", "why_not_alive"]


class LaunchError(Exception):
    """A launch that cannot go on; ``str()`` is the one line the user sees."""


@dataclass(frozen=True, slots=True)
class Served:
    """What an agent is wired to."""

    url: str  # the server root, no /v1
    model: str
    context_window: int
    output_cap: int
    api_key: str | None = None
    reasoning_levels: tuple[str, ...] = ()
    freeform_tools: bool = False  # its calls can hold a custom tool's input to a grammar (Codex's apply_patch)
    tool_calls: bool | None = None  # whether the model has a tool-call syntax (None: the server does not say)
    codex: dict[str, Any] | None = None  # the server's own Codex catalog entry (``/v1/models``' ``models``)
    images: bool = False  # the model takes images (``input_modalities`` holds "image")

    @property
    def v1(self) -> str:
        return self.url + "/v1"

    @property
    def key(self) -> str:
        """The key to hand the agent: the server's own, or any non-empty word when it has none."""
        return self.api_key or "unused"


def local_url() -> str:
    """The local server's root: the default port, or ``TINYTITAN_PORT`` (as ``serve`` reads it)."""
    return f"http://{DEFAULT_HOST}:{os.environ.get('TINYTITAN_PORT') or DEFAULT_PORT}"


def _client(url: str, api_key: str | None) -> httpx.Client:
    headers = {"authorization": f"Bearer {api_key}"} if api_key else {}
    return httpx.Client(base_url=url, headers=headers, timeout=httpx.Timeout(10.0, connect=2.0))


def _health(url: str) -> dict[str, Any] | None:
    """``/health``'s body when it answers 200 (``{}`` for a body that is not JSON), else None."""
    try:
        response = httpx.get(url + "/health", timeout=2.0)
    except httpx.HTTPError:
        return None
    if response.status_code != 200:
        return None
    try:
        body = response.json()
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


def alive(url: str) -> bool:
    """Whether a server answers ``/health`` at ``url`` (ready or still loading)."""
    return _health(url) is not None


def why_not_alive(url: str) -> str:
    """Why ``url`` answers no ``/health``: nothing listens there, or something else does."""
    from tinytitan.chat.client import not_tinytitan

    try:
        response = httpx.get(url + "/health", timeout=2.0)
    except httpx.HTTPError:
        return f"no server answers at {url} (start one with: tinytitan serve)"
    return not_tinytitan(url, f"GET /health answered {response.status_code}")


def _facts(entry: dict[str, Any]) -> dict[str, Any]:
    """A model entry's facts: its own fields over those of its ``tinytitan`` details (``?details=true``)."""
    details = entry.get("tinytitan")
    return {**(details if isinstance(details, dict) else {}), **entry}


def _object(response: httpx.Response) -> dict[str, Any]:
    """The response's JSON object; ``ValueError`` for anything else."""
    body = response.json()
    if not isinstance(body, dict):
        raise ValueError("not a JSON object")
    return body


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def served(url: str, *, model: str | None = None, api_key: str | None = None) -> Served:
    """Read what the server at ``url`` serves: ``model`` (default its first id), its context window
    and output cap (``/v1/models/{id}``, else ``/v1/models?details=true``) and reasoning levels.
    ``LaunchError`` when it cannot be reached, refuses the key, or does not serve ``model``."""
    url = url.rstrip("/").removesuffix("/v1")
    with _client(url, api_key) as http:
        try:
            listing = http.get("/v1/models", params={"details": "true"})
            if listing.status_code == 401:
                ask = "refused the API key given" if api_key else "wants an API key"
                raise LaunchError(f"the server at {url} {ask}: pass --api-key (or set TINYTITAN_API_KEY)")
            listing.raise_for_status()
            body = _object(listing)
            data = body.get("data")
            entries = [_facts(m) for m in data if isinstance(m, dict) and "id" in m] if isinstance(data, list) else []
            ids = [str(m["id"]) for m in entries]
            if model is None:
                if not ids:
                    raise LaunchError(f"the server at {url} serves no model")
                model = ids[0]
            one = http.get(f"/v1/models/{model}")
            if one.status_code == 404:
                raise LaunchError(f"the server at {url} does not serve '{model}' (it serves: {', '.join(ids)})")
            one.raise_for_status()
            facts = {**next((m for m in entries if m["id"] == model), {}), **_facts(_object(one))}
            codex = body.get("models")
            entry = (
                next((m for m in codex if isinstance(m, dict) and m.get("slug") == model), None)
                if isinstance(codex, list)
                else None
            )
        except httpx.HTTPError as exc:
            raise LaunchError(f"cannot read the models of the server at {url}: {exc}") from None
        except ValueError:
            raise LaunchError(f"the server at {url} is not a TinyTitan server (its /v1/models is not JSON)") from None
    window = _int(facts.get("context_window"))
    if window is None:
        raise LaunchError(f"the server at {url} does not say the context window of '{model}'")
    published = _int(facts.get("max_output_tokens"))
    # a server whose only cap is the window itself (TinyTitan's) leaves no room to compact before the
    # window fills: then the agent answers within a quarter of it
    fallback = planning_cap(window)
    cap = published if published is not None and published < window else fallback
    levels = facts.get("reasoning_levels")
    levels = tuple(str(level) for level in levels) if isinstance(levels, list) else ()
    calls = facts.get("tool_calls")
    return Served(
        url,
        model,
        window,
        cap,
        api_key,
        levels,
        facts.get("freeform_tools") is True,
        calls if isinstance(calls, bool) else None,
        entry,
        "image" in (facts.get("input_modalities") or ()),
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind((DEFAULT_HOST, 0))
        return int(s.getsockname()[1])


@dataclass
class ChildServer:
    """``tinytitan serve ARGS`` on a free loopback port, in its own session, logging to a temporary file."""

    args: list[str]
    port: int = field(default_factory=_free_port)
    log: Path = field(init=False)
    _proc: subprocess.Popen[bytes] | None = field(default=None, init=False, repr=False)

    @property
    def url(self) -> str:
        return f"http://{DEFAULT_HOST}:{self.port}"

    def start(self, progress: Callable[[str], None]) -> ChildServer:
        """Start it and wait until ``/health`` says it is ready (a loading model keeps it waiting)."""
        fd, name = tempfile.mkstemp(prefix="tinytitan-launch-", suffix=".log")
        self.log = Path(name)
        argv = [sys.executable, "-m", "tinytitan", "serve", "--host", DEFAULT_HOST, "--port", str(self.port)]
        with os.fdopen(fd, "wb") as sink:
            self._proc = subprocess.Popen(
                [*argv, *self.args],
                stdin=subprocess.DEVNULL,
                stdout=sink,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # the agent's Ctrl-C is not for the server
            )
        progress(f"starting a server at {self.url} (its log: {self.log})")
        said_loading = False
        while True:
            body = _health(self.url)
            if body is not None and body.get("status") != "loading":
                break
            code = self._proc.poll()
            if code is not None:
                raise LaunchError(f"the server exited with status {code} before it was ready: {self._last_line()}")
            if body is not None and not said_loading:
                progress("the server is loading the model")
                said_loading = True
            time.sleep(0.2)
        return self

    def _last_line(self) -> str:
        lines = [line for line in self.log.read_text(encoding="utf-8", errors="replace").splitlines() if line.strip()]
        return lines[-1].strip() if lines else f"no output (see {self.log})"

    def stop(self) -> None:
        """Stop it (SIGTERM, then SIGKILL after 15 s) and remove its log when it ended cleanly."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if proc.returncode in (0, -signal.SIGTERM):
            self.log.unlink(missing_ok=True)
