"""``Readiness`` and the progress lines the loading code says (tinytitan.engine.readiness)."""

from __future__ import annotations

import threading

from tinytitan.engine.readiness import Readiness, listen, progress


def test_loading_then_ready_with_the_step_under_way() -> None:
    readiness = Readiness()
    settled: list[str] = []
    readiness.on_change(lambda r: settled.append(r.state))
    assert readiness.as_json() == {"status": "loading"}
    with listen(readiness.note):
        progress("loading weights (94 MB)")
    progress("said after the block: not heard")
    assert readiness.as_json() == {"status": "loading", "step": "loading weights (94 MB)"}
    readiness.ready()
    readiness.fail("too late: ready stays ready")
    assert readiness.as_json() == {"status": "ok"} and settled == ["ready"]
    late: list[str] = []
    readiness.on_change(lambda r: late.append(r.state))  # registered after: called at once
    assert late == ["ready"]


def test_failed_carries_the_error() -> None:
    readiness = Readiness()
    settled: list[str] = []
    readiness.on_change(lambda r: settled.append(r.state))
    loader = threading.Thread(target=lambda: readiness.fail("model 'm' could not be loaded: gone"))
    loader.start()
    loader.join()
    assert settled == ["failed"]
    assert readiness.as_json() == {"status": "failed", "error": "model 'm' could not be loaded: gone"}
