"""The device worker: the one thread that calls MLX (issue 24, docs/architecture.md).

``DeviceWorker`` takes commands from one queue — activate a model, submit a row, cancel a row,
unload, close — and steps the resident model's ``Batch`` (mlx, the scripted stub, or rank 0 of a
distributed group). After every step it hands each row's new tokens and finish reason to the event
loop in one call; the ``Job`` there detokenizes and parses.
"""

from tinytitan.engine.device.batch import Batch, Output, Row
from tinytitan.engine.device.worker import DeviceWorker

__all__ = ["Batch", "DeviceWorker", "Output", "Row"]
