"""``launch``: find or start the server, wire the agent to it, run the agent, stop what was started.

The agent runs in the foreground with the terminal; its exit status is the launch's. A Ctrl-C is the
agent's to handle (it reaches the agent's process group; the launch only waits), SIGTERM and SIGHUP
are passed on to it (before it runs they end the launch), and a server started here is stopped once
the agent has exited — or when the launch ends before the agent runs (a Ctrl-C while the server
starts or loads its model, a refusal). Before the agent starts, ``fitness`` says in one line each
what the model cannot do for it, and refuses (unless ``force``) where the agent cannot work at all.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import FrameType

from tinytitan.launch.agents import AGENTS, Agent
from tinytitan.launch.fitness import fitness
from tinytitan.launch.server import ChildServer, LaunchError, alive, local_url, served, why_not_alive

__all__ = ["LaunchOptions", "find_agent", "launch", "run_agent"]


@dataclass(frozen=True)
class LaunchOptions:
    agent: str
    args: Sequence[str] = ()  # for the agent
    url: str | None = None  # this server (it must answer)
    model: str | None = None  # the served id to use (default: the server's first)
    api_key: str | None = None
    start: bool = False  # start a server even when the local one answers (a model or stub was named)
    serve_args: Sequence[str] = field(default_factory=list)  # `tinytitan serve` flags for a started server
    serve_only: Sequence[str] = ()  # the flags given that only a started server takes (said when unused)
    force: bool = False  # launch even where the agent cannot work with the model (``fitness``)
    code_mode: bool = False  # Codex's Code Mode (one freeform exec tool)


def find_agent(name: str) -> tuple[Agent, str]:
    """The agent called ``name`` and its binary on PATH; ``LaunchError`` saying how to install it."""
    agent = AGENTS.get(name)
    if agent is None:
        raise LaunchError(f"unknown agent '{name}': give one of {', '.join(AGENTS)}")
    binary = shutil.which(agent.binary)
    if binary is None:
        raise LaunchError(f"{agent.binary} is not installed (not on PATH); install it with: {agent.install_hint}")
    return agent, binary


def run_agent(argv: Sequence[str], env: dict[str, str]) -> int:
    """Run the agent in the foreground; its exit status (128 + N when signal N ended it)."""
    proc = subprocess.Popen(list(argv), env=env)

    def forward(signum: int, frame: FrameType | None) -> None:
        if signum != signal.SIGINT:  # the terminal sent SIGINT to the agent already
            proc.send_signal(signum)

    # handlers, not SIG_IGN: an ignored signal would stay ignored in the agent, across its exec
    previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        code = proc.wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return code if code >= 0 else 128 - code


def _terminated(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)  # unwinds through the `finally` that stops a started server


def launch(options: LaunchOptions, progress: Callable[[str], None]) -> int:
    """Run ``options.agent`` against the server the options name; the agent's exit status."""
    agent, binary = find_agent(options.agent)
    choices = {"code_mode": True} if options.code_mode else {}
    unsupported = sorted(set(choices) - agent.choices)
    if unsupported:
        flag = "--" + unsupported[0].replace("_", "-")
        raise LaunchError(f"{flag} is for codex only; launch {agent.name} without it")
    child: ChildServer | None = None
    previous = {sig: signal.signal(sig, _terminated) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        url: str | None = None
        if options.url:
            url = options.url if "://" in options.url else "http://" + options.url
            root = url.rstrip("/").removesuffix("/v1")
            if not alive(root):
                raise LaunchError(why_not_alive(root))
        elif not options.start and alive(local_url()):
            url = local_url()
        if url is None:
            child = ChildServer(list(options.serve_args))  # named before it starts: a Ctrl-C stops it
            child.start(progress)
            url = child.url
        elif options.serve_only:
            flags = ", ".join(options.serve_only)
            progress(f"{flags}: only for a server started here (with --model or --stub); {url} serves as it is")
        facts = served(url, model=None if child else options.model, api_key=options.api_key)
        told = fitness(agent.name, facts)
        for line in told.warnings:
            progress(line)
        if told.refusal is not None and not options.force:
            raise LaunchError(f"{told.refusal}, or pass --force to launch anyway")
        if told.refusal is not None:
            progress(f"{told.refusal} (launching anyway: --force)")
        wiring = agent.wire(binary, facts, dict(os.environ), options.args, **choices)
        progress(
            f"{agent.name} on {facts.model} at {facts.url} "
            f"(context {facts.context_window:,} tokens, answers up to {facts.output_cap:,})"
        )
        try:
            return run_agent([binary, *wiring.argv], wiring.env)
        finally:
            for path in wiring.session_files:
                path.unlink(missing_ok=True)
    finally:
        if child is not None:
            child.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
