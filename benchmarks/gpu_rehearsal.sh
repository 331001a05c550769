#!/usr/bin/env bash
# The GPU check's dress rehearsal on a CPU machine: the device command run the way the lent
# GPU machine runs it, on that machine's software, against a CUDA stub. Run it before you stop
# whenever gpu_check.sh, a benchmark it calls or a core import changes (docs/gpus.md).
#
#   bash benchmarks/gpu_rehearsal.sh        # ends in one line: "gpu rehearsal: PASS ..." or FAIL
#
# 1. A venv like the device image (REHEARSAL_VENV, default ~/.cache/highway-transformer/
#    gpu-rehearsal): Python 3.12, torch 2.11.0 (PyPI's CUDA build: it imports and sees no GPU
#    here), triton 3.6.0, numpy 2.5, and the other packages the check uses that the image has;
#    none of those it lacks (platformdirs, submitit, x-transformers, lm-eval, mkdocs). About
#    5 GB, built once.
# 2. The tree as it travels: tracked and untracked-not-ignored files, plus the carried .whl/
#    and .reference/ (benchmarks/fetch_wheels.sh, benchmarks/fetch_reference.sh fill them).
# 3. benchmarks/gpu_device_command.sh in that copy, with python3 the venv's and the CUDA stub
#    (benchmarks/cuda_stub/) on PYTHONPATH: torch says a device is there, and the first real
#    CUDA call raises the stub's mark.
# 4. benchmarks/gpu_rehearsal_check.py: every step reached CUDA (no import, argument or
#    collection error before it), at most 8 files came back with gpu_check.json among them,
#    the carried tree fits 64 MiB, the step limits fit the budget and the command's limit.

set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
VENV="${REHEARSAL_VENV:-$HOME/.cache/highway-transformer/gpu-rehearsal}"
PACKAGES=(torch==2.11.0 triton==3.6.0 "numpy==2.5.*" pytest scipy safetensors PyYAML tqdm
          hypothesis einops scikit-learn)
ABSENT=(platformdirs submitit x-transformers lm-eval mkdocs)
CARRY=(.whl .reference)

find_python312() {
    for candidate in "${REHEARSAL_PYTHON:-}" python3.12 "$HOME"/.pyenv/versions/3.12*/bin/python; do
        if [ -n "$candidate" ] && command -v "$candidate" > /dev/null 2>&1 \
                && "$candidate" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 12))' 2> /dev/null; then
            echo "$candidate"
            return
        fi
    done
    echo "gpu rehearsal: FAIL: no Python 3.12 here (the GPU machine's); set REHEARSAL_PYTHON" >&2
    exit 2
}

build_venv() {
    local stamp="$VENV/.rehearsal-packages" want="${PACKAGES[*]}"
    if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then return; fi
    echo "gpu rehearsal: building $VENV (${PACKAGES[*]})"
    "$(find_python312)" -m venv "$VENV"
    "$VENV/bin/python" -m pip install -q "${PACKAGES[@]}"
    "$VENV/bin/python" -m pip uninstall -q -y "${ABSENT[@]}" > /dev/null 2>&1 || true
    echo "$want" > "$stamp"
}

lay_out_tree() {  # lay_out_tree DEST: what the device tool copies
    local dest=$1 path
    mkdir -p "$dest"
    git ls-files -z --cached --others --exclude-standard \
        | while IFS= read -r -d '' path; do [ -e "$path" ] && printf '%s\0' "$path"; done \
        | tar --null -T - -cf - | tar -xf - -C "$dest"
    for path in "${CARRY[@]}"; do
        if [ -e "$path" ]; then cp -r "$path" "$dest/"; fi
    done
}

build_venv
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
lay_out_tree "$WORK/tree"
mkdir -p "$WORK/out"
echo "gpu rehearsal: running benchmarks/gpu_device_command.sh against the CUDA stub"
set +e
(
    cd "$WORK/tree"
    PATH="$VENV/bin:$PATH" OUT="$WORK/out" SITE="$WORK/site" SCRATCH="$WORK/scratch" \
        HIGHWAY_CUDA_STUB=1 PYTHONPATH="$WORK/tree/benchmarks/cuda_stub" \
        timeout 900 bash benchmarks/gpu_device_command.sh
) > "$WORK/device_command.log" 2>&1
status=$?
set -e
tail -n 30 "$WORK/device_command.log" | sed 's/^/  | /'
# The checker runs under the host's Python: it needs nothing but the standard library.
"${PYTHON:-python3}" benchmarks/gpu_rehearsal_check.py --tree "$WORK/tree" --out "$WORK/out" \
    --command-status "$status" --venv-python "$VENV/bin/python" \
    --absent "${ABSENT[@]}" --carry "${CARRY[@]}"
