"""What the decorator adds to a request: the fragment in the system text, the tools after the client's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tinytitan.engine.memory.tools import MEMORY_TOOL_NAMES
from tinytitan.engine.models.stub import stub_tokens
from tinytitan.engine.request import FormatRequest, Tool, ToolChoice
from tinytitan.engine.service import Engine
from tinytitan.settings import Settings, SettingsError
from tinytitan.testing.loop import run

from .support import complete, memory_engine, request, stub_of

WRITE = Tool("Write", "write a file", {"type": "object", "properties": {"path": {"type": "string"}}})
TEXT: dict[str, Any] = {"reply": {"text": "ok"}}


def _last(engine: Engine) -> dict[str, Any]:
    return stub_of(engine).recorded[-1]


def test_the_fragment_follows_the_client_system_text_and_the_tools_follow_the_client_tools(tmp_path: Path) -> None:
    engine = memory_engine(tmp_path, TEXT)
    complete(engine, request(system="You are a careful coder.", tools=(WRITE,)))
    seen = _last(engine)
    assert seen["system"].startswith("You are a careful coder.\n\n# Memory\n")
    assert "/projects/proj-a" in seen["system"] and "none yet" in seen["system"]
    names = [t["name"] for t in seen["tools"]]
    assert names[0] == "Write" and set(names[1:]) == MEMORY_TOOL_NAMES


def test_without_a_client_system_text_the_fragment_is_the_system_text(tmp_path: Path) -> None:
    engine = memory_engine(tmp_path, TEXT)
    complete(engine, request())
    assert _last(engine)["system"].startswith("# Memory\n")


def test_a_client_tool_of_the_same_name_wins_and_its_call_goes_to_the_client(tmp_path: Path) -> None:
    own = Tool("memory_get", "the client's own", {"type": "object", "properties": {"key": {"type": "string"}}})
    call = {"reply": {"tool_calls": [{"name": "memory_get", "arguments": {"key": "k"}}]}}
    engine = memory_engine(tmp_path, call)
    result = complete(engine, request(tools=(own,)))
    tools = _last(engine)["tools"]
    assert [t["name"] for t in tools].count("memory_get") == 1 and tools[0]["name"] == "memory_get"
    assert [c.name for c in result.tool_calls] == ["memory_get"] and result.finished.reason == "tool_calls"
    assert len(stub_of(engine).recorded) == 1


@pytest.mark.parametrize(
    ("surface", "offered"),
    [("full", MEMORY_TOOL_NAMES), ("minimal", {"memory_set", "memory_get", "memory_list"}), ("off", set())],
)
def test_the_tool_surface(tmp_path: Path, surface: str, offered: set[str]) -> None:
    engine = memory_engine(tmp_path, TEXT, memory_tools=surface)
    complete(engine, request())
    seen = _last(engine)
    assert {t["name"] for t in seen["tools"]} == offered
    assert "# Memory" in seen["system"]
    assert ("read-only" in seen["system"]) == (surface == "off")


def test_zero_rounds_offers_no_tools(tmp_path: Path) -> None:
    engine = memory_engine(tmp_path, TEXT, memory_tool_rounds=0)
    complete(engine, request())
    assert _last(engine)["tools"] == []


def test_no_memory_tools_when_the_client_forbids_or_forces_calls_or_wants_a_schema(tmp_path: Path) -> None:
    engine = memory_engine(tmp_path, {"reply": {"text": "{}"}})
    complete(engine, request(tools=(WRITE,), tool_choice=ToolChoice("none")))
    assert _last(engine)["tools"] == [] and "# Memory" in _last(engine)["system"]
    complete(engine, request(output_format=FormatRequest("json_object", "response_format", "response_format.schema")))
    assert _last(engine)["tools"] == []
    stub_of(engine).script["forced_tool_calls"] = True
    stub_of(engine).script["rules"] = [{"reply": {"tool_calls": [{"name": "Write", "arguments": {"path": "/a"}}]}}]
    result = complete(engine, request(tools=(WRITE,), tool_choice=ToolChoice("required")))
    assert [t["name"] for t in _last(engine)["tools"]] == ["Write"] and result.tool_calls[0].name == "Write"


def test_a_workspace_that_is_refused_gets_no_memory(tmp_path: Path) -> None:
    engine = memory_engine(tmp_path, TEXT)
    complete(engine, request(workspace="/"))
    assert _last(engine)["system"] is None and _last(engine)["tools"] == []


def test_a_fast_request_gets_no_memory(tmp_path: Path) -> None:
    engine = memory_engine(tmp_path, TEXT)
    complete(engine, request(system="Working directory: /projects/x", model=engine.info.id + "-fast"))
    assert _last(engine)["system"] is None and _last(engine)["tools"] == []


def test_the_servers_own_request_gets_no_memory(tmp_path: Path) -> None:
    """Issue 28.1: an internal pass (compaction) is never decorated, whatever workspace it names."""
    engine = memory_engine(tmp_path, TEXT)
    complete(engine, request(system="Summarize.", internal=True))
    assert _last(engine)["system"] == "Summarize." and _last(engine)["tools"] == []


def test_a_model_without_a_tool_call_syntax_gets_no_memory_block_and_no_tools(tmp_path: Path) -> None:
    """It could call none of them, and a small model recites the instructions to the user (issue 26)."""
    engine = memory_engine(tmp_path, TEXT)
    stub_of(engine).script["tool_calls"] = False
    complete(engine, request(system="You are a careful coder.", tools=(WRITE,)))
    assert _last(engine)["system"] == "You are a careful coder." and _last(engine)["tools"] == []


def test_the_declared_working_directory_is_the_workspace(tmp_path: Path) -> None:
    engine = memory_engine(tmp_path, TEXT)
    complete(engine, request(system="Working directory: /projects/claude-proj", workspace=None))
    assert "/projects/claude-proj" in _last(engine)["system"]
    complete(engine, request("<environment_context><cwd>/projects/codex</cwd></environment_context>", workspace=None))
    assert "/projects/codex" in _last(engine)["system"]
    complete(engine, request(workspace=None))
    assert str(tmp_path / "launch") in _last(engine)["system"]


def test_count_tokens_excludes_the_fragment_and_the_memory_tools(tmp_path: Path) -> None:
    with_memory = memory_engine(tmp_path, TEXT)
    without = memory_engine(tmp_path / "off", TEXT, memory=False)
    chat = request(system="be brief", tools=(WRITE,))
    assert run(with_memory.count_tokens(chat)) == run(without.count_tokens(chat))
    complete(with_memory, chat)
    assert len(stub_tokens(stub_of(with_memory).recorded[-1]["prompt"])) > run(with_memory.count_tokens(chat)) + 200


def test_a_prompt_that_fits_only_without_memory_is_served_without_it(tmp_path: Path) -> None:
    engine = memory_engine(tmp_path, TEXT, max_context=None)
    stub_of(engine).context_override = 420  # the client's prompt fits; with the fragment it would not
    result = complete(engine, request("word " * 300))
    assert result.text == "ok" and _last(engine)["system"] is None


def test_memory_needs_its_directories_from_the_cli() -> None:
    from tinytitan.engine.build import build_engine
    from tinytitan.engine.models.stub import StubBackend
    from tinytitan.testing.scripts import script

    with pytest.raises(SettingsError, match="memory_dir"):
        build_engine(Settings(memory=True), StubBackend(script()))
