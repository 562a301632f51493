"""The options every model-running command shares (serve, count-tokens, compact; chat takes some).

Declared once, so the offline commands take exactly the knobs that change what the server would
do — the model, the served id, the context cap, the default reasoning level — and read the same
``TINYTITAN_*`` variables. A command asks for them with one ``flags: ModelFlags`` parameter and
``@with_model_flags()``: Typer sees the separate options there, the command gets one value. A
command that takes only some of them (chat) uses the option types themselves. Any other option that
reads a variable is declared with ``option``, which names the variable after the flag.
"""

from __future__ import annotations

import functools
import inspect
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

from tinytitan.settings import Settings

__all__ = [
    "SERVE_EPILOG",
    "DraftModel",
    "Drafts",
    "Dtype",
    "KvCache",
    "MaxContext",
    "Memory",
    "MemoryDir",
    "Model",
    "ModelFlags",
    "ModelId",
    "ModelsDir",
    "Reasoning",
    "Stub",
    "Thinking",
    "memory_dir",
    "option",
    "parse_size",
    "reasoning_level",
    "server_model",
    "server_url",
    "with_kv_flags",
    "with_model_flags",
    "with_sampling_flags",
]


def option(flag: str, help: str, metavar: str | None = None, **checks: Any) -> Any:
    """An option that reads its own variable, for ``Annotated[T, option(...)] = default``:
    ``--max-context`` reads ``TINYTITAN_MAX_CONTEXT``, ``--memory/--no-memory`` ``TINYTITAN_MEMORY``.
    ``checks``: click's own bounds (``min=1, max=65535``), refused as a usage error (exit 2)."""
    envvar = "TINYTITAN_" + flag.split("/")[0].removeprefix("--").replace("-", "_").upper()
    return typer.Option(flag, envvar=envvar, metavar=metavar, help=help, **checks)


def server_url(verb: str, otherwise: str) -> Any:
    """``--url`` of a command that talks to a server (chat, launch). No variable: with no flags the
    command first looks for the local server."""
    help = f"{verb} this server (default: the local one at 127.0.0.1:8096 if it answers, else {otherwise})."
    return typer.Option(None, "--url", metavar="URL", help=help)


def server_model(without_url: str, with_url: str) -> Any:
    """``--model`` of a command that talks to a server: a model to run itself, or with ``--url`` the
    served id. No variable (a server the command starts reads ``TINYTITAN_MODEL`` itself)."""
    help = f"{without_url} (a directory, GGUF file or hub id, as for serve); with --url, {with_url}."
    return typer.Option(None, "--model", metavar="DIR|FILE.gguf|ID", help=help)


_MODEL_HELP = "A local model directory, a GGUF file or a Hugging Face hub id (org/name)."
_LEVELS = "off, on, minimal, low, medium, high, xhigh, max"
Model = Annotated[str | None, option("--model", _MODEL_HELP, "DIR|FILE.gguf|ID")]
ModelId = Annotated[str | None, option("--model-id", "The id clients use (default: the directory or repo name).", "ID")]
ModelsDir = Annotated[
    list[Path],
    option(
        "--models-dir",
        "Serve a catalog: every model directory in DIR, or 'hf' for the Hugging Face cache "
        "(repeatable; several in the variable are separated by ':').",
        "DIR|hf",
    ),
]
Stub = Annotated[
    str | None, option("--stub", "A scripted backend instead of a model (tests, client wiring).", "SCRIPT.json")
]
MaxContext = Annotated[int | None, option("--max-context", "Cap the context window (tokens).", "TOKENS")]
Reasoning = Annotated[str | None, option("--reasoning", f"Default reasoning level: {_LEVELS}.", "LEVEL")]
Thinking = Annotated[str | None, option("--thinking", "Shorthand for --reasoning on / off.", "on|off")]
Dtype = Annotated[
    str,
    option("--dtype", "Compute dtype: auto (fastest measured), float32, bfloat16, float16, native.", "DTYPE"),
]
Memory = Annotated[
    bool,
    option("--memory/--no-memory", "Agent memory: memory_* tools the server runs itself, one journal per workspace."),
]
MemoryDir = Annotated[
    str | None,
    option(
        "--memory-dir",
        "Where the memory journals live (default: tinytitan/memory in the user's data directory).",
        "DIR",
    ),
]
Drafts = Annotated[
    bool,
    option(
        "--drafts/--no-drafts",
        "Speculative decoding with prompt-lookup drafts (--no-drafts: off).",
    ),
]
DraftModel = Annotated[
    str | None,
    option(
        "--draft-model",
        "A smaller model with the same tokenizer that drafts tokens where the lookup finds none "
        "(a directory, .gguf file or hub id).",
        "MODEL",
    ),
]


@dataclass(frozen=True, slots=True)
class KvCache:
    """serve's KV-cache flags as one value (``@with_kv_flags``): its form and the memory budget."""

    kv_bits: int | None = None
    kv_group_size: int = 64
    quantized_kv_start: int = 0
    max_kv_memory: str | None = None

    def settings(self) -> dict[str, Any]:
        """The ``Settings`` fields these flags set; ``ValueError`` with a message for a bad size."""
        return {
            "kv_bits": self.kv_bits,
            "kv_group_size": self.kv_group_size,
            "quantized_kv_start": self.quantized_kv_start,
            "max_kv_memory": None if self.max_kv_memory is None else parse_size(self.max_kv_memory, "--max-kv-memory"),
        }


_KV_FLAGS: dict[str, Any] = {
    "kv_bits": Annotated[
        int | None,
        option("--kv-bits", "Quantize every row's KV cache to 4 or 8 bits (rows still share steps).", "4|8"),
    ],
    "kv_group_size": Annotated[
        int,
        option(
            "--kv-group-size", "Elements of a head's vector sharing a scale with --kv-bits (default 64).", "32|64|128"
        ),
    ],
    "quantized_kv_start": Annotated[
        int,
        option(
            "--quantized-kv-start",
            "With --kv-bits: keep full precision until a batch holds this many tokens (default 0).",
            "TOKENS",
        ),
    ],
    "max_kv_memory": Annotated[
        str | None,
        option(
            "--max-kv-memory",
            "KV memory of all running rows and the prompt cache together; a row that would pass it waits "
            "(default: half the memory free at start, less the weights; off: no bound).",
            "SIZE|off",
        ),
    ],
}
_UNITS = {"": 1, "b": 1, "k": 2**10, "kb": 2**10, "kib": 2**10, "m": 2**20, "mb": 2**20, "mib": 2**20}
_UNITS |= {"g": 2**30, "gb": 2**30, "gib": 2**30, "t": 2**40, "tb": 2**40, "tib": 2**40}


def parse_size(text: str, flag: str) -> int:
    """``8GiB``, ``512M``, ``1.5g`` or ``off`` (0) in bytes; ``ValueError`` naming ``flag`` otherwise."""
    import re

    word = text.strip().lower()
    if word in ("off", "0"):
        return 0
    found = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([a-z]*)", word)
    if found is None or found.group(2) not in _UNITS or float(found.group(1)) <= 0:
        raise ValueError(f"{flag} takes a size such as 8GiB or 512MiB, or off; not '{text}'")
    return int(float(found.group(1)) * _UNITS[found.group(2)])


def with_kv_flags(command: Callable[..., None]) -> Callable[..., None]:
    """``--kv-bits``, ``--kv-group-size``, ``--quantized-kv-start`` and ``--max-kv-memory`` where the
    command's ``kv: KvCache`` parameter stands."""
    return _gathered(command, "kv", _KV_FLAGS, lambda v: KvCache(**{k: x for k, x in v.items() if x is not None}))


_SAMPLING = "server-wide default; a request's own value wins (default: the model's, see the banner)"
_FLAGS: dict[str, Any] = {
    "model": Model,
    "model_id": ModelId,
    "stub": Stub,
    "max_context": MaxContext,
    "reasoning": Reasoning,
    "thinking": Thinking,
}


def memory_dir(value: str | None) -> str:
    """``--memory-dir`` as an absolute path, or the default under the user's data directory."""
    from tinytitan.paths import default_memory_dir

    return os.path.abspath(os.path.expanduser(value or default_memory_dir()))


def reasoning_level(reasoning: str | None, thinking: str | None) -> str | None:
    """The ladder level ``--reasoning`` / ``--thinking`` ask for; ``ValueError`` with a message otherwise."""
    from tinytitan.engine.request.reasoning import normalize_level

    if thinking is not None and reasoning is not None:
        raise ValueError("give --reasoning or --thinking, not both")
    if thinking is not None and thinking.lower() not in ("on", "off"):
        raise ValueError("--thinking takes on or off")
    word = reasoning if reasoning is not None else thinking
    level = normalize_level(word) if word is not None else None
    if word is not None and level is None:
        raise ValueError(f"unknown reasoning level '{word}'; one of {_LEVELS}")
    return level


@dataclass(frozen=True, slots=True)
class ModelFlags:
    """The shared flags as one value."""

    model: str | None = None
    model_id: str | None = None
    stub: str | None = None
    max_context: int | None = None
    reasoning: str | None = None
    thinking: str | None = None

    def settings(self, **extra: Any) -> Settings:
        """The ``Settings`` to run the model with: the same as ``serve`` given these flags, and ``extra``.

        ``ValueError`` with a message for a bad reasoning level."""
        return Settings(
            model=self.model,
            model_id=self.model_id,
            stub=self.stub,
            max_context=self.max_context,
            reasoning=reasoning_level(self.reasoning, self.thinking),
            **extra,
        )


def with_model_flags(*, reasoning: bool = True) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Put the shared options where the command's ``flags: ModelFlags`` parameter stands (without
    ``--reasoning`` / ``--thinking`` when ``reasoning`` is False); the command is called with them
    gathered into that one ``ModelFlags``."""
    names = [name for name in _FLAGS if reasoning or name not in ("reasoning", "thinking")]

    def decorate(command: Callable[..., None]) -> Callable[..., None]:
        return _gathered(command, "flags", {name: _FLAGS[name] for name in names}, lambda v: ModelFlags(**v))

    return decorate


def with_sampling_flags(command: Callable[..., None]) -> Callable[..., None]:
    """One option per sampling parameter a server-wide default may set (``--temperature`` …, from the
    one table in ``engine/request/sampling.py``) where the command's ``sampling`` parameter stands;
    the command gets the values given, by parameter name."""
    from tinytitan.engine.request.sampling import SERVE_FLAGS

    options = {
        knob.name: Annotated[knob.kind | None, option(knob.flag, f"{knob.help}: {_SAMPLING}.", knob.metavar)]
        for knob in SERVE_FLAGS
    }
    return _gathered(command, "sampling", options, lambda v: {k: x for k, x in v.items() if x is not None})


def _gathered(
    command: Callable[..., None], name: str, options: dict[str, Any], gather: Callable[[dict[str, Any]], Any]
) -> Callable[..., None]:
    """``command`` with the parameter ``name`` replaced by ``options`` (name → annotated type) for Typer
    to read; the command is called with what ``gather`` makes of their values in that parameter."""
    signature = inspect.signature(command, eval_str=True)
    params: list[inspect.Parameter] = []
    for param in signature.parameters.values():
        if param.name != name:
            params.append(param)
            continue
        kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
        params += [inspect.Parameter(option, kind, default=None, annotation=t) for option, t in options.items()]

    @functools.wraps(command)
    def run(**values: Any) -> None:
        command(**{name: gather({option: values.pop(option) for option in options})}, **values)

    # what Typer reads: the options in place of the parameter, their annotations already evaluated
    run.__dict__["__signature__"] = signature.replace(parameters=params)
    run.__annotations__ = {p.name: p.annotation for p in params} | {"return": None}
    return run


_DISTRIBUTED_HELP = """
Across several machines: list them in a hostfile and start every rank with mlx.launch —
`mlx.launch --hostfile hosts.json -- tinytitan serve --model M`, or `mlx.launch --hosts
10.0.0.1,10.0.0.2 -- tinytitan serve --model M` (`-n 2 --backend ring` on one machine). Rank 0
serves HTTP; the others hold their share of the model and follow it step by step.

--parallel tensor (the default where mlx-lm offers it: llama, qwen2/3, qwen3_moe, gpt_oss,
deepseek …) splits every layer and syncs twice per layer per token: for low-latency links.
pipeline gives each rank whole layers: for a model too big for one machine over slower links.
The banner shows rank, size, backend and parallelism. A lost rank fails the running requests
(503) and every rank exits with status 75, so the launcher can restart the group.
"""

# after the options in --help (a first screen about one machine), in the man page after the summary
SERVE_EPILOG = "\n\n".join(" ".join(p.split()) for p in _DISTRIBUTED_HELP.strip().split("\n\n"))
