#!/usr/bin/env bash
# Install llama-cpp-python[server] (the fallback llama.cpp column of the benchmarks) into a virtual
# environment of its own, so its FastAPI stack stays out of TinyTitan's:
#
#   bash tools/llama/venv.sh [SDIST]     # then: --llama-python ~/.cache/tinytitan/llama.cpp/venv/bin/python
#
# Built from source with the same flags as tools/llama/build.sh (GGML_NATIVE=OFF, AMX off: a native
# build crashed on any multi-token prompt on a CPU with AMX in a VM). SDIST defaults as there.
# Overridable: LLAMA_CACHE, LLAMA_SDIST_DIR, JOBS (2), LLAMA_CMAKE_ARGS. Prints the interpreter last.
set -euo pipefail
CACHE=${LLAMA_CACHE:-$HOME/.cache/tinytitan/llama.cpp}
SDIST_DIR=${LLAMA_SDIST_DIR:-$CACHE/sdist}
VENV=$CACHE/venv
mkdir -p "$SDIST_DIR"
SDIST=${1:-}
if [ -z "$SDIST" ]; then
    SDIST=$(ls -1 "$SDIST_DIR"/llama_cpp_python-*.tar.gz 2>/dev/null | sort -V | tail -n 1 || true)
fi
if [ -z "$SDIST" ]; then
    python3 -m pip download llama-cpp-python==0.3.36 --no-deps --no-binary :all: -d "$SDIST_DIR"
    SDIST=$(ls -1 "$SDIST_DIR"/llama_cpp_python-*.tar.gz | sort -V | tail -n 1)
fi
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
export CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF ${LLAMA_CMAKE_ARGS:-}"
export CMAKE_BUILD_PARALLEL_LEVEL=${JOBS:-2}
"$VENV/bin/python" -m pip install --quiet --upgrade pip
"$VENV/bin/python" -m pip install "llama-cpp-python[server] @ file://$(realpath "$SDIST")"
"$VENV/bin/python" -c "import llama_cpp.server" && echo "$VENV/bin/python"
