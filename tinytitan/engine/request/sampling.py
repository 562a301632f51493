"""The sampling parameters, in one table (issue 35): what each takes, where it may come from.

Everything that lists sampling parameters reads ``KNOBS``: the validator (a request's values and
their ranges), ``serve``'s flags (``--temperature`` … and their ranges, ``cli/options.py``), the
model defaults read from ``generation_config.json`` (``models/files.py``) and applied
(``request/defaults.py``), and the scripted backend's record of a request. A new parameter is a row
here, a field of ``Sampling`` (``request/__init__.py``), its use in the sampler
(``device/sampling.py``) and, where a protocol carries it, the wire field and its mapping.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["FROM_MODEL", "KNOBS", "SERVE_FLAGS", "Knob", "by_name", "model_values", "out_of_range"]

INF = float("inf")


@dataclass(frozen=True, slots=True)
class Knob:
    """One sampling parameter: its name (the request field and ``Sampling`` attribute), its type and
    range, and where a value may come from besides a request."""

    name: str
    kind: type[int] | type[float]
    low: float
    high: float
    low_open: bool = False  # ``low`` itself is out of range
    model: bool = False  # a model default (generation_config.json, a publisher's table, a serve flag)
    server_default: float | None = None  # what a request gets when neither it nor the model sets one
    help: str = ""  # serve's flag help, for a model default
    metavar: str = "X"

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    def range_text(self, high: float | None = None, low_open: bool | None = None) -> str:
        """``[0, 2]``, ``(0, 1]``, or ``> 0`` for a range open above."""
        top = self.high if high is None else high
        open_low = self.low_open if low_open is None else low_open
        if top == INF:
            return f"{'>' if open_low else '≥'} {self.low:g}"
        return f"{'(' if open_low else '['}{self.low:g}, {top:g}]"


KNOBS: tuple[Knob, ...] = (
    Knob("temperature", float, 0, 2, model=True, server_default=0.3, help="Sampling temperature", metavar="T"),
    Knob(
        "top_p", float, 0, 1, low_open=True, model=True, server_default=0.9, help="Nucleus sampling mass", metavar="P"
    ),
    Knob("top_k", int, 1, 256, model=True, help="Sample from the K likeliest tokens", metavar="K"),
    Knob("min_p", float, 0, 1, model=True, help="Drop tokens below P x the likeliest", metavar="P"),
    Knob(
        "repetition_penalty", float, 0, INF, low_open=True, model=True, help="Penalty on repeated tokens", metavar="R"
    ),
    Knob("presence_penalty", float, -2, 2),  # a request's only: no model carries it
)
FROM_MODEL = tuple(k.name for k in KNOBS if k.model)  # the keys a model (or a serve flag) may set
SERVE_FLAGS = tuple(k for k in KNOBS if k.model)


def by_name(name: str) -> Knob:
    return next(k for k in KNOBS if k.name == name)


def out_of_range(knob: Knob, value: float, *, high: float | None = None, low_open: bool | None = None) -> str | None:
    """Why ``value`` is outside ``knob``'s range (``high`` / ``low_open``: a protocol's own bounds), or None."""
    top = knob.high if high is None else high
    open_low = knob.low_open if low_open is None else low_open
    if value < knob.low or value > top or (open_low and value == knob.low):
        text = knob.range_text(top, open_low)
        return f"must be {text}" if top == INF else f"must be in {text}"
    return None


def model_values(config: Mapping[str, Any]) -> dict[str, Any]:
    """The model-default knobs ``config`` (a generation_config.json) sets to a number."""
    out: dict[str, Any] = {}
    for key in FROM_MODEL:
        value = config.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            out[key] = value
    return out
