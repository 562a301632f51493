"""Each real client says hi to the embedded SmolLM2 (8,192-token context) served from its GGUF file."""

from __future__ import annotations


def test_codex_say_hi(real_model, codex) -> None:  # type: ignore[no-untyped-def]
    try:
        run = codex.run(real_model, "say hi")
        print(run.describe())
    finally:
        print(real_model.access_log()[-5000:])


def test_claude_say_hi(real_model, claude) -> None:  # type: ignore[no-untyped-def]
    try:
        run = claude.run(real_model, "say hi")
        print(run.describe())
    finally:
        print(real_model.access_log()[-5000:])
