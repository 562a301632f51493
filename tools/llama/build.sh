#!/usr/bin/env bash
# Build llama.cpp's own `llama-server` (CPU) for the benchmarks' llama.cpp column
# (benchmarks/peer.py --llama, benchmarks/bench_busy.py, benchmarks/llamacpp.py).
#
#   bash tools/llama/build.sh [SDIST]
#
# SDIST: the llama-cpp-python source archive, whose vendor/llama.cpp is what gets built (default:
# the newest llama_cpp_python-*.tar.gz in $LLAMA_SDIST_DIR, else
# `pip download llama-cpp-python==0.3.36 --no-deps --no-binary :all:` into it).
# The binary lands in $LLAMA_CACHE/bin/llama-server (default ~/.cache/tinytitan/llama.cpp), outside
# the repo; the benchmarks find it there (or pass --llama-server PATH). Prints its path last.
#
# GGML_NATIVE=OFF and AMX off: on a CPU with AMX in a VM, a native build (-march=native, which
# turns on the AMX kernels) crashed on any multi-token prompt; AVX2/FMA/F16C stay on, AVX-512 off.
# Overridable: JOBS (2), LLAMA_CMAKE_ARGS (extra cmake flags, e.g. "-DGGML_AVX512=ON").
set -euo pipefail
CACHE=${LLAMA_CACHE:-$HOME/.cache/tinytitan/llama.cpp}
SDIST_DIR=${LLAMA_SDIST_DIR:-$CACHE/sdist}
JOBS=${JOBS:-2}
mkdir -p "$CACHE" "$SDIST_DIR"

SDIST=${1:-}
if [ -z "$SDIST" ]; then
    SDIST=$(ls -1 "$SDIST_DIR"/llama_cpp_python-*.tar.gz 2>/dev/null | sort -V | tail -n 1 || true)
fi
if [ -z "$SDIST" ]; then
    python3 -m pip download llama-cpp-python==0.3.36 --no-deps --no-binary :all: -d "$SDIST_DIR"
    SDIST=$(ls -1 "$SDIST_DIR"/llama_cpp_python-*.tar.gz | sort -V | tail -n 1)
fi
NAME=$(basename "$SDIST" .tar.gz)
SRC=$CACHE/src/$NAME
if [ ! -f "$SRC/vendor/llama.cpp/CMakeLists.txt" ]; then
    mkdir -p "$CACHE/src"
    tar xzf "$SDIST" -C "$CACHE/src"
fi
BUILD=$CACHE/build/$NAME
# LLAMA_USE_PREBUILT_UI=OFF: the web UI's assets would come from the network; the server runs without them.
# shellcheck disable=SC2086
cmake -S "$SRC/vendor/llama.cpp" -B "$BUILD" \
    -DCMAKE_BUILD_TYPE=Release \
    -DGGML_NATIVE=OFF \
    -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF \
    -DBUILD_SHARED_LIBS=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF \
    -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF \
    ${LLAMA_CMAKE_ARGS:-}
cmake --build "$BUILD" --target llama-server -j "$JOBS"
mkdir -p "$CACHE/bin"
cp "$BUILD/bin/llama-server" "$CACHE/bin/llama-server"
echo "$CACHE/bin/llama-server"
