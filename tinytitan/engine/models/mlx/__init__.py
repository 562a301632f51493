"""The mlx backend (mlx-lm): a real model on the one generation path.

Importing this package does not import mlx; that happens when a model is loaded or rendered.
"""

from tinytitan.engine.models.files import ModelUnavailable
from tinytitan.engine.models.mlx.backend import MlxBackend
from tinytitan.engine.models.mlx.resolve import DEFAULT_MODEL, ModelSource, resolve_model

__all__ = ["DEFAULT_MODEL", "MlxBackend", "ModelSource", "ModelUnavailable", "resolve_model"]
