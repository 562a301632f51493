#!/usr/bin/env bash
# GPU check of TinyTitan's engine on mlx's CUDA build (call 2 of 2; run from the repo root).
#   call 1 (carry .gpuA): mkdir -p /tmp/parts && cp .gpuA/mlxcuda.part.aa /tmp/parts/   (tools/gpu/wheels.sh made both)
#   call 2 (carry .whl):  bash tools/gpu/check.sh
# Stages are independent (|| true) except the wheel's reassembly: a bad wheel exits 3.
# Overridable: TESTS_TIMEOUT (330), DECODE_TIMEOUT (150), DECODE_TOKENS (128), PYTEST_ARGS (e.g. "-n 4": xdist).
set -u
export PYTHONUNBUFFERED=1
TMP=${TMPDIR:-/tmp}
OUT=${OUT:-$TMP/gpu_check_out}
mkdir -p "$OUT"
T0=$(date +%s)
stage() { echo; echo "=== $* (t=$(( $(date +%s) - T0 ))s)"; }

# --- (a) reassemble the mlx-cuda-13 wheel ------------------------------------------------------
stage "reassemble"
WHEEL=$TMP/mlx_cuda_13-0.32.4-py3-none-manylinux_2_35_x86_64.whl
PART_A=$TMP/parts/mlxcuda.part.aa
[ -f "$PART_A" ] || PART_A=.gpuA/mlxcuda.part.aa   # call 1's ignored outputs may persist in the tree
if [ ! -f "$PART_A" ] || [ ! -f .whl/mlxcuda.part.ab ]; then
    echo "GPU-CHECK: wheel part missing (aa: /tmp/parts or .gpuA; ab: .whl) — run call 1 again, then this within 30 s"
    exit 3
fi
echo "part aa from $PART_A"
cat "$PART_A" .whl/mlxcuda.part.ab > "$WHEEL"
WANT=$(awk '{print $1}' .whl/mlxcuda.sha256)
GOT=$(sha256sum "$WHEEL" | awk '{print $1}')
if [ "$WANT" != "$GOT" ]; then
    echo "GPU-CHECK: sha256 mismatch for $WHEEL: got $GOT, want $WANT"
    exit 3
fi
echo "sha256 OK $GOT"

# --- (b) install into /tmp/site ------------------------------------------------------------------
stage "install"
# where the image's nvidia-* pip packages live (libmlx.so's RPATH is $ORIGIN/../../nvidia/…/lib)
NV=$(python3 - <<'EOF'
import importlib.util, os
spec = importlib.util.find_spec("nvidia")
for p in (spec.submodule_search_locations or []) if spec else []:
    if any(os.path.isdir(os.path.join(p, d)) for d in ("cu13", "cublas", "cudnn")):
        print(p)
        break
EOF
)
echo "nvidia packages: ${NV:-NOT FOUND}"
{ python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    .whl/*.whl "$WHEEL" && echo "installed $(ls .whl/*.whl | wc -l) wheels + mlx-cuda-13"; } || echo "GPU-CHECK: pip install failed"
if [ -n "$NV" ] && [ ! -e /tmp/site/nvidia ]; then ln -s "$NV" /tmp/site/nvidia; fi
if [ -n "$NV" ]; then
    NVLIBS=$(ls -d "$NV"/*/lib 2>/dev/null | paste -sd: -)
    export LD_LIBRARY_PATH="${NVLIBS}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
# NVRTC needs the CUDA runtime headers (cccl ships in the mlx-cuda-13 wheel): CUDA_HOME or /usr/local/cuda
if [ -z "${CUDA_HOME:-}${CUDA_PATH:-}" ] && [ ! -f /usr/local/cuda/include/cuda_runtime.h ]; then
    for c in "$NV/cu13" /usr/local/cuda-13*; do
        if [ -f "$c/include/cuda_runtime.h" ]; then export CUDA_HOME="$c"; break; fi
    done
fi
echo "CUDA_HOME=${CUDA_HOME:-unset} (/usr/local/cuda/include/cuda_runtime.h: $([ -f /usr/local/cuda/include/cuda_runtime.h ] && echo yes || echo no))"
export PYTHONPATH=/tmp/site:$PWD
# subprocess tests set PYTHONPATH to the repo alone: a .pth puts /tmp/site on their path too
SITE=$(python3 -c "import site; print(site.getsitepackages()[0])")
echo /tmp/site > "$SITE/zz_tinytitan_gpu_check.pth" && echo "pth in $SITE"
export TINYTITAN_JS_TIKTOKEN=$PWD/.whl/jst
export PATH=/tmp/site/bin:$PATH
python3 -m pip list 2>/dev/null | grep -iE '^(mlx\S*|nvidia-\S*|typing.extensions|transformers|tokenizers|numpy|tiktoken|anyio|httpx|rich|click|hypothesis|pytest\S*)\s' \
    | tee "$OUT/pip-list.txt" || true

# --- (c) the device and mlx on it ------------------------------------------------------------------
stage "device"
nvidia-smi -L || true
timeout 120 python3 - <<'EOF' 2>&1 | tee "$OUT/mlx-smoke.txt" || true
import time
import mlx.core as mx
print(mx.__version__, mx.default_device(), mx.cuda.is_available())
a = mx.random.normal((4, 4))
b = mx.random.normal((4, 4))
import numpy as np
err = float(np.abs(np.array(a @ b) - np.array(a) @ np.array(b)).max())
print("4x4 fp32 matmul on", mx.default_device(), "max |mlx - numpy| =", err, "(TF32 may give ~1e-3)")
n = 8192
x = mx.random.normal((n, n)).astype(mx.bfloat16)
y = mx.random.normal((n, n)).astype(mx.bfloat16)
mx.eval(x @ y)
t = time.perf_counter()
for _ in range(10):
    z = x @ y
    mx.eval(z)
dt = (time.perf_counter() - t) / 10
print(f"{n}^3 bf16 matmul: {dt * 1e3:.2f} ms = {2 * n**3 / dt / 1e12:.0f} TFLOP/s")
EOF
timeout 60 python3 -m tinytitan --version || true

# --- (d) the engine tests ----------------------------------------------------------------------------
stage "engine tests"
set -o pipefail
timeout "${TESTS_TIMEOUT:-330}" python3 -m pytest -p no:cacheprovider -q -o addopts='-ra --import-mode=importlib' \
    --timeout 120 --durations=15 ${PYTEST_ARGS:-} tests/engine \
    --ignore=tests/engine/device/distributed \
    --deselect tests/engine/models/gguf/test_facts.py::test_the_embedded_smollm2_described_from_its_header \
    --deselect tests/engine/models/gguf/test_facts.py::test_the_embedded_smollm2_samples_as_its_publisher_recommends_and_has_no_tool_calls \
    --deselect tests/engine/models/gguf/test_stores.py::test_nothing_installed_lists_nothing_but_the_embedded_model \
    --deselect tests/engine/models/mlx/test_facts.py::test_a_converted_gguf_directory_is_known_by_its_files_name \
    --deselect tests/engine/models/mlx/test_resolve.py::test_the_default_model_offline_falls_back_to_the_embedded_one \
    2>&1 | tee "$OUT/engine-tests.txt"
echo "pytest exit status: $? (124: stopped by the timeout)"
set +o pipefail

# --- (e) decode benchmark ----------------------------------------------------------------------------
stage "decode benchmark"
[ -n "${SKIP_DECODE:-}" ] || timeout "${DECODE_TIMEOUT:-150}" python3 benchmarks/bench_gpu.py --tokens "${DECODE_TOKENS:-128}" 2>&1 | tee "$OUT/decode.txt" || true

stage "done"
