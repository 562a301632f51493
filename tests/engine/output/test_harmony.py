"""gpt-oss's harmony format through openai-harmony (issue #18)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from tinytitan.engine.events import ReasoningDelta, TextDelta, ToolCall
from tinytitan.engine.output.harmony import O200K_FILE, HarmonyParser, is_harmony, load_encoding, o200k_from_tokenizer
from tinytitan.engine.output.parser import ParseOptions
from tinytitan.testing.families import TEMPLATES, family_dir


@pytest.fixture(scope="module")
def encoding() -> Any:
    return load_encoding(family_dir("gpt-oss"), Path(os.environ.get("TMPDIR", "/tmp")) / "tinytitan-o200k")


def test_the_vocabulary_comes_from_the_models_own_tokenizer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = o200k_from_tokenizer(family_dir("gpt-oss") / "tokenizer.json")
    assert text is not None and text.count("\n") == 199998  # checked against OpenAI's SHA-256 inside
    assert o200k_from_tokenizer(family_dir("qwen3") / "tokenizer.json") is None  # another vocabulary
    monkeypatch.delenv("TIKTOKEN_ENCODINGS_BASE", raising=False)
    load_encoding(family_dir("gpt-oss"), tmp_path)  # no download: this machine is offline
    assert (tmp_path / O200K_FILE).exists() and os.environ["TIKTOKEN_ENCODINGS_BASE"] == str(tmp_path)


def test_only_the_harmony_template_is_harmony() -> None:
    assert is_harmony((TEMPLATES / "gpt-oss.jinja").read_text())
    assert not any(is_harmony(p.read_text()) for p in TEMPLATES.glob("*.jinja") if p.name != "gpt-oss.jinja")


def feed(parser: HarmonyParser, raw: str, piece: int = 3) -> list[Any]:
    events: list[Any] = []
    for i in range(0, len(raw), piece):
        events += parser.feed(raw[i : i + piece])
    return events + parser.finish()


def joined(events: list[Any], kind: type[TextDelta] | type[ReasoningDelta]) -> str:
    return "".join(e.text for e in events if isinstance(e, kind))


def test_channels_become_reasoning_text_and_calls(encoding: Any) -> None:
    raw = (
        "<|channel|>analysis<|message|>Think first.<|end|><|start|>assistant<|channel|>commentary<|message|>"
        "On it.<|end|><|start|>assistant<|channel|>commentary to=functions.lookup <|constrain|>json<|message|>"
        '{"q": "x"}'
    )
    parser = HarmonyParser(encoding, ParseOptions(namespaces={"lookup": "ns"}))
    events = feed(parser, raw)
    assert joined(events, ReasoningDelta) == "Think first." and joined(events, TextDelta) == "On it."
    calls = [e for e in events if isinstance(e, ToolCall)]
    assert [(c.name, json.loads(c.arguments), c.namespace) for c in calls] == [("lookup", {"q": "x"}, "ns")]
    assert parser.tool_calls == 1


def test_a_stop_string_ends_the_final_text(encoding: Any) -> None:
    parser = HarmonyParser(encoding, ParseOptions(stop=("END",)))
    events = feed(parser, "<|channel|>final<|message|>Hello END and more", 1)
    assert joined(events, TextDelta) == "Hello " and parser.stopped == "END"


def test_reasoning_tokens_are_counted_by_channel(encoding: Any) -> None:
    parser = HarmonyParser(encoding)
    for piece in ["<|channel|>", "analysis", "<|message|>", "a", "b", "<|end|>"]:
        parser.feed(piece)
    for piece in ["<|start|>", "assistant", "<|channel|>", "final", "<|message|>", "c"]:
        parser.feed(piece)
    # the analysis message's tokens from <|message|> to <|end|>; its header and the final answer are not
    assert parser.completion_tokens == 12 and parser.reasoning_tokens == 4


@pytest.mark.parametrize(
    "raw",
    ["plain words, no harmony at all", "<|channel|>final<|message|>ok<|end|>then junk"],
)
def test_text_outside_the_format_is_shown_not_lost(encoding: Any, raw: str) -> None:
    events = feed(HarmonyParser(encoding), raw)
    shown = joined(events, TextDelta)
    assert ("plain words" in shown) if raw.startswith("plain") else ("ok" in shown and "junk" in shown)


def test_a_call_with_broken_arguments_is_shown_as_text(encoding: Any) -> None:
    events = feed(HarmonyParser(encoding), "<|channel|>commentary to=functions.f <|message|>{not json")
    assert not [e for e in events if isinstance(e, ToolCall)] and "{not json" in joined(events, TextDelta)
