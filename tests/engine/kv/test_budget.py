"""``KvBudget``: reservations, the prompt caches' room, the refusal's words, the default and its log line."""

from __future__ import annotations

import logging
import sys

import pytest

from tinytitan.engine.kv.budget import LOG_EVERY, KvBudget, available_memory, default_limit, size_text


def test_reservations_fit_until_the_limit() -> None:
    budget = KvBudget(1000)
    assert budget.fits(1000) and not budget.fits(1001)
    budget.reserve(700)
    assert budget.fits(300) and not budget.fits(301)
    budget.release(700)
    assert budget.reserved == 0


def test_a_prompt_cache_gets_what_the_rows_and_the_other_caches_leave() -> None:
    budget = KvBudget(1000)
    held = {"a": 200, "b": 100}
    budget.cached = lambda: sum(held.values())
    budget.reserve(500)
    assert budget.room(held["a"]) == 400  # 1000 - 500 reserved - 100 of the other cache
    budget.reserve(450)
    assert budget.room(held["b"]) == 0  # never negative: the cache lets everything go
    assert budget.as_json(waiting=1) == {
        "limit_bytes": 1000,
        "used_bytes": 1250,
        "rows_bytes": 950,
        "prompt_cache_bytes": 300,
        "rows": 2,
        "waiting": 1,
        "source": "--max-kv-memory",
    }


def test_the_refusal_names_the_budget_and_what_fits() -> None:
    why = KvBudget(2**20).refusal(prompt_tokens=1200, token_bytes=1024)
    assert why.startswith("the prompt has 1200 tokens, whose KV cache would take 1.2 MiB")
    assert "KV memory budget of 1.0 MiB (--max-kv-memory) holds 1024 tokens" in why and "--max-kv-memory" in why


def test_use_is_logged_once_a_minute_while_rows_run(caplog: pytest.LogCaptureFixture) -> None:
    budget = KvBudget(2**30)
    caplog.set_level(logging.INFO, logger="tinytitan.engine")
    assert not budget.tick(waiting=0, now=1000.0)  # idle: nothing to say
    budget.reserve(3 * 2**20)
    assert budget.tick(waiting=2, now=1000.0)
    assert not budget.tick(waiting=2, now=1000.0 + LOG_EVERY / 2)
    assert budget.tick(waiting=0, now=1000.0 + LOG_EVERY)
    lines = [r.getMessage() for r in caplog.records]
    assert lines[0] == "KV memory 3.0 MiB of 1.0 GiB: 1 rows 3.0 MiB, prompt cache 0 bytes, 2 waiting for room"
    assert len(lines) == 2


def test_the_default_is_half_of_what_the_weights_leave_free() -> None:
    chosen = default_limit(weights=2 * 2**30, free=10 * 2**30)
    assert chosen == (4 * 2**30, "half of the 10 GiB free at start, less 2.0 GiB of weights")
    floor = default_limit(weights=8 * 2**30, free=2**30)
    assert floor is not None and floor[0] == 64 * 2**20  # nothing left: still room for short prompts


@pytest.mark.skipif(sys.platform not in ("linux", "darwin"), reason="the systems whose free memory is read")
def test_this_machine_says_what_it_has_free() -> None:
    free = available_memory()
    assert free is not None and free > 0


def test_sizes_read_as_people_write_them() -> None:
    assert [size_text(n) for n in (512, 3 * 2**10, 1.5 * 2**20, 24 * 2**30)] == [
        "512 bytes",
        "3.0 KiB",
        "1.5 MiB",
        "24 GiB",
    ]
