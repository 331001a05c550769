#!/usr/bin/env bash
# The one command for the lent GPU machine, run there from the repository root:
#
#   bash benchmarks/gpu_device_command.sh      # carry .whl and .reference; a 520 s limit
#
# Installs the wheels carried in .whl/ (benchmarks/fetch_wheels.sh) into $SITE (/tmp/site),
# runs benchmarks/gpu_check.sh with PYTHON=python3 into a scratch folder, and copies back
# into $OUT two files: gpu_check.json and gpu_check_logs.tgz (every step's log and record).
# At most 8 files come back from $OUT, so nothing else is written there. Exits with the
# check's status (0: every headline step passed). docs/gpus.md says how it is called.

set -u
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 2
SITE="${SITE:-/tmp/site}"
SCRATCH="${SCRATCH:-/tmp/gpu_check_scratch}"
export PYTHON=python3

if compgen -G ".whl/*.whl" > /dev/null; then
    if ! python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
            --target "$SITE" .whl/*.whl; then
        echo "gpu_device_command: the carried wheels did not install" >&2
        exit 2
    fi
    export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
else
    echo "gpu_device_command: no wheels in .whl/ (benchmarks/fetch_wheels.sh fills it);" \
        "the x-transformers step will say skipped"
fi

rm -rf "$SCRATCH" && mkdir -p "$SCRATCH" || exit 2
OUT="$SCRATCH" GPU_CHECK_SECONDS="${GPU_CHECK_SECONDS:-480}" bash benchmarks/gpu_check.sh
status=$?
if [ -n "${OUT:-}" ] && [ -d "$SCRATCH/gpu_check" ]; then
    cp "$SCRATCH/gpu_check/gpu_check.json" "$OUT/" 2>/dev/null \
        || echo "gpu_device_command: no gpu_check.json was written"
    tar czf "$OUT/gpu_check_logs.tgz" -C "$SCRATCH" gpu_check
fi
exit "$status"
