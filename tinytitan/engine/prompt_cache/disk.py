"""The disk tier of the prompt cache (``--prompt-cache-dir``): KV prefixes that survive a restart.

A KV prefix is kept as a chain of blocks of ``BLOCK`` tokens, one file each
(``prompt_cache_file``). Block ``i`` is named by a digest chained over the model identity and every
token up to its end: ``d₀ = sha256(format, version, model)``, ``dᵢ₊₁ = sha256(dᵢ ‖ tokens of block
i)``. So a file's name is its key (model identity + token prefix), a block is shared by every
conversation that begins with the same tokens, and a new turn of an agent session writes only the
blocks it added — a 2k-token system prompt is written once, not once per turn.

- **Lookup** (``covered`` / ``load``): the longest run of consecutive blocks on disk for a prompt.
  Every block read is checked (size, checksum, model, parent digest, index, its own token ids); a
  block that fails is logged, deleted and ends the chain there, so nothing loads wrong.
- **Save** (``save``): after a generation the engine hands over the snapshot; the blocks not yet on
  disk are written by a background thread (the device thread only takes zero-copy numpy views),
  in order, each atomically, owner-only. Plain KV layers in float32 / float16 / bfloat16 are
  written, and quantized ones (``--kv-bits``) as they are held — packed words, scales and biases, a
  quarter or half the bytes at 4 or 8 bits (``layers.py``); other cache kinds stay memory-only.
- **Eviction**: least recently used first, to the byte cap. A prefix is always "more recently used"
  than its own continuation (a hit on a long prefix touches every block of it), and evicting a
  block also evicts the blocks that continue it (they could never load again).
- **Startup**: the directory is scanned once (headers only). Files of another model or format
  version are never loaded (one log line says how many); a corrupt file is logged and removed;
  temporary files left by a crashed writer are removed.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import queue
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from tinytitan.engine.prompt_cache.file import (
    FORMAT,
    SUFFIX,
    VERSION,
    BadBlock,
    Layer,
    drop_abandoned,
    read_block,
    read_header,
    write_block,
)
from tinytitan.engine.prompt_cache.layers import Layout, caches, views

if TYPE_CHECKING:
    from tinytitan.engine.kv.form import KvForm

__all__ = ["BLOCK", "DiskTier", "chain"]

log = logging.getLogger("tinytitan.prompt_cache")

BLOCK = 256  # tokens per block file


def chain(model: str, tokens: Sequence[int], blocks: int, size: int = BLOCK) -> tuple[str, list[str]]:
    """The root digest for ``model`` and the digests of the first ``blocks`` blocks of ``tokens``."""
    h = hashlib.sha256(f"{FORMAT}/{VERSION}/{model}".encode()).digest()
    root = h.hex()
    digests = []
    for i in range(blocks):
        h = hashlib.sha256(h + np.asarray(tokens[i * size : (i + 1) * size], dtype="<u4").tobytes()).digest()
        digests.append(h.hex())
    return root, digests


def _digest(parent: str, tokens: Sequence[int]) -> str:
    return hashlib.sha256(bytes.fromhex(parent) + np.asarray(tokens, dtype="<u4").tobytes()).hexdigest()


@dataclass(slots=True)
class _Block:
    name: str
    model: str  # "" for a file of another format version
    parent: str
    index: int
    nbytes: int
    used: int  # ns; persisted as the file's mtime


@dataclass(slots=True)
class _Write:
    model: str
    root: str
    names: list[str]
    tokens: tuple[int, ...]
    missing: list[int]
    layout: Layout
    layers: list[Layer]  # full-length views of each layer's tensors
    used: int


class DiskTier:
    def __init__(self, directory: str | Path, max_bytes: int, block: int = BLOCK, kv: KvForm | None = None) -> None:
        self.directory = Path(directory).expanduser()
        self.kv = kv  # the model's KV form: the rows ``load`` builds are its rows
        self.max_bytes = max_bytes
        self.block = block
        self._index: dict[str, _Block] = {}
        self._pending: set[str] = set()
        self._lock = threading.Lock()
        self._scanned = False
        self._announced: set[str] = set()
        self._jobs: queue.Queue[_Write | None] = queue.Queue(maxsize=4)
        self._writer: threading.Thread | None = None
        self._write_errors = 0
        self._spent: list[_Write] = []  # written jobs: their MLX arrays are freed by ``save`` (device thread)

    # -- inspection -------------------------------------------------------------------------------
    @property
    def nbytes(self) -> int:
        with self._lock:
            return sum(b.nbytes for b in self._index.values())

    def files(self) -> list[Path]:
        with self._lock:
            return [self._path(name) for name in self._index]

    # -- lookup -----------------------------------------------------------------------------------
    def covered(self, model: str, tokens: Sequence[int], limit: int) -> int:
        """How many leading tokens (≤ ``limit``) consecutive blocks on disk hold for ``model``."""
        blocks = max(0, limit) // self.block
        if blocks == 0:
            return 0
        self._ensure_scanned()
        self._announce(model)
        _root, names = chain(model, tokens, blocks, self.block)
        with self._lock:
            n = 0
            for name in names:
                block = self._index.get(name)
                if block is None or block.model != model:
                    break
                n += 1
        return n * self.block

    def load(self, model: str, tokens: Sequence[int], n: int) -> tuple[list[Any] | None, int]:
        """KV caches holding the first ``n`` tokens (a multiple of the block), or fewer if a block fails."""
        root, names = chain(model, tokens, n // self.block, self.block)
        parts: list[tuple[Layout, list[Layer]]] = []
        for i, name in enumerate(names):
            expected = tuple(tokens[i * self.block : (i + 1) * self.block])
            try:
                header, layers = read_block(self._path(name))
                if header.model != model:
                    raise BadBlock("written for another model")
                if header.parent != (names[i - 1] if i else root) or header.index != i:
                    raise BadBlock("not part of this prefix")
                if header.tokens != expected:
                    raise BadBlock("holds other tokens than its name says")
                layout = Layout(header.dtype, header.bits, header.group_size)
                if parts and not _joins(parts, layout, layers):
                    raise BadBlock("its layers do not match the blocks before it")
            except FileNotFoundError:
                self._forget(name)
                break
            except (BadBlock, OSError) as exc:
                log.warning("ignoring prompt-cache file %s: %s", self._path(name), exc)
                self._remove(name)
                break
            parts.append((layout, layers))
        if not parts:
            return None, 0
        self._touch(names[: len(parts)])
        return caches(parts, self.kv), len(parts) * self.block

    # -- save -------------------------------------------------------------------------------------
    def save(self, model: str, tokens: Sequence[int], cache: list[Any]) -> None:
        """Queue the blocks of ``cache`` (holding ``tokens``) that are not on disk yet."""
        with self._lock:  # CUDA frees MLX arrays only on the device thread: written jobs are let go here
            self._spent = []
        found = views(cache)
        if found is None:
            return
        layout, layers = found
        blocks = min(len(tokens), layers[0]["k"].shape[2]) // self.block
        per_block = sum(x[:, :, : self.block].nbytes for layer in layers for x in layer.values())
        if blocks == 0 or per_block > self.max_bytes:
            return
        self._ensure_scanned()
        self._announce(model)
        root, names = chain(model, tokens, blocks, self.block)
        now = time.time_ns()
        with self._lock:
            missing = [i for i, name in enumerate(names) if name not in self._index and name not in self._pending]
            self._pending.update(names[i] for i in missing)
        absent = set(missing)
        self._touch([n for i, n in enumerate(names) if i not in absent], now)
        if not missing:
            return
        job = _Write(model, root, names, tuple(tokens[: blocks * self.block]), missing, layout, layers, now)
        self._start_writer()
        try:
            self._jobs.put_nowait(job)
        except queue.Full:  # the disk is slower than the traffic: skip this snapshot, keep serving
            with self._lock:
                self._pending.difference_update(names[i] for i in missing)
            log.debug("prompt-cache disk writer busy; a snapshot was not written")

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every queued block is written (tests, unload, shutdown); False on timeout."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            with self._lock:
                if not self._pending and self._jobs.unfinished_tasks == 0:
                    return True
            if deadline is not None and time.monotonic() > deadline:
                return False
            time.sleep(0.01)

    # -- the writer thread ------------------------------------------------------------------------
    def _start_writer(self) -> None:
        with self._lock:
            if self._writer is None or not self._writer.is_alive():
                self._writer = threading.Thread(target=self._write_loop, name="tinytitan-kv-writer", daemon=True)
                self._writer.start()

    def _write_loop(self) -> None:
        while True:
            job = self._jobs.get()
            try:
                if job is None:
                    return
                self._write(job)
            except Exception:
                log.exception("prompt-cache disk writer failed")
            finally:
                if job is not None:
                    with self._lock:
                        self._pending.difference_update(job.names[i] for i in job.missing)
                        self._spent.append(job)
                    del job
                self._jobs.task_done()

    def _write(self, job: _Write) -> None:
        size = self.block
        for i in job.missing:
            name = job.names[i]
            a, b = i * size, (i + 1) * size
            try:
                nbytes = write_block(
                    self._path(name),
                    model=job.model,
                    parent=job.names[i - 1] if i else job.root,
                    index=i,
                    tokens=job.tokens[a:b],
                    dtype=job.layout.dtype,
                    layers=[{role: x[:, :, a:b] for role, x in layer.items()} for layer in job.layers],
                    bits=job.layout.bits,
                    group_size=job.layout.group_size,
                )
            except OSError as exc:
                self._write_errors += 1
                if self._write_errors in (1, 10, 100):
                    log.warning("cannot write the prompt cache to %s: %s", self.directory, exc)
                return
            used = job.used - i
            os.utime(self._path(name), ns=(used, used))
            with self._lock:
                self._index[name] = _Block(name, job.model, job.names[i - 1] if i else job.root, i, nbytes, used)
                self._pending.discard(name)
            self._evict()

    # -- bookkeeping ------------------------------------------------------------------------------
    def _path(self, name: str) -> Path:
        return self.directory / f"{name}{SUFFIX}"

    def _touch(self, names: list[str], now: int | None = None) -> None:
        """Mark blocks used; earlier blocks of a chain count as more recent than later ones."""
        now = time.time_ns() if now is None else now
        for name in names:
            with self._lock:
                block = self._index.get(name)
                if block is None:
                    continue
                block.used = now - block.index
            with contextlib.suppress(OSError):
                os.utime(self._path(name), ns=(block.used, block.used))

    def _forget(self, name: str) -> None:
        with self._lock:
            self._index.pop(name, None)

    def _remove(self, name: str) -> None:
        """Delete a block and every block continuing it."""
        with self._lock:
            doomed = self._descendants(name)
            for n in doomed:
                self._index.pop(n, None)
        for n in doomed:
            self._path(n).unlink(missing_ok=True)

    def _descendants(self, name: str) -> list[str]:
        """``name`` and every indexed block whose chain runs through it (call under the lock)."""
        children: dict[str, list[str]] = {}
        for block in self._index.values():
            children.setdefault(block.parent, []).append(block.name)
        out, todo = [], [name]
        while todo:
            n = todo.pop()
            out.append(n)
            todo.extend(children.get(n, ()))
        return out

    def _evict(self) -> None:
        doomed: list[str] = []
        with self._lock:
            total = sum(b.nbytes for b in self._index.values())
            while total > self.max_bytes and self._index:
                oldest = min(self._index.values(), key=lambda b: (b.used, -b.index))
                for n in self._descendants(oldest.name):
                    block = self._index.pop(n, None)
                    if block is not None:
                        total -= block.nbytes
                        doomed.append(n)
        for n in doomed:
            self._path(n).unlink(missing_ok=True)

    def _announce(self, model: str) -> None:
        if model in self._announced:
            return
        with self._lock:
            self._announced.add(model)
            mine = [b for b in self._index.values() if b.model == model]
            others = len(self._index) - len(mine)
        mib = sum(b.nbytes for b in mine) / 2**20
        note = f"; {others} files of other models or format versions are never loaded here" if others else ""
        log.info(
            "prompt cache on disk at %s: %d blocks (%.0f MiB) for this model%s", self.directory, len(mine), mib, note
        )

    def _ensure_scanned(self) -> None:
        with self._lock:
            if self._scanned:
                return
            self._scanned = True
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        found: dict[str, _Block] = {}
        for entry in os.scandir(self.directory):
            path = Path(entry.path)
            if entry.name.endswith(".tmp") and entry.name.startswith("."):
                drop_abandoned(path)
                continue
            if not entry.name.endswith(SUFFIX) or not entry.is_file():
                continue
            name = entry.name[: -len(SUFFIX)]
            try:
                header = read_header(path)
                used = entry.stat().st_mtime_ns
                if header.version != VERSION:
                    found[name] = _Block(name, "", "", 0, header.file_bytes, used)
                    continue
                if _digest(header.parent, header.tokens) != name:
                    raise BadBlock("its contents do not match its name")
            except BadBlock as exc:
                log.warning("ignoring corrupt prompt-cache file %s: %s (removed)", path, exc)
                path.unlink(missing_ok=True)
                continue
            except OSError as exc:
                log.warning("cannot read prompt-cache file %s: %s", path, exc)
                continue
            found[name] = _Block(name, header.model, header.parent, header.index, header.file_bytes, used)
        with self._lock:
            found.update(self._index)
            self._index = found
        self._evict()


def _joins(parts: list[tuple[Layout, list[Layer]]], layout: Layout, layers: list[Layer]) -> bool:
    """Whether a block continues the ones before it: as many layers, the same float dtype, and one
    quantization among the quantized blocks (a full-precision block may sit among quantized ones)."""
    first, before = parts[0]
    if len(layers) != len(before) or layout.dtype != first.dtype:
        return False
    quantized = {(p.bits, p.group_size) for p, _ in parts if p.bits is not None}
    return layout.bits is None or not quantized or quantized == {(layout.bits, layout.group_size)}
