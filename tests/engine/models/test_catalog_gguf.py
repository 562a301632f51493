"""GGUF files in a ``--models-dir`` catalog (issues 35 and 37): found beside model directories (LM
Studio's ``publisher/repo/*.gguf`` too), converted without MLX on the CPU pool while the device worker
decodes another model, and served like any other entry."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from tinytitan.engine.build import build_catalog, build_engine
from tinytitan.engine.device import thread as device_thread
from tinytitan.engine.events import Finished, TextDelta
from tinytitan.engine.models.catalog import DirectorySource, scan
from tinytitan.engine.models.gguf import convert
from tinytitan.engine.request import ChatRequest, Message, Sampling
from tinytitan.settings import Settings, SettingsError
from tinytitan.testing.catalog import link_model
from tinytitan.testing.device import on_device
from tinytitan.testing.gguf_files import chat_gguf
from tinytitan.testing.loop import run


@pytest.fixture(scope="module")
def gguf_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return on_device(lambda: chat_gguf(tmp_path_factory.mktemp("gguf") / "chatty.gguf"))


@pytest.fixture
def catalog_dir(tmp_path: Path, tiny_dir: Path, gguf_file: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """tiny/ (an MLX directory), chatty.gguf, pub/repo/{chatty-q8.gguf, mmproj-chatty.gguf}, notes.txt"""
    monkeypatch.setenv("TINYTITAN_CACHE_DIR", str(tmp_path / "cache"))  # every test converts afresh
    root = tmp_path / "models"
    link_model(tiny_dir, root / "tiny")
    (root / "chatty.gguf").symlink_to(gguf_file)
    (root / "pub" / "repo").mkdir(parents=True)
    (root / "pub" / "repo" / "chatty-q8.gguf").symlink_to(gguf_file)
    (root / "pub" / "repo" / "mmproj-chatty.gguf").symlink_to(gguf_file)  # a vision projector: not a model
    (root / "notes.txt").write_text("not a model", encoding="utf-8")
    return root


def test_gguf_files_are_entries_beside_model_directories(catalog_dir: Path) -> None:
    catalog = scan([DirectorySource(catalog_dir)], quiet=True)
    assert [(e.id, e.format) for e in catalog.entries] == [
        ("chatty", "gguf"),
        ("pub/repo/chatty-q8", "gguf"),
        ("tiny", "mlx"),
    ]
    assert catalog.skipped == ()
    assert catalog.get("chatty") is not None and catalog.get("chatty").about.architecture == "llama"  # type: ignore[union-attr]


def test_a_file_that_is_not_gguf_and_a_split_file_are_skipped_with_a_reason(catalog_dir: Path) -> None:
    (catalog_dir / "broken.gguf").write_bytes(b"not gguf at all")
    (catalog_dir / "big-00001-of-00002.gguf").symlink_to((catalog_dir / "chatty.gguf").resolve())
    skipped = {s.path.name: s.reason for s in scan([DirectorySource(catalog_dir)], quiet=True).skipped}
    assert "GGUF magic" in skipped["broken.gguf"]
    assert "split GGUF" in skipped["big-00001-of-00002.gguf"] and "--merge" in skipped["big-00001-of-00002.gguf"]


def test_an_empty_catalog_says_in_one_line_what_it_found(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(SettingsError, match=r"holds no model directories .* and no \.gguf files"):
        build_catalog(Settings(models_dirs=(str(tmp_path / "empty"),)))
    (tmp_path / "one").mkdir()
    (tmp_path / "one" / "x.gguf").write_bytes(b"nope")
    with pytest.raises(SettingsError, match=r"1 skipped \(x.gguf: not a GGUF file"):
        build_catalog(Settings(models_dirs=(str(tmp_path / "one"),)))


def ask(model: str, n: int) -> ChatRequest:
    return ChatRequest(
        model=model, messages=(Message("user", "Hello there"),), max_tokens=n, sampling=Sampling(seed=1), stream=True
    )


def test_a_gguf_entry_converts_off_the_device_while_another_model_decodes(
    catalog_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rule "one thread calls MLX" holds with a conversion under way: the suite runs with the
    device check on (any MLX call off a device thread raises), the conversion runs on the CPU pool
    while a row of the MLX model decodes, and both answer."""
    assert device_thread.check_installed()
    engine = build_engine(Settings(models_dirs=(str(catalog_dir),)))
    seen: list[tuple[str, int]] = []  # (converting thread, rows decoding on the device meanwhile)
    real = convert.convert

    def watched(gguf: Any, out: Path) -> None:
        batch = engine.device.batch
        seen.append((threading.current_thread().name, batch.rows if batch is not None else 0))
        real(gguf, out)

    monkeypatch.setattr(convert, "convert", watched)

    async def scenario() -> tuple[int, str | None, int]:
        long = await engine.prepare(ask("tiny", 4000))
        events = long.events()
        async for event in events:  # the tiny model decodes now
            if isinstance(event, TextDelta):
                break
        other = await engine.prepare(ask("chatty", 8))  # built meanwhile: its file converted
        after = 0
        async for event in events:  # the long row went on decoding
            after += isinstance(event, TextDelta)
            if after >= 3 or isinstance(event, Finished):
                break
        await events.aclose()  # it leaves; the device switches to the converted model
        done = await other.collect()
        return done.finished.usage.completion_tokens if done.finished.usage else 0, done.finished.reason, after

    try:
        produced, reason, after = run(scenario())
    finally:
        engine.shutdown()
    assert produced > 0 and reason in ("length", "stop") and after == 3
    assert len(seen) == 1
    thread, rows = seen[0]
    assert thread.startswith("tinytitan-cpu") and rows == 1  # the CPU pool, while the row decoded


def test_claimed_refuses_while_a_device_worker_runs(catalog_dir: Path) -> None:
    before = device_thread.running_workers()  # other tests' engines may still run in this process
    engine = build_engine(Settings(models_dirs=(str(catalog_dir),)))
    try:
        run(engine.complete(ask("tiny", 2)))  # the worker is up
        assert len(device_thread.running_workers()) == len(before) + 1
        with pytest.raises(RuntimeError, match=r"DeviceWorker\.run"), device_thread.claimed():
            pass
    finally:
        engine.shutdown()
    assert device_thread.running_workers() == before  # its worker let the device go


def test_nothing_converts_before_a_gguf_entrys_first_request(catalog_dir: Path, tmp_path: Path) -> None:
    engine = build_engine(Settings(models_dirs=(str(catalog_dir),)))
    try:
        assert engine.info_for("chatty").context_window == 2048  # its facts: the header alone
        assert not (tmp_path / "cache" / "gguf").exists()
    finally:
        engine.shutdown()
