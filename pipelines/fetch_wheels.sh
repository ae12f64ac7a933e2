#!/usr/bin/env bash
# Fills ./.whl (git-ignored) with the wheels the offline GPU machine lacks (Python 3.12,
# manylinux x86_64; its image already has cupy, numpy, pandas, msgpack, psutil, toolz,
# typing-extensions, click, rich, prometheus-client): dask, distributed, dask-cuda and zarr at the
# versions dask-cuda 26.10 pins, plus py_ecc (verification, vk export) and its dependencies, and
# gmpy2 (the `fast` extra: host-side combine and blinding 2.5x faster), and the `serve` extra
# (starlette, uvicorn) with httpx, which pipelines/bench_serve.py's clients use.
# pipelines/device_run.sh installs them there with:
#   python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
#       --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD
set -euo pipefail
cd "$(dirname "$0")/.."
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude
mkdir -p .whl
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  --platform manylinux_2_5_x86_64 --platform manylinux1_x86_64 -d .whl \
  dask==2026.7.1 distributed==2026.7.1 dask-cuda==26.10.0 'rapids-dask-dependency==26.10.*' \
  zarr==3.4.2 numcodecs==0.17.1 donfig google-crc32c msgspec \
  'bokeh<3.10' xyzservices partd locket tblib tornado zict \
  py_ecc==8.0.0 eth-utils==6.0.0 eth-typing==6.0.0 eth-hash==0.8.0 cytoolz==1.2.0 \
  pydantic==2.13.4 pydantic-core==2.46.4 annotated-types typing-inspection gmpy2==2.3.2 wasmtime \
  starlette uvicorn h11 anyio sniffio httpx httpcore certifi idna "$@"
du -sh .whl
