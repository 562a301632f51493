"""The contract ``tinytitan.api.transport`` holds uvicorn to: the per-connection state its hardened h11
protocol reads (its behaviour — 431 for a large head, 408 for a slow one — is ``test_limits.py``'s).
Run both before lifting the upper bound on ``uvicorn`` in ``pyproject.toml``."""

from __future__ import annotations

import logging

import pytest
from uvicorn.protocols.http.h11_impl import H11Protocol

from tinytitan.api import transport
from tinytitan.settings import Settings


def test_this_uvicorn_has_what_the_hardened_protocol_reads() -> None:
    assert transport.uvicorn_lacks() == []


def test_the_options_use_the_hardened_protocol(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(transport, "_checked", None)
    http = transport.uvicorn_options(Settings())["http"]
    assert isinstance(http, type) and issubclass(http, H11Protocol) and http is not H11Protocol


def test_a_missing_method_falls_back_to_plain_h11_with_one_line(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.delattr(H11Protocol, "_unset_keepalive_if_required")
    monkeypatch.setattr(transport, "_checked", None)
    assert transport.uvicorn_lacks() == ["H11Protocol._unset_keepalive_if_required()"]
    caplog.set_level(logging.WARNING, logger="tinytitan.server")
    assert [transport.uvicorn_options(Settings())["http"] for _ in range(2)] == ["h11", "h11"]
    lines = [r.getMessage() for r in caplog.records if r.name == "tinytitan.server"]
    assert len(lines) == 1 and "_unset_keepalive_if_required" in lines[0] and "header" in lines[0]
