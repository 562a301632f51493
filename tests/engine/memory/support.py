"""An Engine over the stub with memory on, and requests to drive it (shared by the memory tests)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tinytitan.engine.build import build_engine
from tinytitan.engine.job import Completion
from tinytitan.engine.memory.store import MemoryStore
from tinytitan.engine.models.stub import StubBackend
from tinytitan.engine.request import ChatRequest, Message, Tool, ValidatedRequest
from tinytitan.engine.request.validate import validate
from tinytitan.engine.service import Engine
from tinytitan.settings import Settings
from tinytitan.testing.loop import run
from tinytitan.testing.scripts import STUB_MODEL, script

__all__ = ["WORKSPACE", "complete", "memory_engine", "request", "store_of", "stub_of"]

WORKSPACE = "/projects/proj-a"


def memory_engine(tmp_path: Path, *rules: dict[str, Any], **settings: Any) -> Engine:
    config = Settings(memory=True, memory_dir=str(tmp_path / "memory"), launch_dir=str(tmp_path / "launch"))
    for name, value in settings.items():
        setattr(config, name, value)
    return build_engine(config, StubBackend(script(*rules)))


def request(
    text: str = "hi",
    *,
    system: str | None = None,
    tools: tuple[Tool, ...] = (),
    history: tuple[Message, ...] = (),
    workspace: str | None = WORKSPACE,
    **fields: Any,
) -> ChatRequest:
    messages = ((Message("system", system),) if system else ()) + history + (Message("user", text),)
    fields.setdefault("model", STUB_MODEL)
    return ChatRequest(messages=messages, tools=tools, workspace=workspace, **fields)


def complete(engine: Engine, chat: ChatRequest) -> Completion:
    return run(engine.complete(chat))


def stub_of(engine: Engine) -> StubBackend:
    """The engine's backend: the stub ``memory_engine`` built it over (what it recorded, its script)."""
    assert isinstance(engine.backend, StubBackend)
    return engine.backend


def store_of(engine: Engine, chat: ChatRequest | ValidatedRequest) -> MemoryStore:
    """The memory store of the workspace ``chat`` belongs to."""
    assert engine.memory is not None
    validated = chat if isinstance(chat, ValidatedRequest) else validate(chat, engine.info)
    scope = engine.memory.scope_of(validated)
    assert scope is not None
    return engine.memory.bank.store(scope)
