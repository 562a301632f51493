"""Shared fixtures: the tiny real model is built once per machine (cached) and once per session."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def tiny_dir() -> Path:
    """A real MLX model directory (tinytitan.testing.tiny_model), cached under ~/.cache/tinytitan."""
    from tinytitan.testing.tiny_model import tiny_model_dir

    return tiny_model_dir()
