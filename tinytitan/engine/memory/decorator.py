"""The memory decorator: what memory adds to a validated request before it is rendered.

Built only when memory is on (``Settings.memory``). For each request it finds the scope (see
``scope.py``); when there is one, it merges the conversation's frozen instruction fragment into
the system message and appends the memory tools after the client's — a client tool of the same
name wins, and its calls go to the client. The result is a ``MemoryPlan``; ``MemoryRounds``
(``loop.py``) runs it. ``count_tokens`` never comes here, so it counts the client's prompt alone.

Memory tools are offered only when the client lets the model choose (``tool_choice`` auto) and
asked for no structured output: a forced call must reach the client, and a grammar-constrained
answer cannot call anything. The fragment is merged either way.
"""

from __future__ import annotations

import asyncio
import logging
import os
from dataclasses import dataclass, field, replace
from pathlib import Path

from tinytitan.engine.memory.fragment import FragmentCache, build_fragment, conversation_id
from tinytitan.engine.memory.scope import Scope, resolve_scope
from tinytitan.engine.memory.store import MemoryBank, MemoryStore, Retention
from tinytitan.engine.memory.tools import memory_tools
from tinytitan.engine.request import Tool, ValidatedRequest

__all__ = ["MemoryConfig", "MemoryDecorator", "MemoryPlan"]

log = logging.getLogger("tinytitan.memory")


def _account() -> tuple[str, str]:
    """The OS user running the server and its home directory (from the password database)."""
    try:
        import pwd

        entry = pwd.getpwuid(os.getuid())
        return entry.pw_name, entry.pw_dir
    except (ImportError, KeyError):  # no password database entry (a container's bare uid)
        return str(os.getuid()) if hasattr(os, "getuid") else "user", str(Path.home())


@dataclass(frozen=True, slots=True)
class MemoryConfig:
    directory: str
    launch_dir: str
    tools: str = "full"
    rounds: int = 4
    fsync: bool = False
    retention: Retention = field(default_factory=Retention)
    user: str = ""  # "" → the OS account running the server
    home: str = ""  # "" → that account's home directory


@dataclass(frozen=True, slots=True)
class MemoryPlan:
    """One request with memory: the decorated request, and what the loop needs to run it."""

    store: MemoryStore
    conversation: str  # the session the records it writes are attributed to
    request: ValidatedRequest  # the fragment merged into the system text, memory tools appended
    names: frozenset[str]  # the memory tools offered: a call to one of these is run by the server
    rounds: int

    @property
    def final_request(self) -> ValidatedRequest:
        """The request of the last, tool-free round: the client's tools only."""
        return replace(self.request, tools=tuple(t for t in self.request.tools if t.name not in self.names))


def _first_user(request: ValidatedRequest) -> str | None:
    return next((t.text for t in request.turns if t.role == "user"), None)


class MemoryDecorator:
    def __init__(self, config: MemoryConfig) -> None:
        self.config = config
        self.bank = MemoryBank(config.directory, fsync=config.fsync, retention=config.retention)
        self.fragments = FragmentCache()
        user, home = _account()
        self._user = config.user or user
        self._home = config.home or home

    def scope_of(self, request: ValidatedRequest) -> Scope | None:
        return resolve_scope(
            header=request.request.workspace,
            system=request.system,
            first_user=_first_user(request),
            launch_dir=self.config.launch_dir,
            user=self._user,
            home=self._home,
        )

    async def plan(self, request: ValidatedRequest) -> MemoryPlan | None:
        """``request`` with memory merged in, or None when it gets no memory: no usable workspace,
        or a ``-fast`` (CLI-stripped) request — it asked for a bare prompt, and the strip removed the
        system text that names its working directory — or a model without a tool-call syntax: it could
        call no memory tool, and would recite the instructions to the user."""
        if request.strip_cli or not request.tool_calls:
            return None
        scope = self.scope_of(request)
        if scope is None:
            return None
        return await asyncio.to_thread(self._plan, request, scope)

    def _plan(self, request: ValidatedRequest, scope: Scope) -> MemoryPlan:
        store = self.bank.store(scope)  # opens (replays) the workspace's journal on first use
        taken = {t.name for t in request.tools}
        offered: tuple[Tool, ...] = ()
        if self.config.rounds > 0:
            offered = tuple(t for t in memory_tools(self.config.tools) if t.name not in taken)
        names = tuple(t.name for t in offered)
        conversation = conversation_id(scope.key, request.system, _first_user(request))
        fragment = self.fragments.get_or_build(conversation, lambda: build_fragment(store, names))
        can_call = request.tool_choice == "auto" and request.output_format is None
        system = f"{request.system.rstrip()}\n\n{fragment}" if request.system else fragment
        decorated = replace(request, system=system, tools=(request.tools + offered) if can_call else request.tools)
        return MemoryPlan(
            store, conversation, decorated, frozenset(names) if can_call else frozenset(), self.config.rounds
        )

    def close(self) -> None:
        """Release every workspace's journal (the server is stopping)."""
        self.bank.close()
