"""Reading a model's files without loading it: its JSON configs, its context window and its sampling
defaults — and ``ModelUnavailable``, the one-line reason a model cannot be served. Both the MLX
directories and the GGUF files read these; nothing here imports mlx.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tinytitan.engine.request.sampling import model_values

__all__ = ["ModelUnavailable", "context_window", "read_json", "sampling_defaults"]


class ModelUnavailable(Exception):
    """The model cannot be used; ``message`` is for the user (the CLI prints it, no traceback)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def read_json(path: Path) -> dict[str, Any]:
    """A JSON object file, or {} when absent; a broken file is a ``ModelUnavailable``."""
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ModelUnavailable(f"cannot read {path}: {exc}") from exc
    if not isinstance(data, dict):
        raise ModelUnavailable(f"{path} must hold a JSON object")
    return data


def context_window(config: dict[str, Any], override: int | None = None) -> int:
    """``max_position_embeddings`` (or its relatives), unless a max_context setting overrides it."""
    if override is not None:
        return int(override)
    for cfg in (config, config.get("text_config") or {}):
        for key in ("max_position_embeddings", "max_sequence_length", "seq_length", "n_positions"):
            if isinstance(cfg.get(key), int) and cfg[key] > 0:
                return int(cfg[key])
    return 4096


def sampling_defaults(generation_config: dict[str, Any]) -> dict[str, Any]:
    """The model-default sampling parameters (temperature, top_p, … : ``request/sampling.py``) from
    generation_config.json."""
    out = model_values(generation_config)
    if generation_config.get("do_sample") is False:
        out["temperature"] = 0.0  # the model card asks for greedy decoding
    if out.get("repetition_penalty") == 1.0:
        out.pop("repetition_penalty")
    return out
