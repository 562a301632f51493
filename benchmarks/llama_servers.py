"""llama.cpp's servers for the benchmarks' llama.cpp column, and a GGUF both sides can serve.

- ``llama-server``: llama.cpp's own server (parallel slots, continuous batching), built by
  ``tools/llama/build.sh`` into ``~/.cache/tinytitan/llama.cpp/bin/`` (or on ``PATH``, or named by
  ``--llama-server`` / ``$LLAMA_SERVER``);
- ``llama-cpp-python``'s server (``pip install "llama-cpp-python[server]"``, built for this CPU) in
  the interpreter ``--llama-python`` names: the fallback when no ``llama-server`` is found.

Both are optional benchmark dependencies, not project ones. ``peer_gguf()`` writes (once, cached)
the Qwen3-0.6B-shape test model (``tinytitan.testing.tiny_model``, random weights, Qwen's real
tokenizer) as a Q8_0 GGUF file with Qwen3-0.6B's own chat template, which renders tools, so a tool-carrying agent prompt
is the same token sequence on both sides — the benchmarks print both sides' prompt token counts.

Build note: on a CPU with AMX in a VM a native llama.cpp build (``GGML_NATIVE=ON``, the default)
crashed on any multi-token prompt; ``tools/llama/build.sh`` builds with ``GGML_NATIVE=OFF`` and AMX
off (AVX2/FMA/F16C kept), and so should ``CMAKE_ARGS`` for ``llama-cpp-python``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from peer import Target, stopped_after, wait_healthy, warm_up  # noqa: E402

from tinytitan.cores import usable_cores  # noqa: E402
from tinytitan.paths import cache_root  # noqa: E402
from tinytitan.testing.process import free_port  # noqa: E402

BUILD_HINT = "bash tools/llama/build.sh"


def llama_cache() -> Path:
    return Path(os.environ.get("LLAMA_CACHE") or Path.home() / ".cache" / "tinytitan" / "llama.cpp")


def find_llama_server(explicit: str | None = None) -> Path | None:
    """``explicit``, else ``$LLAMA_SERVER``, else the build script's output, else ``llama-server`` on PATH."""
    for candidate in (explicit, os.environ.get("LLAMA_SERVER"), str(llama_cache() / "bin" / "llama-server")):
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return Path(candidate)
    if explicit:
        raise SystemExit(f"--llama-server {explicit}: not an executable file (build one with `{BUILD_HINT}`)")
    found = shutil.which("llama-server")
    return Path(found) if found else None


def has_llama_cpp_python(python: str) -> bool:
    probe = subprocess.run([python, "-c", "import llama_cpp.server"], capture_output=True, check=False)
    return probe.returncode == 0


@dataclasses.dataclass
class LlamaChoice:
    """Which llama.cpp server a benchmark runs: ``binary`` (llama-server) or ``python`` (llama-cpp-python)."""

    binary: Path | None
    python: str | None

    @property
    def label(self) -> str:
        return "llama-server" if self.binary else "llama-cpp-python"

    def describe(self) -> str:
        return f"llama.cpp: {self.binary}" if self.binary else f"llama.cpp: llama-cpp-python's server in {self.python}"


def choose(server: str | None, python: str | None, *, required: bool) -> LlamaChoice | None:
    """llama-server when one is found, else llama-cpp-python in ``python`` when it imports, else None
    (or exit with what to do, when ``required``)."""
    binary = find_llama_server(server)
    if binary:
        return LlamaChoice(binary, None)
    interpreter = python or sys.executable
    if has_llama_cpp_python(interpreter):
        return LlamaChoice(None, interpreter)
    if required:
        raise SystemExit(
            f"no llama.cpp server: build llama-server with `{BUILD_HINT}`, or name an interpreter "
            "with llama-cpp-python[server] (--llama-python)"
        )
    return None


@contextlib.contextmanager
def llama_cpp(
    choice: LlamaChoice, gguf: Path, *, slots: int = 1, context: int = 8192, drafts: bool = False
) -> Iterator[Target]:
    """The chosen server on ``gguf``, ready (weights loaded, one request served)."""
    starter = llama_server_binary if choice.binary else llama_cpp_python
    with starter(choice, gguf, slots=slots, context=context, drafts=drafts) as target:
        yield target


@contextlib.contextmanager
def llama_server_binary(choice: LlamaChoice, gguf: Path, *, slots: int, context: int, drafts: bool) -> Iterator[Target]:
    """llama-server: ``slots`` parallel slots sharing one ``context``-token KV cache (continuous
    batching), every usable core, the file's own chat template (``--jinja``), prompt caching on."""
    assert choice.binary is not None
    port, threads = free_port(), str(usable_cores())
    cmd = [str(choice.binary), "--model", str(gguf), "--host", "127.0.0.1", "--port", str(port)]
    cmd += ["--ctx-size", str(context), "--parallel", str(slots), "--kv-unified", "--cont-batching"]
    cmd += ["--threads", threads, "--threads-batch", threads, "--jinja", "--no-webui", "--log-disable"]
    cmd += ["--reasoning-format", "none"]  # the text as generated: the same tokens as TinyTitan streams
    if drafts:
        cmd += ["--spec-type", "ngram-simple"] if _supports(choice.binary, "--spec-type") else []
    process = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with stopped_after(process):
        base = f"http://127.0.0.1:{port}"
        wait_healthy(base, process)  # /health answers 200 once the model is loaded
        warm_up(base + "/v1", gguf.name)
        yield Target("llama-server" + (" +drafts" if drafts else ""), base + "/v1", gguf.name)


def _supports(binary: Path, flag: str) -> bool:
    out = subprocess.run([str(binary), "--help"], capture_output=True, text=True, check=False)
    return flag in out.stdout + out.stderr


@contextlib.contextmanager
def llama_cpp_python(choice: LlamaChoice, gguf: Path, *, slots: int, context: int, drafts: bool) -> Iterator[Target]:
    """llama-cpp-python's server: one request at a time (it has no parallel slots)."""
    assert choice.python is not None
    del slots
    port, threads = free_port(), str(usable_cores())
    cmd = [choice.python, "-m", "llama_cpp.server", "--model", str(gguf), "--port", str(port)]
    cmd += ["--n_ctx", str(context), "--n_threads", threads, "--n_threads_batch", threads, "--verbose", "False"]
    if drafts:
        cmd += ["--draft_model", "prompt-lookup-decoding"]
    process = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with stopped_after(process):
        base = f"http://127.0.0.1:{port}"
        wait_healthy(base, process, path="/v1/models")  # no /health: the model list answers once loaded
        warm_up(base + "/v1", gguf.name)
        yield Target("llama-cpp-python" + (" +drafts" if drafts else ""), base + "/v1", gguf.name)


def peer_gguf(quant: str = "Q8_0") -> Path:
    """The Qwen3-0.6B-shape test model as a GGUF file (``quant`` weights, Qwen3's tool-rendering
    template), written once into TinyTitan's cache."""
    from tinytitan.testing.tiny_model import tiny_model_dir

    model_dir = tiny_model_dir("0.6b", "float32")
    path = cache_root() / "bench" / f"{model_dir.name}-qwen3-template-{quant}.gguf"
    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    try:
        _write_peer_gguf(model_dir, tmp, quant)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def _write_peer_gguf(model_dir: Path, out: Path, quant: str) -> None:
    import json

    from mlx_lm.utils import load_model

    from tinytitan.testing.gguf_files import hf_vocab, write_gguf

    model, _ = load_model(model_dir)
    config = json.loads((model_dir / "config.json").read_text())
    vocab = hf_vocab(model_dir / "tokenizer.json", "qwen2")
    pad = config["vocab_size"] - len(vocab["tokens"])  # rows past the tokenizer: llama.cpp's [PADn]
    vocab["tokens"] += [f"[PAD{i}]" for i in range(len(vocab["tokens"]), config["vocab_size"])]
    vocab["types"] += [5] * pad  # UNUSED, as llama.cpp's converter writes them
    # Qwen3-0.6B's own template: both sides know its tool syntax (the test model's own template is
    # declared json_tools in tokenizer_config.json, which a GGUF file does not carry)
    template = (ROOT / "tinytitan/testing/templates/qwen3.jinja").read_text(encoding="utf-8")
    write_gguf(model, config, out, vocab=vocab, template=template, quantize=quant)
