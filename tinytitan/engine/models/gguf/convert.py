"""Serving a GGUF file: convert it once into a model directory mlx-lm loads, cached by digest.

``gguf_model_dir(path)`` reads the file's header, checks its architecture, tokenizer and tensor
types before any work (an unsupported one is one ``ModelUnavailable`` naming it), then writes
``config.json``, the tensors under mlx-lm's names (``model*.safetensors``, quantized blocks kept as
MLX affine arrays), ``tokenizer.json`` and ``tokenizer_config.json`` (with the file's chat template)
into ``<cache>/gguf/<sha256 prefix>/`` — built in a temporary directory and renamed into place, so
an interrupted conversion leaves nothing half-written. The digest of a file is remembered by
(path, size, mtime), so a multi-gigabyte file is hashed once.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from tinytitan.engine.models.files import ModelUnavailable
from tinytitan.engine.models.gguf.arch import UnsupportedArchitecture, mlx_config, mlx_name, norm_offset
from tinytitan.engine.models.gguf.cache import SOURCE_FILE, gguf_cache_dir
from tinytitan.engine.models.gguf.file import GGUFError, GGUFFile, read_gguf
from tinytitan.engine.models.gguf.quants import UnsupportedQuantization, as_float32, decode, tensor_nbytes
from tinytitan.engine.models.gguf.safetensors import write_safetensors
from tinytitan.engine.models.gguf.tokenizer import UnsupportedTokenizer, end_of_turn_ids, write_tokenizer
from tinytitan.engine.readiness import progress

__all__ = ["CONVERTER_VERSION", "convert", "file_digest", "gguf_cache_dir", "gguf_model_dir"]

log = logging.getLogger("tinytitan.gguf")

CONVERTER_VERSION = 1  # part of the cache key: bump when the converted layout changes
_SHARD_BYTES = 2 << 30  # tensors per safetensors file (bounds the memory a conversion holds)


def file_digest(path: Path) -> str:
    """The file's sha256 (hex), remembered by path, size and mtime so it is computed once."""
    stat = path.stat()
    memo = gguf_cache_dir() / "digests.json"
    key = f"{path.resolve()}|{stat.st_size}|{stat.st_mtime_ns}"
    try:
        known = json.loads(memo.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        known = {}
    cached = known.get(key) if isinstance(known, dict) else None
    if isinstance(cached, str):
        return cached
    sha = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 24):
            sha.update(chunk)
    digest = sha.hexdigest()
    known = known if isinstance(known, dict) else {}
    known[key] = digest
    memo.parent.mkdir(parents=True, exist_ok=True)
    tmp = memo.with_name(f".digests.{os.getpid()}.json")
    tmp.write_text(json.dumps(known), encoding="utf-8")
    os.replace(tmp, memo)
    return digest


def _check(gguf: GGUFFile) -> None:
    """Everything that can be refused, refused before any tensor is decoded (a cut-short file too)."""
    size = gguf.path.stat().st_size
    for info in gguf.tensors.values():
        mlx_name(gguf.architecture, info.name)
        if info.offset + tensor_nbytes(info) > size:
            raise GGUFError(f"{gguf.path}: tensor {info.name} runs past the end of the file (a partial download?)")


def convert(gguf: GGUFFile, out: Path) -> None:
    """Write the model directory for ``gguf`` into ``out`` (which exists and is empty).

    numpy and file writes only, never MLX: a conversion runs on whatever thread needs the model
    (``serve`` resolving ``--model``, a catalog's first request for a GGUF entry on the CPU pool)
    while the device worker keeps serving — on the device worker it would hold up every request for
    the minutes a large file takes."""
    tokens = gguf.get("tokenizer.ggml.tokens") or []
    config = mlx_config(gguf, vocab_size=len(tokens) or int(gguf.get(f"{gguf.architecture}.vocab_size", 0)))
    _check(gguf)
    write_tokenizer(gguf, out, config["max_position_embeddings"])
    template = gguf.get("tokenizer.chat_template") or ""
    config["eos_token_id"] = end_of_turn_ids(gguf, template if isinstance(template, str) else "")
    shard: dict[str, np.ndarray] = {}
    size = 0
    files: list[Path] = []
    for info in gguf.tensors.values():
        name = mlx_name(gguf.architecture, info.name)
        if name is None:
            continue
        stem = name.removesuffix(".weight")
        for part, array in decode(gguf, info).items():
            if offset := norm_offset(gguf.architecture, info.name):
                array = as_float32(array) + np.float32(offset)
            shard[name if part == "weight" else f"{stem}.{part}"] = array
            size += array.nbytes
        if size >= _SHARD_BYTES:
            files.append(_save(out, shard, len(files)))
            shard, size = {}, 0
    if shard or not files:
        files.append(_save(out, shard, len(files)))
    (out / "config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    source = {
        "gguf": str(gguf.path),
        "name": str(gguf.get("general.name") or gguf.get("general.basename") or ""),
        "architecture": gguf.architecture,
        "converter": CONVERTER_VERSION,
    }
    (out / SOURCE_FILE).write_text(json.dumps(source, indent=2), encoding="utf-8")


def _save(out: Path, arrays: dict[str, np.ndarray], index: int) -> Path:
    path = out / f"model-{index:05d}.safetensors"
    write_safetensors(path, arrays, {"format": "mlx"})
    return path


def gguf_model_dir(path: Path) -> Path:
    """The converted directory for the GGUF file at ``path``, converting it on first use."""
    target = gguf_cache_dir() / f"{file_digest(path)[:16]}-v{CONVERTER_VERSION}"
    if (target / "config.json").exists():
        return target
    try:
        gguf = read_gguf(path)
    except (GGUFError, OSError) as exc:
        raise ModelUnavailable(str(exc)) from exc
    tmp: Path | None = None
    started = time.monotonic()
    try:
        _check(gguf)
        progress(f"converting {path.name} ({path.stat().st_size / 1e6:.0f} MB) into an MLX model, once")
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".convert-", dir=target.parent))
        convert(gguf, tmp)
        try:
            os.replace(tmp, target)
        except OSError:  # another process finished the same conversion first
            if not (target / "config.json").exists():
                raise
    except GGUFError as exc:  # its message names the file already
        raise ModelUnavailable(str(exc)) from exc
    except (UnsupportedArchitecture, UnsupportedQuantization, UnsupportedTokenizer) as exc:
        raise ModelUnavailable(f"{path}: {exc}") from exc
    finally:
        gguf.close()
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    log.info("converted %s (%s) in %.1f s into %s", path.name, gguf.architecture, time.monotonic() - started, target)
    return target
