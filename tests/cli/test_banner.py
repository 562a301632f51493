"""The ready banner says what the one model served takes in."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tinytitan.cli.banner import banner
from tinytitan.settings import Settings


@pytest.mark.parametrize("vision", [True, False])
def test_the_banner_says_when_the_model_takes_images(vision: bool) -> None:
    info = SimpleNamespace(id="m", context_window=8192, vision=vision)
    engine = SimpleNamespace(models=SimpleNamespace(catalog=None), info=info, backend=None)
    line = banner(engine, Settings(model="m", port=8000))  # type: ignore[arg-type]
    assert line.startswith("TinyTitan serving 'm' at http://127.0.0.1:8000/v1 (context 8192 tokens")
    assert ("context 8192 tokens, takes images, " in line) is vision
