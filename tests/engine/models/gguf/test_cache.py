"""The converted copies in TinyTitan's cache: what counts as one, what it came from, removing it."""

from __future__ import annotations

import json
from pathlib import Path

from tinytitan.engine.models.gguf.cache import SOURCE_FILE, converted_copies, remove_copy


def test_copies_are_finished_conversions_with_their_source(tmp_path: Path) -> None:
    done = tmp_path / "aaaa-v1"
    done.mkdir()
    (done / "config.json").write_text("{}")
    (done / "model-00000.safetensors").write_bytes(b"\0" * 1000)
    (done / SOURCE_FILE).write_text(json.dumps({"gguf": "/models/x.gguf"}))
    unnamed = tmp_path / "bbbb-v1"  # a copy that does not say where it came from
    unnamed.mkdir()
    (unnamed / "config.json").write_text("{}")
    (tmp_path / ".convert-123").mkdir()  # an interrupted conversion
    (tmp_path / "cccc-v1").mkdir()  # no config: not a model directory
    (tmp_path / "digests.json").write_text("{}")
    copies = converted_copies(tmp_path)
    assert [(c.name, c.gguf) for c in copies] == [("aaaa-v1", "/models/x.gguf"), ("bbbb-v1", "")]
    assert copies[0].size_bytes == 1000 + 2 + len((done / SOURCE_FILE).read_text())
    assert remove_copy(copies[0]) == copies[0].size_bytes and not done.exists()
    assert [c.name for c in converted_copies(tmp_path)] == ["bbbb-v1"]
    assert converted_copies(tmp_path / "none") == []
