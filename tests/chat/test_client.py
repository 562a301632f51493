"""The chat's Responses client against a real server (the stub backend on a loopback port)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tinytitan.chat.client import (
    ChatClient,
    ChatError,
    Completed,
    ReasoningDelta,
    ServerDown,
    TextDelta,
    ToolCallItem,
)
from tinytitan.engine.models.stub import StubBackend
from tinytitan.testing.process import free_port
from tinytitan.testing.scripts import STUB_MODEL, script
from tinytitan.testing.server import LiveServer, live_server

RULES = (
    {"when": {"user_contains": "tool"}, "reply": {"tool_calls": [{"name": "read_file", "arguments": {"path": "x"}}]}},
    {"when": {"user_contains": "slow"}, "reply": {"text": "a b c d e f g h", "chunk_delay_ms": 200}},
    {"reply": {"reasoning": "hmm", "text": "hello there"}},
)


@pytest.fixture
def server() -> Iterator[LiveServer]:
    with live_server(StubBackend(script(*RULES))) as live:
        yield live


def _body(text: str, **extra: object) -> dict[str, object]:
    return {"model": STUB_MODEL, "input": text, "store": False, **extra}


def test_the_stream_is_read_as_a_client_reads_server_sent_events() -> None:
    """The one client SSE reader (``tinytitan.eventstream``): comments, names, ids, any line end, and
    an event's data over several ``data:`` lines."""
    import respx
    from httpx import Response

    body = (
        ": ping\r\n\r\n"
        "event: response.output_text.delta\r\nid: 1\r\n"
        'data: {"type": "response.output_text.delta",\r\ndata:  "delta": "hi"}\r\n\r\n'
        'data:{"type": "response.completed", "response": {"id": "resp_1"}}\n\n'
    )
    with respx.mock(base_url="http://elsewhere") as mock:
        mock.post("/v1/responses").mock(
            return_value=Response(200, content=body.encode(), headers={"content-type": "text/event-stream"})
        )
        events = list(ChatClient("http://elsewhere").stream(_body("hi")))
    assert events == [TextDelta("hi"), Completed({"id": "resp_1"})]


def test_stream_yields_thoughts_text_and_the_final_response(server: LiveServer) -> None:
    client = ChatClient(server.v1)  # a /v1 suffix is accepted
    events = list(client.stream(_body("hi")))
    assert "".join(e.text for e in events if isinstance(e, ReasoningDelta)) == "hmm"
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "hello there"
    done = events[-1]
    assert isinstance(done, Completed) and done.usage["output_tokens"] > 0
    assert [i["type"] for i in done.output] == ["reasoning", "message"]
    assert server.recorded[-1]["stream"] is True


def test_tool_calls_arrive_as_items(server: LiveServer) -> None:
    tools = [{"type": "function", "name": "read_file", "parameters": {"type": "object"}}]
    events = list(ChatClient(server.url).stream(_body("use a tool", tools=tools)))
    calls = [e for e in events if isinstance(e, ToolCallItem)]
    assert [(c.name, c.arguments) for c in calls] == [("read_file", '{"path": "x"}')] and calls[0].call_id


def test_closing_the_stream_cancels_the_generation(server: LiveServer) -> None:
    client = ChatClient(server.url)
    events = client.stream(_body("slow please"))
    assert isinstance(next(e for e in events if isinstance(e, TextDelta)), TextDelta)
    events.close()
    # the slot is free again at once: the next answer is not queued behind the first
    answer = [e for e in client.stream(_body("hi")) if isinstance(e, TextDelta)]
    assert "".join(e.text for e in answer) == "hello there"


def test_refusals_are_the_servers_own_line(server: LiveServer) -> None:
    client = ChatClient(server.url)
    with pytest.raises(ChatError, match="nope") as info:
        list(client.stream({"model": "nope", "input": "hi"}))
    assert not isinstance(info.value, ServerDown)
    with pytest.raises(ChatError, match=r"\(input\)"):
        list(client.stream({"model": STUB_MODEL, "input": 42}))


def test_models_accepts_and_compact(server: LiveServer) -> None:
    client = ChatClient(server.url)
    assert client.models() == [STUB_MODEL]
    assert client.accepts(STUB_MODEL) and client.accepts(STUB_MODEL + "-fast") and not client.accepts("other")
    result = client.compact({"model": STUB_MODEL, "input": "remember me"})
    assert [i["type"] for i in result["output"]] == ["compaction"]


def test_a_server_that_is_not_there() -> None:
    client = ChatClient(f"http://127.0.0.1:{free_port()}")
    assert client.health(timeout=1) is False
    with pytest.raises(ServerDown, match="connection refused"):
        client.models()
    with pytest.raises(ServerDown, match="cannot reach"):
        list(client.stream(_body("hi")))


def test_a_first_token_later_than_two_keepalives() -> None:
    from tinytitan.settings import Settings

    slow = script({"reply": {"text": "late answer", "chunk_delay_ms": 300}})
    with live_server(StubBackend(slow), settings=Settings(keepalive_seconds=0.05)) as live:
        events = list(ChatClient(live.url).stream(_body("hi")))
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "late answer"
    assert isinstance(events[-1], Completed)


def test_the_client_names_its_directory_as_the_memory_workspace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    client = ChatClient("http://127.0.0.1:1")
    assert client._http.headers["x-tinytitan-workspace"] == str(tmp_path)
    client.close()


def test_whether_a_model_calls_tools_is_read_from_the_details_listing(server: LiveServer) -> None:
    import respx
    from httpx import Response

    client = ChatClient(server.url)
    assert client.tool_calls(STUB_MODEL) is True and client.tool_calls("not-served") is None
    with respx.mock(base_url="http://elsewhere") as mock:  # another server: it does not say
        mock.get("/v1/models").mock(return_value=Response(404, json={"error": {"message": "no"}}))
        assert ChatClient("http://elsewhere").tool_calls(STUB_MODEL) is None
