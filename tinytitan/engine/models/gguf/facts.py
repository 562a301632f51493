"""What a GGUF file is, read from its header alone (no tensor data, no conversion, no mlx import).

The catalog lists GGUF files other tools downloaded (Ollama, LM Studio, the embedded SmolLM2) with
the same facts as a model directory: the ``ModelInfo`` serving it would start from (context window,
reasoning levels and tool-call syntax of the chat template in its metadata) and architecture,
parameters, quantization (the tensor type holding most weights) and size. An architecture the
converter cannot serve is a ``ModelUnavailable`` naming it, as it would be at load time.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from tinytitan.engine.models.files import ModelUnavailable
from tinytitan.engine.models.gguf.arch import ARCHITECTURES
from tinytitan.engine.models.gguf.file import GGUFError, read_gguf
from tinytitan.engine.models.mlx.facts import Description
from tinytitan.engine.models.mlx.syntax import FORCEABLE, tool_syntax
from tinytitan.engine.models.mlx.template import read_levels
from tinytitan.engine.request import ModelInfo
from tinytitan.engine.request.defaults import model_defaults

__all__ = ["gguf_facts"]


def gguf_facts(path: Path, model_id: str, max_context: int | None = None) -> tuple[ModelInfo, Description]:
    """The facts of the GGUF file at ``path``; ``ModelUnavailable`` when it cannot be served."""
    try:
        gguf = read_gguf(path)
    except (GGUFError, OSError) as exc:
        raise ModelUnavailable(str(exc)) from exc
    try:
        arch = gguf.architecture
        if arch not in ARCHITECTURES:
            raise ModelUnavailable(f"GGUF architecture '{arch or '?'}' is not supported")
        template = gguf.get("tokenizer.chat_template")
        template = template if isinstance(template, str) else ""
        levels = read_levels(path, template)  # no tinytitan.json beside a file: the template decides
        family = tool_syntax(path, template)
        context = gguf.get(f"{arch}.context_length")
        names = [path.name, *(str(gguf.get(f"general.{k}") or "") for k in ("name", "basename"))]
        defaults, defaults_from = model_defaults({}, names)  # a GGUF file carries no sampling values
        info = ModelInfo(
            id=model_id,
            context_window=int(max_context or (context if isinstance(context, int) and context > 0 else 4096)),
            reasoning_levels=levels.levels,
            default_reasoning=levels.default,
            defaults=defaults,
            defaults_from=defaults_from,
            forced_tool_calls=family in FORCEABLE,
            freeform_grammars=family in FORCEABLE,
            tool_calls=family is not None,
        )
        sizes: Counter[str] = Counter()
        for tensor in gguf.tensors.values():
            n = 1
            for dim in tensor.shape:
                n *= int(dim)
            sizes[tensor.type_name] += n
        dominant = max(sizes, key=lambda t: sizes[t]) if sizes else "unknown"
        about = Description(arch, sum(sizes.values()) or None, dominant, path.stat().st_size, family)
        return info, about
    finally:
        gguf.close()
