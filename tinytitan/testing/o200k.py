"""OpenAI's ``o200k_base`` vocabulary without a download, for the tiny gpt-oss model.

gpt-oss tokenizes with ``o200k_harmony`` (``o200k_base`` plus the harmony tokens), and
``openai-harmony`` refuses to start without the exact ``o200k_base.tiktoken`` file (it checks its
SHA-256). The npm package ``js-tiktoken`` ships the same ranks in a compact form; the tests install it
under ``tests/data`` (``.ci/run`` does, pinned by its lockfile) and this module rebuilds the file
from it, byte for byte, and checks the hash.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from pathlib import Path

from tinytitan.engine.output.harmony import O200K_FILE, O200K_SHA256
from tinytitan.testing.tiny_model import cache_root

__all__ = ["O200K_PATTERN", "js_tiktoken_ranks", "o200k_tiktoken"]

# o200k's pre-tokenizer (tiktoken's own spelling of it)
O200K_PATTERN = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)

_REPO = Path(__file__).resolve().parents[2]


def js_tiktoken_ranks() -> Path:
    """js-tiktoken's ``o200k_base`` ranks (``$TINYTITAN_JS_TIKTOKEN`` or ``tests/data/node_modules``)."""
    root = Path(os.environ.get("TINYTITAN_JS_TIKTOKEN") or _REPO / "tests" / "data" / "node_modules" / "js-tiktoken")
    path = root / "dist" / "ranks" / "o200k_base.js"
    if not path.exists():
        raise FileNotFoundError(
            f"{path} is missing: run `npm ci --prefix tests/data` (the gpt-oss family's vocabulary comes from it)"
        )
    return path


def _rebuild(js_file: Path) -> str:
    source = js_file.read_text(encoding="utf-8")
    data = json.loads(source[source.index("{") : source.rindex("}") + 1])
    ranks: dict[str, int] = {}
    for line in data["bpe_ranks"].split("\n"):
        if not line:
            continue
        _name, offset, *tokens = line.split(" ")
        for i, token in enumerate(tokens):
            ranks[token] = int(offset) + i
    return "".join(f"{token} {rank}\n" for token, rank in sorted(ranks.items(), key=lambda kv: kv[1]))


def o200k_tiktoken() -> Path:
    """The exact ``o200k_base.tiktoken`` (cached); ``ValueError`` if the rebuild does not hash right."""
    path = cache_root() / "tiktoken" / O200K_FILE
    if path.exists():
        return path
    text = _rebuild(js_tiktoken_ranks())
    digest = hashlib.sha256(text.encode()).hexdigest()
    if digest != O200K_SHA256:
        raise ValueError(f"rebuilt {O200K_FILE} has SHA-256 {digest}, expected {O200K_SHA256}")
    base64.b64decode(text.split(" ", 1)[0])  # a sanity check of the format
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
    return path
