"""Where a model's sampling defaults come from (issue 26): the model first, never another family's.

A value a request omits is, in order: a ``serve`` flag (``--temperature`` …: the operator's
server-wide default), the model's ``generation_config.json``, what its publisher recommends or
what was measured for it (the table below, for models that ship no sampling values — a GGUF file
never carries any), else the conservative server default. ``ModelInfo.defaults`` holds the model's own values and
``ModelInfo.defaults_from`` where each came from; the validator adds the rest and records the
source of every value it applies (``ValidatedRequest.sampling_from``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from tinytitan.engine.request import ModelInfo
from tinytitan.engine.request.sampling import FROM_MODEL, KNOBS

__all__ = [
    "GENERATION_CONFIG",
    "KEYS",
    "MEASURED",
    "PUBLISHER",
    "REQUEST",
    "SERVER_DEFAULT",
    "SERVER_DEFAULTS",
    "SERVE_FLAG",
    "applied_defaults",
    "describe_defaults",
    "model_defaults",
    "publisher_defaults",
    "with_flags",
]

KEYS = FROM_MODEL  # the sampling parameters a model (or a serve flag) gives a default for
GENERATION_CONFIG = "generation_config.json"
PUBLISHER = "publisher"
SERVE_FLAG = "serve flag"
SERVER_DEFAULT = "server default"
REQUEST = "request"
# not tuned for any one family: a little randomness, the long tail cut; no top-k (request/sampling.py)
SERVER_DEFAULTS: Mapping[str, float] = {k.name: k.server_default for k in KNOBS if k.server_default is not None}
MEASURED = "measured: benchmarks/bench_quality.py"
# (name fragment, where the values come from, values), for families whose files carry no sampling
# values; every row a name matches applies, the first to name a key wins it
_PUBLISHERS: tuple[tuple[str, str, Mapping[str, float]], ...] = (
    # the embedded SmolLM2-135M (Q4_1): at the card's top_p 0.9 its first word for "What is the capital
    # of France?" is a near-tie between "The" and a French "L'…" (0.154 / 0.139 under the published
    # system prompt), a wrong answer one time in four; top_p 0.5 keeps the leader there (issue 37)
    ("smollm2135m", MEASURED, {"top_p": 0.5}),
    ("smollm2", f"{PUBLISHER}: SmolLM2 model card", {"temperature": 0.2, "top_p": 0.9}),
)


def _squash(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


def publisher_defaults(names: Iterable[str]) -> dict[str, tuple[float, str]]:
    """key → (value, source) from the table rows a name of the model matches (its file or directory
    name, the name in its metadata; not the served id, which may be any alias)."""
    squashed = [_squash(n) for n in names if n]
    found: dict[str, tuple[float, str]] = {}
    for fragment, source, values in _PUBLISHERS:
        if any(fragment in name for name in squashed):
            for key, value in values.items():
                found.setdefault(key, (value, source))
    return found


def model_defaults(generation_config: Mapping[str, Any], names: Iterable[str]) -> tuple[dict[str, Any], dict[str, str]]:
    """(values, where each came from): ``generation_config`` values (already read by
    ``sampling_defaults``), then the publisher table's for the keys it lacks."""
    values = dict(generation_config)
    sources = dict.fromkeys(values, GENERATION_CONFIG)
    for key, (value, source) in publisher_defaults(names).items():
        if key not in values:
            values[key], sources[key] = value, source
    return values, sources


def with_flags(info: ModelInfo, flags: Mapping[str, Any]) -> ModelInfo:
    """``info`` with the ``serve`` flags' server-wide defaults over the model's own."""
    given = {k: v for k, v in flags.items() if v is not None}
    if not given:
        return info
    return replace(
        info,
        defaults={**info.defaults, **given},
        defaults_from={**info.defaults_from, **dict.fromkeys(given, SERVE_FLAG)},
    )


def applied_defaults(info: ModelInfo) -> dict[str, tuple[Any, str]]:
    """Every default a request that sets nothing gets: key → (value, source)."""
    out = {k: (v, SERVER_DEFAULT) for k, v in SERVER_DEFAULTS.items()}
    for key in KEYS:
        if info.defaults.get(key) is not None:
            out[key] = (info.defaults[key], info.defaults_from.get(key, GENERATION_CONFIG))
    return {k: out[k] for k in KEYS if k in out}


def describe_defaults(info: ModelInfo) -> str:
    """One line for a banner: ``temperature 0.2, top_p 0.9 (publisher: SmolLM2 model card)``."""
    by_source: dict[str, list[str]] = {}
    for key, (value, source) in applied_defaults(info).items():
        by_source.setdefault(source, []).append(f"{key} {value:g}")
    return "; ".join(f"{', '.join(parts)} ({source})" for source, parts in by_source.items())
