"""The prompt cache's disk tier: block chains keyed by model + prefix, checked reads, LRU to a cap."""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path
from typing import Any

import mlx.core as mx
import numpy as np
import pytest
from mlx_lm.models.cache import KVCache

from tinytitan.engine.prompt_cache.disk import DiskTier, chain
from tinytitan.engine.prompt_cache.file import SUFFIX, read_header
from tinytitan.engine.prompt_cache.memory import PromptCache

pytestmark = pytest.mark.usefixtures("device")  # these tests call MLX themselves, as the device worker

BLOCK = 4


def kv(tokens: list[int], layers: int = 2, dtype: Any = mx.float32) -> list[Any]:
    """A KV cache whose key at position i holds the token id (values hold its negative)."""
    caches = []
    for layer in range(layers):
        c = KVCache()
        x = mx.array(tokens, dtype=mx.float32).reshape(1, 1, len(tokens), 1)
        x = mx.concatenate([x, x + layer], axis=3).astype(dtype)  # (1, 1, T, 2)
        c.update_and_fetch(x, -x)
        caches.append(c)
    return caches


def keys_of(cache: list[Any], layer: int = 0) -> list[float]:
    keys, _values = cache[layer].keys_and_values()
    return [float(v) for v in keys[0, 0, :, 0].astype(mx.float32).tolist()]


def tier(directory: Path, cap: int = 2**30) -> DiskTier:
    return DiskTier(directory, cap, block=BLOCK)


def saved(t: DiskTier, model: str, tokens: list[int], **kw: Any) -> None:
    t.save(model, tokens, kv(tokens, **kw))
    assert t.flush(timeout=30)


def files(directory: Path) -> list[Path]:
    return sorted(directory.glob(f"*{SUFFIX}"))


def test_blocks_are_written_owner_only_and_reload_after_a_restart(tmp_path: Path) -> None:
    directory = tmp_path / "kv"
    tokens = list(range(1, 11))  # 10 tokens: two whole blocks of 4, the tail stays memory-only
    saved(tier(directory), "m", tokens)
    assert len(files(directory)) == 2
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in files(directory))
    again = tier(directory)  # a new process: only the files
    prompt = [*tokens, 99]
    assert again.covered("m", prompt, len(prompt) - 1) == 8
    cache, n = again.load("m", prompt, 8)
    assert n == 8 and cache is not None and cache[0].offset == 8
    assert keys_of(cache) == [float(t) for t in tokens[:8]]
    assert keys_of(cache, layer=1) == [float(t) for t in tokens[:8]]
    _k, values = cache[1].keys_and_values()
    assert values[0, 0, :, 1].tolist() == [-(t + 1.0) for t in tokens[:8]]


def test_a_new_turn_writes_only_the_blocks_it_added(tmp_path: Path) -> None:
    t = tier(tmp_path)
    saved(t, "m", list(range(8)))
    before = {p.name: p.stat().st_mtime_ns for p in files(tmp_path)}
    saved(t, "m", list(range(12)))
    after = files(tmp_path)
    assert len(after) == 3 and set(before) < {p.name for p in after}


def test_the_key_is_the_model_and_the_whole_prefix(tmp_path: Path) -> None:
    t = tier(tmp_path)
    saved(t, "m", [1, 2, 3, 4, 5, 6, 7, 8])
    assert t.covered("m", [1, 2, 3, 4, 5, 6, 7, 8, 9], 8) == 8
    assert t.covered("m", [1, 2, 3, 4, 0, 6, 7, 8, 9], 8) == 4  # the second block continues another prefix
    assert t.covered("m", [0, 2, 3, 4, 5, 6, 7, 8, 9], 8) == 0
    assert t.covered("other", [1, 2, 3, 4, 5, 6, 7, 8, 9], 8) == 0
    assert t.covered("m", [1, 2, 3, 4, 5, 6, 7, 8], 7) == 4  # never the whole prompt


def test_bfloat16_round_trips(tmp_path: Path) -> None:
    saved(tier(tmp_path), "m", [1, 2, 3, 4], dtype=mx.bfloat16)
    cache, n = tier(tmp_path).load("m", [1, 2, 3, 4, 5], 4)
    assert n == 4 and cache is not None and cache[0].keys.dtype == mx.bfloat16
    assert keys_of(cache) == [1.0, 2.0, 3.0, 4.0]


def test_a_foreign_model_is_never_loaded_and_is_logged(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    saved(tier(tmp_path), "model-a", [1, 2, 3, 4, 5])
    caplog.set_level(logging.INFO, logger="tinytitan.prompt_cache")
    pc = PromptCache(disk=tier(tmp_path))
    assert pc.fetch([1, 2, 3, 4, 5], model="model-b") == (None, 0)
    assert "1 files of other models or format versions are never loaded here" in caplog.text


def test_a_block_renamed_into_another_chain_is_ignored(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    saved(tier(tmp_path), "model-a", [1, 2, 3, 4])
    _root, (name,) = chain("model-b", [1, 2, 3, 4], 1, BLOCK)
    (only,) = files(tmp_path)
    only.rename(tmp_path / f"{name}{SUFFIX}")  # model b would look exactly here
    caplog.set_level(logging.WARNING, logger="tinytitan.prompt_cache")
    t = tier(tmp_path)
    assert t.covered("model-b", [1, 2, 3, 4, 5], 4) == 0
    assert "do not match its name" in caplog.text
    assert files(tmp_path) == []


def test_a_flipped_byte_is_caught_by_the_checksum(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    saved(tier(tmp_path), "m", list(range(12)))
    t = tier(tmp_path)
    assert t.covered("m", list(range(13)), 12) == 12
    _root, names = chain("m", list(range(12)), 3, BLOCK)
    second = tmp_path / f"{names[1]}{SUFFIX}"
    data = bytearray(second.read_bytes())
    data[-3] ^= 0xFF
    second.write_bytes(bytes(data))
    caplog.set_level(logging.WARNING, logger="tinytitan.prompt_cache")
    cache, n = t.load("m", list(range(13)), 12)
    assert n == 4 and cache is not None and keys_of(cache) == [0.0, 1.0, 2.0, 3.0]  # the chain ends before it
    assert "checksum mismatch" in caplog.text
    assert not second.exists() and not (tmp_path / f"{names[2]}{SUFFIX}").exists()  # and what continued it
    assert t.covered("m", list(range(13)), 12) == 4


def test_a_truncated_file_is_removed_at_startup(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    saved(tier(tmp_path), "m", [1, 2, 3, 4])
    (only,) = files(tmp_path)
    only.write_bytes(only.read_bytes()[:-5])
    caplog.set_level(logging.WARNING, logger="tinytitan.prompt_cache")
    assert tier(tmp_path).covered("m", [1, 2, 3, 4, 5], 4) == 0
    assert "ignoring corrupt prompt-cache file" in caplog.text and not only.exists()


def test_garbage_is_ignored(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    (tmp_path / f"{'0' * 64}{SUFFIX}").write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00not json at all!")
    caplog.set_level(logging.WARNING, logger="tinytitan.prompt_cache")
    assert tier(tmp_path).covered("m", [1, 2, 3, 4, 5], 4) == 0
    assert "unreadable header" in caplog.text


def test_a_file_of_another_format_version_is_kept_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import tinytitan.engine.prompt_cache.file as fmt

    monkeypatch.setattr(fmt, "VERSION", 99)
    saved(tier(tmp_path), "m", [1, 2, 3, 4])
    monkeypatch.undo()
    (only,) = files(tmp_path)
    assert read_header(only).version == 99
    t = tier(tmp_path)
    assert t.covered("m", [1, 2, 3, 4, 5], 4) == 0
    assert t.nbytes == only.stat().st_size  # still counted against the cap (and evictable)


def test_a_crash_mid_write_leaves_no_block(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def crash(_fd: int) -> None:
        raise OSError("disk gone")

    monkeypatch.setattr(os, "fsync", crash)
    saved(tier(tmp_path), "m", [1, 2, 3, 4])
    assert list(tmp_path.iterdir()) == []


def test_abandoned_temporary_files_are_cleaned(tmp_path: Path) -> None:
    dead = tmp_path / f".{'1' * 64}{SUFFIX}.999999999.tmp"
    dead.write_bytes(b"partial")
    live = tmp_path / f".{'2' * 64}{SUFFIX}.{os.getpid()}.tmp"
    live.write_bytes(b"being written")
    tier(tmp_path).covered("m", [1, 2, 3, 4, 5], 4)
    assert not dead.exists() and live.exists()


def test_lru_to_the_cap_evicts_continuations_before_their_prefix(tmp_path: Path) -> None:
    t = tier(tmp_path)
    saved(t, "m", list(range(8)))
    one = t.nbytes // 2
    t.max_bytes = 3 * one
    saved(t, "m", [50, 51, 52, 53])  # newest: 3 blocks on disk now
    saved(t, "m", [60, 61, 62, 63])  # 4 > 3: the oldest goes — the continuation of range(8)
    assert t.covered("m", [*range(8), 9], 8) == 4
    assert t.covered("m", [50, 51, 52, 53, 9], 4) == 4
    assert len(files(tmp_path)) == 3
    t.max_bytes = one
    saved(t, "m", [70, 71, 72, 73])
    assert [t.covered("m", [70, 71, 72, 73, 9], 4), t.covered("m", [*range(8), 9], 8)] == [4, 0]
    assert len(files(tmp_path)) == 1


def test_a_hit_keeps_a_prefix_warm(tmp_path: Path) -> None:
    t = tier(tmp_path)
    saved(t, "m", [1, 2, 3, 4])
    one = t.nbytes
    t.max_bytes = 2 * one
    saved(t, "m", [5, 6, 7, 8])
    t.load("m", [1, 2, 3, 4, 0], 4)  # used again: now [5..8] is the least recent
    saved(t, "m", [9, 9, 9, 9])
    assert t.covered("m", [1, 2, 3, 4, 0], 4) == 4 and t.covered("m", [5, 6, 7, 8, 0], 4) == 0


def test_prompt_cache_prefers_the_longer_of_memory_and_disk(tmp_path: Path) -> None:
    pc = PromptCache(disk=tier(tmp_path))
    pc.store(list(range(10)), kv(list(range(10))), model="m")
    assert pc.flush(timeout=30)
    cache, n = pc.fetch([*range(10), 11], model="m")
    assert n == 10  # memory holds all ten; disk only the two whole blocks
    pc.clear()
    cache, n = pc.fetch([*range(10), 11], model="m")
    assert n == 8 and cache is not None and keys_of(cache) == [float(t) for t in range(8)]
    assert pc.fetch([*range(10), 11], model="other") == (None, 0)


def test_memory_snapshots_are_keyed_by_model() -> None:
    pc = PromptCache()
    pc.store([1, 2, 3], kv([1, 2, 3]), model="a")
    pc.store([1, 2, 3], kv([1, 2, 3]), model="b")
    assert pc.snapshots("a") == [(1, 2, 3)] and len(pc) == 2
    assert pc.fetch([1, 2, 3, 4], model="c") == (None, 0)
    assert pc.fetch([1, 2, 3, 4], model="a")[1] == 3
    pc.clear("a")
    assert pc.snapshots() == [(1, 2, 3)] and pc.snapshots("a") == []


def test_other_cache_kinds_stay_memory_only(tmp_path: Path) -> None:
    from mlx_lm.models.cache import ArraysCache

    state = ArraysCache(1)
    state[0] = mx.zeros((1, 3))
    t = tier(tmp_path)
    t.save("m", [1, 2, 3, 4, 5], [state])
    assert t.flush(timeout=30) and files(tmp_path) == []


def test_the_writer_leaves_the_freeing_of_mlx_arrays_to_the_device_thread(tmp_path: Path) -> None:
    """A written job's views hold MLX arrays; MLX on CUDA must free them on the device thread, so
    the writer hands written jobs back and the next ``save`` (the device thread's) drops them."""
    t = tier(tmp_path)
    saved(t, "m", list(range(8)))
    (job,) = t._spent
    assert all(isinstance(x, np.ndarray) and not x.flags.owndata for layer in job.layers for x in layer.values())
    del job
    saved(t, "m", list(range(12)))
    assert len(t._spent) == 1  # the first job was let go by that save, the second waits for the next
