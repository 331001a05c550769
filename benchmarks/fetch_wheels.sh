#!/usr/bin/env bash
# Fills .whl/ (git-ignored) with the wheels benchmarks/gpu_device_command.sh installs on the
# GPU machine, which has no network: benchmarks/gpu_wheels.txt, each pinned by SHA-256, for
# that machine's Python 3.12 on x86-64. Needs pip and a network here.
#
#   bash benchmarks/fetch_wheels.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PYTHON="${PYTHON:-python3}"
mkdir -p .whl
"$PYTHON" -m pip download -q --no-deps --only-binary=:all: --require-hashes \
    --python-version 3.12 --implementation cp --platform manylinux_2_28_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    -r benchmarks/gpu_wheels.txt -d .whl
echo "fetch_wheels: $(ls .whl/*.whl | wc -l) wheels in .whl/ ($(du -sh .whl | cut -f1))"
