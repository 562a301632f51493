"""The client fixtures themselves: a missing CLI skips outside CI and fails in CI."""

from __future__ import annotations

import pytest

from . import conftest


def test_missing_cli_skips_outside_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="no-such-cli CLI not installed"):
        conftest.client_binary("no-such-cli")


@pytest.mark.parametrize("value", ["true", "1", "TRUE"])
def test_missing_cli_fails_in_ci(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("CI", value)
    with pytest.raises(pytest.fail.Exception, match="npm ci --prefix tests/clients"):
        conftest.client_binary("no-such-cli")
