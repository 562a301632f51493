"""Which server the chat talks to: ``--url``, the local one if it answers, or one started in-process.

Every way ends in a URL the chat speaks HTTP to. In-process (``--model`` / ``--stub``, or no local
server running) builds the backend exactly as ``serve`` does and serves the same ASGI app on an
ephemeral loopback port from a background thread (``BackgroundServer``), so the chat has one code
path whichever it is.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace

from tinytitan.chat.client import ChatClient, ChatError, ServerDown, server_root
from tinytitan.settings import DEFAULT_HOST, DEFAULT_PORT, Settings

__all__ = ["Target", "connect", "local_url"]

log = logging.getLogger("tinytitan.chat")


def local_url() -> str:
    port = os.environ.get("TINYTITAN_PORT") or str(DEFAULT_PORT)
    return f"http://{DEFAULT_HOST}:{port}"


@dataclass
class Target:
    client: ChatClient
    where: str  # for the banner: "server at URL" or "in-process (…)"
    models: list[str]
    reasoning_levels: tuple[str, ...] | None = None  # in-process: the model's own (a server says them per model)
    server: object | None = field(default=None, repr=False)  # the BackgroundServer, in-process

    def close(self) -> bool:
        """Close the client and stop an in-process server; False when its device thread outlived the wait."""
        self.client.close()
        stop = getattr(self.server, "stop", None)
        return bool(stop()) if stop is not None else True


def _remote(url: str, api_key: str | None, where: str) -> Target:
    client = ChatClient(url, api_key)
    try:
        models = client.models()
    except ChatError:  # not reachable, a key missing, not a server root
        client.close()
        raise
    return Target(client, where, models)


Loading = Callable[[], AbstractContextManager[None]]  # shows what loading does while the model comes in


def _in_process(
    settings: Settings, before_model: Callable[[], None] | None = None, loading: Loading | None = None
) -> Target:
    from tinytitan.api.background import BackgroundServer
    from tinytitan.engine.build import build_engine

    if before_model is not None and not settings.stub:
        before_model()  # the CLI's fast-CPU re-exec: the process may start over here
    # the server's own logs would scribble over the chat; its errors reach the chat over HTTP
    logging.getLogger("tinytitan").setLevel(logging.CRITICAL)
    with (loading or contextlib.nullcontext)():  # a GGUF file converting: the step, as `serve` shows it
        engine = build_engine(settings)
        server = BackgroundServer(engine, settings, log_level="critical").start()
    info = engine.info
    kind = "scripted" if settings.stub else "loaded here"
    if engine.backend.note:  # the embedded fallback says which model and why
        kind += f"; {engine.backend.note}"
    client = ChatClient(server.url)
    return Target(client, f"in-process ({kind})", [info.id], info.reasoning_levels, server)


def connect(
    url: str | None,
    server: Settings,
    *,
    api_key: str | None = None,
    before_model: Callable[[], None] | None = None,
    loading: Loading | None = None,
) -> Target:
    """The target the flags name: the server at ``url``; else one started in-process with ``server``
    when it names a model or a stub; else the local server if it answers, or ``TINYTITAN_MODEL``
    loaded in-process. Raises ``ServerDown`` (``url``) or ``ValueError`` / ``OSError`` (a model or
    script that cannot be loaded), each with a message for the user; ``ChatError`` when the server
    refuses (a missing API key, a URL that is not its root). ``before_model`` runs before a
    real model is built in-process (the CLI re-execs with OpenBLAS there); ``loading`` is held open
    while it is built (the CLI's spinner)."""
    if url:
        return _remote(url, api_key, f"server at {server_root(url)}")
    if server.model or server.stub:
        return _in_process(server, before_model, loading)
    local = local_url()
    probe = ChatClient(local, api_key)
    try:
        if probe.health(timeout=1.0):
            return _remote(local, api_key, f"server at {local}")
    except ServerDown:
        pass
    finally:
        probe.close()
    return _in_process(replace(server, model=os.environ.get("TINYTITAN_MODEL") or None), before_model, loading)
