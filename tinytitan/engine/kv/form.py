"""What form a model's KV cache takes: full precision, or quantized (``serve --kv-bits``).

``KvForm`` holds mlx-lm's three knobs under mlx-lm's names — ``kv_bits`` (4 or 8), ``kv_group_size``
(elements sharing one scale and bias: 32, 64 or 128) and ``quantized_kv_start`` (a row is kept in
full precision until its batch holds that many tokens; 0: quantized from the first token) — and
says what one token of context costs in bytes in either form, for the memory budget and the
benchmark. No MLX here.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["BITS", "GROUP_SIZES", "KvForm", "head_dims", "served_form", "token_bytes"]

log = logging.getLogger("tinytitan.mlx")

BITS = (4, 8)
GROUP_SIZES = (32, 64, 128)  # what ``mx.quantize`` takes


@dataclass(frozen=True, slots=True)
class KvForm:
    """A quantized KV cache: ``bits`` per element, one scale and bias per ``group_size`` elements of a
    head's vector, from the moment a batch holds ``start`` tokens."""

    bits: int = 8
    group_size: int = 64
    start: int = 0

    def problem(self) -> str | None:
        """Why this form cannot be served (a flag's message), or None."""
        if self.bits not in BITS:
            return f"--kv-bits takes {' or '.join(map(str, BITS))}, not {self.bits}"
        if self.group_size not in GROUP_SIZES:
            return f"--kv-group-size takes {', '.join(map(str, GROUP_SIZES))}, not {self.group_size}"
        if self.start < 0:
            return "--quantized-kv-start must be 0 or more"
        return None

    def fits(self, dims: Sequence[int]) -> bool:
        """Whether every head size in ``dims`` splits into whole groups (``mx.quantize`` needs it)."""
        return bool(dims) and all(d > 0 and d % self.group_size == 0 for d in dims)

    def describe(self) -> str:
        start = f", from token {self.start}" if self.start else ""
        return f"{self.bits}-bit KV cache (group {self.group_size}{start})"

    def as_json(self) -> dict[str, Any]:
        return {"kv_bits": self.bits, "kv_group_size": self.group_size, "quantized_kv_start": self.start}

    @property
    def tag(self) -> str:
        """A short name for the form, part of the prompt cache's model identity (``kv4g64s0``)."""
        return f"kv{self.bits}g{self.group_size}s{self.start}"


def head_dims(config: Mapping[str, Any]) -> tuple[int, int, int, int] | None:
    """``(layers, kv_heads, key size, value size)`` of a model's attention, read from its config; None
    when the config does not say (a text config nested under ``text_config`` is read too)."""
    text = config.get("text_config")
    if isinstance(text, Mapping) and "num_hidden_layers" not in config:
        config = {**config, **text}
    try:
        layers = int(config["num_hidden_layers"])
        heads = int(config["num_attention_heads"])
        kv_heads = int(config.get("num_key_value_heads") or heads)
        head = config.get("head_dim") or int(config["hidden_size"]) // heads
        if "qk_nope_head_dim" in config:  # multi-head latent attention (DeepSeek): keys carry the rope part
            key = int(config["qk_nope_head_dim"]) + int(config.get("qk_rope_head_dim", 0))
            return layers, kv_heads, key, int(config.get("v_head_dim") or head)
        return layers, kv_heads, int(head), int(head)
    except (KeyError, TypeError, ValueError, ZeroDivisionError):
        return None


def served_form(form: KvForm | None, config: Mapping[str, Any], model_id: str) -> KvForm | None:
    """``form`` for the model of ``config``, or None — full precision, said in one log line — when its
    heads do not split into whole groups of ``--kv-group-size``."""
    dims = head_dims(config)
    if form is None or (dims is not None and form.fits(dims[2:])):
        return form
    sizes = "heads of unknown size"
    if dims is not None:
        sizes = f"heads of {dims[2]}" + (f" and {dims[3]}" if dims[3] != dims[2] else "")
    log.warning(
        "%s: %s do not split into groups of %d (--kv-group-size); its KV cache is kept in full precision",
        model_id,
        sizes,
        form.group_size,
    )
    return None


def token_bytes(config: Mapping[str, Any], dtype: str, form: KvForm | None) -> int | None:
    """Bytes one token of context takes in the KV cache of every layer, computing in ``dtype``
    ("float32", "bfloat16" …); None when the config does not say.

    Full precision: keys and values in the compute dtype. Quantized: ``bits`` per element packed in
    uint32s, plus a scale and a bias in the compute dtype per group."""
    dims = head_dims(config)
    if dims is None:
        return None
    dtype_bytes = 4 if dtype.removeprefix("mlx.core.") == "float32" else 2
    layers, kv_heads, key, value = dims
    if form is None or not form.fits((key, value)):
        per_head = (key + value) * dtype_bytes
    else:
        per_head = sum(d * form.bits // 8 + 2 * (d // form.group_size) * dtype_bytes for d in (key, value))
    return layers * kv_heads * per_head
