"""The OpenBLAS preload re-exec (issue #3 part 7)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tinytitan import blis, cpu_blas
from tinytitan.cores import usable_cores

from .test_blis import own_choice

ROOT = Path(__file__).resolve().parents[1]


def test_opt_out_and_guard_do_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[object] = []
    monkeypatch.setattr(os, "execve", lambda *a: calls.append(a))
    monkeypatch.setattr(cpu_blas, "find_openblas", lambda: "/usr/lib/x/openblas-pthread/libopenblas.so.0")
    monkeypatch.setenv(cpu_blas.OPT_OUT_ENV, "0")
    cpu_blas.ensure_openblas()
    monkeypatch.delenv(cpu_blas.OPT_OUT_ENV)
    monkeypatch.setenv(cpu_blas.REEXEC_ENV, "1")
    cpu_blas.ensure_openblas()
    assert calls == []


def test_reexecs_once_with_the_preload(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[str, list[str], dict[str, str]]] = []
    monkeypatch.setattr(os, "execve", lambda path, argv, env: calls.append((path, argv, env)))
    monkeypatch.setattr(cpu_blas, "find_openblas", lambda: "/lib/openblas-pthread/libopenblas.so.0")
    monkeypatch.setenv(cpu_blas.BLAS_ENV, "openblas")
    monkeypatch.delenv(cpu_blas.OPT_OUT_ENV, raising=False)
    monkeypatch.delenv(cpu_blas.REEXEC_ENV, raising=False)
    monkeypatch.setenv("LD_PRELOAD", "/other.so")
    monkeypatch.delitem(sys.modules, "mlx", raising=False)  # pretend mlx is not imported yet
    monkeypatch.delitem(sys.modules, "mlx.core", raising=False)
    cpu_blas.ensure_openblas()
    if not sys.platform.startswith("linux"):
        assert calls == []
        return
    assert len(calls) == 1
    path, argv, env = calls[0]
    assert path == sys.executable and argv[0] == sys.executable
    assert env["LD_PRELOAD"] == "/lib/openblas-pthread/libopenblas.so.0:/other.so"
    assert env[cpu_blas.REEXEC_ENV] == "1"


def test_blis_comes_first_and_gets_a_thread_count(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cpu_blas, "find_openblas", lambda: "/o/libopenblas.so.0")
    monkeypatch.setattr(cpu_blas, "find_blis", lambda: "/b/blis-pthread/libblis.so.4")
    monkeypatch.delenv(cpu_blas.BLAS_ENV, raising=False)
    assert cpu_blas.find_blas() == "/b/blis-pthread/libblis.so.4"
    monkeypatch.setenv(cpu_blas.BLAS_ENV, "openblas")
    assert cpu_blas.find_blas() == "/o/libopenblas.so.0"
    monkeypatch.setenv(cpu_blas.BLAS_ENV, "off")
    assert cpu_blas.find_blas() is None
    monkeypatch.setattr(cpu_blas, "find_blis", lambda: None)
    monkeypatch.delenv(cpu_blas.BLAS_ENV)
    assert cpu_blas.find_blas() == "/o/libopenblas.so.0"  # BLIS not installed: OpenBLAS
    calls: list[dict[str, str]] = []
    monkeypatch.setattr(os, "execve", lambda _path, _argv, env: calls.append(env))
    monkeypatch.setattr(cpu_blas, "find_blis", lambda: "/b/blis-pthread/libblis.so.4")
    for name in (cpu_blas.OPT_OUT_ENV, cpu_blas.REEXEC_ENV, "BLIS_NUM_THREADS", "LD_PRELOAD"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delitem(sys.modules, "mlx", raising=False)
    monkeypatch.delitem(sys.modules, "mlx.core", raising=False)
    cpu_blas.ensure_openblas()
    if sys.platform.startswith("linux"):
        (env,) = calls
        assert env["LD_PRELOAD"] == "/b/blis-pthread/libblis.so.4"
        assert env["BLIS_NUM_THREADS"] == str(usable_cores())


def test_preload_env_goes_first_and_sizes_blis_by_the_usable_cores() -> None:
    env = cpu_blas.preload_env("/b/blis-pthread/libblis.so.4", {"LD_PRELOAD": "/other.so"})
    assert env == {"LD_PRELOAD": "/b/blis-pthread/libblis.so.4:/other.so", "BLIS_NUM_THREADS": str(usable_cores())}
    env = cpu_blas.preload_env("/b/blis-pthread/libblis.so.4", {"BLIS_NUM_THREADS": "1"})
    assert env["BLIS_NUM_THREADS"] == "1"
    assert cpu_blas.preload_env("/o/libopenblas.so.0", {}) == {"LD_PRELOAD": "/o/libopenblas.so.0"}


@pytest.mark.parametrize(
    ("env", "blis", "described"),
    [
        ({}, "/b/blis-pthread/libblis.so.4", "BLIS preloaded"),
        ({cpu_blas.BLAS_ENV: "openblas"}, "/b/blis-pthread/libblis.so.4", "OpenBLAS preloaded"),
        ({cpu_blas.OPT_OUT_ENV: "0"}, "/b/blis-pthread/libblis.so.4", "the bundled BLAS (TINYTITAN_OPENBLAS=0 or"),
        ({cpu_blas.BLAS_ENV: "off"}, "/b/blis-pthread/libblis.so.4", "the bundled BLAS (TINYTITAN_OPENBLAS=0 or"),
        ({cpu_blas.BLAS_ENV: "blis"}, None, "the bundled BLAS (install libblis4-pthread or libopenblas0-pthread"),
        ({cpu_blas.REEXEC_ENV: "1"}, "/b/blis-pthread/libblis.so.4", "the bundled BLAS (the preload of /b/blis"),
    ],
)
def test_the_state_before_the_reexec_says_what_it_will_be(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], blis: str | None, described: str
) -> None:
    """``--version``: what a command that runs a model will get (nothing is preloaded in this process)."""
    monkeypatch.setattr(cpu_blas, "_mapped", lambda: None)
    monkeypatch.setattr(cpu_blas, "find_openblas", lambda: "/o/openblas-pthread/libopenblas.so.0")
    monkeypatch.setattr(cpu_blas, "find_blis", lambda: blis)
    monkeypatch.setattr(sys, "platform", "linux")
    for name in (cpu_blas.BLAS_ENV, cpu_blas.OPT_OUT_ENV, cpu_blas.REEXEC_ENV, "LD_PRELOAD"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delitem(sys.modules, "mlx", raising=False)
    monkeypatch.delitem(sys.modules, "mlx.core", raising=False)
    state = cpu_blas.blas_state()
    assert not state.loaded
    assert state.describe().startswith(described)


@pytest.mark.skipif(cpu_blas.find_openblas() is None, reason="libopenblas0-pthread is not installed")
def test_a_real_process_ends_up_with_openblas() -> None:
    code = (
        "from tinytitan.cpu_blas import ensure_openblas, openblas_active\n"
        "ensure_openblas()\n"
        "import mlx.core as mx\n"
        "a = mx.ones((64, 64)); mx.eval(a @ a)\n"
        "print(openblas_active())\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", cpu_blas.REEXEC_ENV, cpu_blas.OPT_OUT_ENV)}
    env["PYTHONPATH"] = str(ROOT)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True"
    env[cpu_blas.OPT_OUT_ENV] = "0"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.skipif(cpu_blas.find_blis() is None, reason="libblis4-pthread is not installed")
@pytest.mark.parametrize("threads", [None, "1", "3"])
def test_the_state_of_a_process_names_the_loaded_blas_and_its_threads(threads: str | None) -> None:
    """The serve banner's phrase, read from the process itself: the library mapped, threadpoolctl's count."""
    code = (
        "from tinytitan.cpu_blas import ensure_openblas, blas_state\n"
        "ensure_openblas()\n"
        "import mlx.core as mx\n"
        "print(blas_state().describe())\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", cpu_blas.REEXEC_ENV, cpu_blas.OPT_OUT_ENV)}
    env.pop("BLIS_NUM_THREADS", None)
    env.update(
        {"PYTHONPATH": str(ROOT), cpu_blas.BLAS_ENV: "blis", **({"BLIS_NUM_THREADS": threads} if threads else {})}
    )
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    count = int(threads or usable_cores())
    kernels = blis.arch_for(str(cpu_blas.find_blis()))  # AVX2 kernels where BLIS would run its generic C
    expected = f"BLIS preloaded, {count} thread{'s' if count > 1 else ''}" + (
        f", {kernels[1]} kernels" if kernels else ""
    )
    assert out.stdout.strip() == expected  # asked before the first product: BLIS must not abort (blis.init)


def test_importing_the_mlx_backend_does_not_import_mlx() -> None:
    code = (
        "import sys\n"
        "import tinytitan.engine.models.mlx, tinytitan.cpu_blas, tinytitan.engine.prompt_cache.memory\n"
        "print(sorted(m for m in ('mlx', 'mlx_lm', 'transformers') if m in sys.modules))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_an_unknown_blas_choice_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(cpu_blas.BLAS_ENV, "mkl")
    with pytest.raises(cpu_blas.BlasChoiceError, match=r"TINYTITAN_BLAS=mkl .* use auto, blis, openblas, off"):
        cpu_blas.find_blas()
    for accepted in ("auto", "BLIS", " openblas ", "off", "0", ""):
        monkeypatch.setenv(cpu_blas.BLAS_ENV, accepted)
        cpu_blas.find_blas()  # no error


@pytest.mark.skipif(cpu_blas.find_blis() is None, reason="libblis4-pthread is not installed")
@pytest.mark.parametrize("arch", ["own", "63"])
def test_a_users_blis_arch_type_is_kept_or_refused_in_one_line(arch: str) -> None:
    """A kernel id of the user's own: kept (and BLIS started before threadpoolctl asks it anything,
    or it aborts), or — one this BLIS lacks — refused before the re-exec, exit 2, instead of BLIS's abort."""
    lib = str(cpu_blas.find_blis())
    code = (
        "import sys\n"
        "from tinytitan.cli.common import fast_cpu\n"
        "from tinytitan.cpu_blas import blas_state\n"
        "import typer\n"
        "try:\n"
        "    fast_cpu(True, 'serve')\n"
        "except typer.Exit as exc:\n"
        "    sys.exit(exc.exit_code)\n"
        "from tinytitan.cpu_blas import ensure_openblas\n"
        "ensure_openblas()  # what the CLI entry point allows fast_cpu to do\n"
        "import mlx.core as mx\n"
        "print(blas_state().describe())\n"
        "a = mx.ones((64, 64)); print(float((a @ a)[0, 0].item()))\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", cpu_blas.REEXEC_ENV, cpu_blas.OPT_OUT_ENV)}
    chosen = "63" if arch == "63" else own_choice(lib)
    env.pop("TINYTITAN_DEVICE_CHECK", None)  # the product below runs on the main thread
    env.update({"PYTHONPATH": str(ROOT), cpu_blas.BLAS_ENV: "blis", blis.ARCH_ENV: chosen})
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False)
    if arch == "63":
        assert out.returncode == 2 and out.stdout == ""
        assert out.stderr.strip().splitlines() == [out.stderr.strip()]  # one line
        assert out.stderr.startswith("tinytitan serve: BLIS_ARCH_TYPE=63 names no kernel set")
    else:
        assert out.returncode == 0, out.stderr
        state, product = out.stdout.split("\n")[:2]
        assert state.startswith("BLIS preloaded") and "kernels" not in state and product == "64.0"
