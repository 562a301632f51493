"""Server settings: every ``serve`` flag, also readable from a ``TINYTITAN_*`` environment variable.

The CLI fills one ``Settings``; the app and the engine read only this object.
"""

from __future__ import annotations

import ipaddress
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tinytitan.engine.kv.form import KvForm

__all__ = [
    "DEFAULT_HOST",
    "DEFAULT_PORT",
    "MEMORY_SURFACES",
    "Settings",
    "SettingsError",
    "is_loopback",
]

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8096
BODY_LIMIT = 32 * 1024 * 1024
HEADER_LIMIT = 64 * 1024  # request line + headers


MEMORY_SURFACES = ("off", "minimal", "full")


class SettingsError(ValueError):
    """A setting that cannot be served; the message says why and what to do."""


def check_sampling_defaults(values: Mapping[str, float]) -> None:
    """serve's sampling flags, in the ranges a request's own values have (``request/sampling.py``)."""
    from tinytitan.engine.request.sampling import by_name, out_of_range

    for key, value in values.items():
        knob = by_name(key)
        why = out_of_range(knob, value)
        if why is not None:
            raise SettingsError(f"{knob.flag} {why}, not {value:g}")


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@dataclass
class Settings:
    model: str | None = None
    model_id: str | None = None
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    api_key: str | None = None
    cors_origins: list[str] = field(default_factory=list)
    queue_limit: int = 4
    max_concurrent: int = 4  # generations decoded together in one batch (README: why 4)
    drafts: bool = True  # speculative decoding with prompt-lookup drafts (README: Drafts)
    draft_model: str | None = None  # … and a draft model's where the lookup has none
    max_context: int | None = None
    reasoning: str | None = None
    stub: str | None = None
    log_level: str = "info"
    body_limit: int = BODY_LIMIT
    header_limit: int = HEADER_LIMIT  # a bigger request head → 431
    header_timeout: float = 10.0  # seconds to send a whole request head (slow loris) → 408 + close
    keep_alive_timeout: int = 30  # idle seconds before a kept-alive connection closes
    prompt_cache_entries: int = 4
    prompt_cache_mib: int = 2048
    prompt_cache_dir: str | None = None  # the disk tier of the prompt cache (off when None)
    prompt_cache_disk_mib: int = 8192
    dtype: str = "auto"
    # the KV cache (README: Long contexts): quantized with --kv-bits, every model of the server
    kv_bits: int | None = None  # 4 or 8; None: full precision
    kv_group_size: int = 64
    quantized_kv_start: int = 0  # a batch is quantized once it holds this many tokens
    # bytes for every row's KV cache and the prompt cache together; None: the default share; 0: no bound
    max_kv_memory: int | None = None
    parallel: str = "auto"  # under mlx.launch: auto | tensor | pipeline (issue #19)
    distributed_timeout: float = 60.0  # seconds before a silent rank counts as lost
    keepalive_seconds: float = 5.0  # SSE keepalive interval (reference §1)
    websockets: bool = True  # Responses over WebSocket (GET /v1/responses + Upgrade); off → 426
    websocket_max_age: float = 3600.0  # seconds a WebSocket connection may live
    strip_cli_prompt: bool = False  # apply the -fast strip to every request (reference §10)
    strip_tags: tuple[str, ...] = ("system-reminder",)  # spans the strip cuts
    # agent memory (reference §14): off unless asked for
    memory: bool = False
    memory_tools: str = "full"  # off | minimal | full
    memory_tool_rounds: int = 4  # memory-only turns the server runs before a tool-free answer
    memory_dir: str | None = None  # None: tinytitan.paths.default_memory_dir()
    memory_fsync: bool = False  # sync the journal on every write
    memory_max_records: int = 5000  # per workspace; beyond it the least important go first
    memory_max_mib: int = 32  # per workspace, keys and values
    launch_dir: str | None = None  # the workspace of a request that declares none (the CLI's cwd)
    sampling_defaults: dict[str, float] = field(default_factory=dict)  # serve's --temperature …, over the model's
    models_dirs: tuple[str, ...] = ()  # a catalog: directories of model directories, or "hf" (the hub cache)
    # images a request may send a vision model (README: Vision models)
    max_images: int = 20  # per request
    max_image_mib: float = 20.0  # one image's encoded size
    max_image_pixels: int = 40_000_000  # width × height (a decompression bomb is refused unread)
    allow_image_urls: bool = False  # fetch http(s) image URLs (off: refused, so no SSRF)

    def check(self) -> None:
        """Refuse settings that would be unsafe or meaningless, before anything starts."""
        if not is_loopback(self.host) and not self.api_key:
            raise SettingsError(
                f"refusing to listen on {self.host} without --api-key: any machine that can reach it could "
                "use the model. Pass --api-key KEY (clients then send it as a Bearer token or x-api-key), "
                "or bind to 127.0.0.1."
            )
        if self.max_concurrent < 1:
            raise SettingsError("--max-concurrent must be at least 1")
        if self.draft_model and not self.drafts:
            raise SettingsError("--draft-model drafts for speculative decoding, which --no-drafts turns off: drop one")
        if self.draft_model and (self.stub or self.models_dirs):
            raise SettingsError("--draft-model drafts for one --model: leave it out with --stub or --models-dir")
        if self.queue_limit < 0:
            raise SettingsError("--queue-limit must be 0 or more")
        if not (math.isfinite(self.keepalive_seconds) and self.keepalive_seconds > 0):
            raise SettingsError("--keepalive must be a positive number of seconds")
        if not (math.isfinite(self.websocket_max_age) and self.websocket_max_age > 0):
            raise SettingsError("--websocket-max-age must be a positive, finite number of seconds")
        if self.parallel not in ("auto", "tensor", "pipeline"):
            raise SettingsError(f"--parallel takes auto, tensor or pipeline, not '{self.parallel}'")
        if self.distributed_timeout <= 0:
            raise SettingsError("--distributed-timeout must be a positive number of seconds")
        if self.prompt_cache_disk_mib < 1:
            raise SettingsError("--prompt-cache-disk-mib must be at least 1")
        if self.max_context is not None and self.max_context < 16:
            raise SettingsError("--max-context must be at least 16 tokens")
        if self.memory_tools not in MEMORY_SURFACES:
            raise SettingsError(f"--memory-tools takes off, minimal or full, not '{self.memory_tools}'")
        if self.max_images < 0:
            raise SettingsError("--max-images must be 0 or more")
        if not (math.isfinite(self.max_image_mib) and self.max_image_mib > 0):
            raise SettingsError("--max-image-mib must be a positive number")
        if self.max_image_pixels < 1:
            raise SettingsError("--max-image-pixels must be at least 1")
        if not 0 <= self.memory_tool_rounds <= 32:
            raise SettingsError("--memory-tool-rounds must be from 0 to 32")
        if self.memory_max_records < 1 or self.memory_max_mib < 1:
            raise SettingsError("--memory-max-records and --memory-max-mib must be at least 1")
        check_sampling_defaults(self.sampling_defaults)
        form = self.kv_form()
        if form is not None and (why := form.problem()) is not None:
            raise SettingsError(why)
        if self.max_kv_memory is not None and self.max_kv_memory < 0:
            raise SettingsError("--max-kv-memory takes a size (8GiB, 512MiB), or off")
        if self.models_dirs and self.stub:
            raise SettingsError("give --models-dir or --stub, not both")
        if self.models_dirs and self.model_id:
            raise SettingsError("--model-id cannot rename a catalog: each model is served under its directory name")

    def kv_form(self) -> KvForm | None:
        """The quantized KV cache's form ``--kv-bits`` asks for, or None (full precision)."""
        if self.kv_bits is None:
            return None
        from tinytitan.engine.kv.form import KvForm

        return KvForm(self.kv_bits, self.kv_group_size, self.quantized_kv_start)
