"""TinyTitan's own directories stay where earlier releases put them (people have data there)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tinytitan.paths import cache_root, chat_history_path, data_root, default_memory_dir


@pytest.fixture
def home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def test_the_cache(home: Path, tmp_path: Path) -> None:
    assert cache_root({}) == home / ".cache" / "tinytitan"
    assert cache_root({"XDG_CACHE_HOME": ""}) == home / ".cache" / "tinytitan"
    assert cache_root({"XDG_CACHE_HOME": str(tmp_path / "xdg")}) == tmp_path / "xdg" / "tinytitan"
    own = {"TINYTITAN_CACHE_DIR": str(tmp_path / "own"), "XDG_CACHE_HOME": str(tmp_path / "xdg")}
    assert cache_root(own) == tmp_path / "own"


def test_the_chat_history_follows_xdg_on_every_platform(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "platform", "darwin")
    assert chat_history_path({}) == home / ".local" / "share" / "tinytitan" / "chat_history"
    assert chat_history_path({"XDG_DATA_HOME": str(tmp_path)}) == tmp_path / "tinytitan" / "chat_history"
    assert data_root({"XDG_DATA_HOME": str(tmp_path)}) == tmp_path / "tinytitan"


def test_memory_journals(home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "platform", "linux")
    assert default_memory_dir({}) == str(home / ".local" / "share" / "tinytitan" / "memory")
    assert default_memory_dir({"XDG_DATA_HOME": str(tmp_path)}) == str(tmp_path / "tinytitan" / "memory")
    monkeypatch.setattr(sys, "platform", "darwin")
    mac = home / "Library" / "Application Support" / "tinytitan" / "memory"
    assert default_memory_dir({"XDG_DATA_HOME": str(tmp_path)}) == str(mac)


def test_the_environment_is_read_when_asked(home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TINYTITAN_CACHE_DIR", str(tmp_path / "later"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert cache_root() == tmp_path / "later"
    assert chat_history_path() == tmp_path / "data" / "tinytitan" / "chat_history"
