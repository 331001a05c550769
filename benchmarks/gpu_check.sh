#!/usr/bin/env bash
# One prepared GPU check: the fused kernel's CUDA tests, the trainer's throughput and MFU, the
# reference implementations beside ours, the device tests, and the headline figures, in one
# budget (GPU_CHECK_SECONDS, default 480 s from the script's start).
#
#   bash benchmarks/gpu_check.sh                 # on a machine with a CUDA device
#   GPU_CHECK_PLAN=1 bash benchmarks/gpu_check.sh  # the steps and their limits; runs nothing
#
# Writes one folder, $OUT/gpu_check/ when OUT is set, else build/gpu_check/: each step's log
# and JSON record, and gpu_check.json with them all and the headline figures
# (benchmarks/gpu_check_summary.py). Steps run headline first; each has its own time limit
# (SIGINT first, so pytest still writes its JUnit file and the benchmarks their last lines),
# cut to what is left of the budget; a step with too little left is skipped with a line.
# Exits 0 when every headline step passed, 1 when one failed or was skipped, 2 when it cannot
# start (PYTHON is no interpreter with torch, or torch sees no CUDA device: nothing written).
# PYTHON picks the interpreter (default python3); the checkout's src/ is imported. The device
# command that runs this on the lent GPU machine is benchmarks/gpu_device_command.sh; the
# CPU rehearsal of both is benchmarks/gpu_rehearsal.sh (docs/gpus.md).

set -u

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT" || exit 2
PYTHON="${PYTHON:-python3}"
export PYTHONPATH="$ROOT/src${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1  # a step cut at its limit keeps every line it printed
BUDGET="${GPU_CHECK_SECONDS:-480}"
RESERVE=25   # kept for the last step's kill (SIGINT, then SIGKILL 10 s later) and the summary
PREAMBLE=10  # the interpreter and CUDA checks below, inside the budget
MIN_STEP=20  # a step given less than this is skipped
PLAN="${GPU_CHECK_PLAN:-}"

# Steps that only run when a file is there (the reference code is not ours to commit).
declare -A REQUIRES=(
    [xl_reference]=".reference/transformer-xl/pytorch/mem_transformer.py"
)
HEADLINE=()  # the steps whose failure fails the check

if [ -z "$PLAN" ]; then
    if ! "$PYTHON" -c 'import torch' >/dev/null 2>&1; then
        echo "gpu_check: PYTHON=$PYTHON cannot import torch; set PYTHON to the interpreter" \
            "that has it (nothing was written)" >&2
        exit 2
    fi
    if ! "$PYTHON" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' \
            >/dev/null 2>&1; then
        echo "gpu_check: torch sees no CUDA device here; run it on a machine with one" \
            "(nothing was written)" >&2
        exit 2
    fi
    if [ -n "${OUT:-}" ]; then DEST="$OUT/gpu_check"; else DEST="$ROOT/build/gpu_check"; fi
    mkdir -p "$DEST" || exit 2
    : > "$DEST/steps.tsv"
else
    DEST='$DEST'
    printf 'budget\t%s\t%s\t%s\n' "$BUDGET" "$RESERVE" "$PREAMBLE"
fi

record() {  # record NAME STATUS SECONDS BUDGET NOTE
    printf '%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$5" >> "$DEST/steps.tsv"
}

step() {  # step NAME LIMIT_SECONDS headline|extra COMMAND...: COMMAND under its own limit
    local name=$1 limit=$2 role=$3
    shift 3
    if [ "$role" = headline ]; then HEADLINE+=("$name"); fi
    if [ -n "$PLAN" ]; then
        printf 'step\t%s\t%s\t%s\n' "$name" "$limit" "$role"
        return
    fi
    local needs="${REQUIRES[$name]:-}"
    if [ -n "$needs" ] && [ ! -f "$needs" ]; then
        record "$name" skipped 0 0 "$needs is absent (benchmarks/fetch_reference.sh puts it there)"
        echo "gpu_check: $name skipped: $needs is absent"
        return
    fi
    local left=$((BUDGET - RESERVE - SECONDS))
    if [ "$left" -lt "$limit" ]; then limit=$left; fi
    if [ "$limit" -lt "$MIN_STEP" ]; then
        record "$name" skipped 0 0 "no time left in the ${BUDGET} s budget"
        echo "gpu_check: $name skipped: no time left in the ${BUDGET} s budget"
        return
    fi
    echo "gpu_check: $name (limit $limit s)"
    local begin=$SECONDS
    timeout -s INT -k 10 "$limit" "$@" > "$DEST/$name.log" 2>&1
    local status=$?
    local note=""
    if [ "$status" -eq 124 ] || [ "$status" -eq 137 ]; then
        note="stopped at its ${limit} s limit"
    fi
    record "$name" "$status" $((SECONDS - begin)) "$limit" "$note"
    echo "gpu_check: $name: exit status $status after $((SECONDS - begin)) s${note:+ ($note)}"
}

pytest_step() {  # pytest_step NAME LIMIT ROLE PYTEST_ARGS...: -v, its JUnit file in $DEST
    local name=$1 limit=$2 role=$3
    shift 3
    step "$name" "$limit" "$role" "$PYTHON" -m pytest -v -p no:cacheprovider \
        --junitxml="$DEST/$name.xml" "$@"
}

# (the T-L3 and RT-L3 train with SGD, the L6-XL with Adam: fused Adam for the L6-XL only)
TRAIN=(benchmarks/bench_train_step.py --device cuda --precision bf16 --window 10 --windows 2
       --rounds 1)
TRAIN_XL=(benchmarks/bench_train_step.py --device cuda --precision bf16 --window 10 --windows 2
          --rounds 1 --fused-optimizer)

# The limits: compilation dominates. Measured on an H100 (docs/gpus.md): an Inductor compile
# of the L6-XL step about 60 s per preset, an eager 2-preset trainer run under 25 s. The
# Triton kernels compile in 1-3 s each (about 15 variants in the kernel tests, 4 in the
# benchmark). Headline steps (limits 445 s with the 10 s preamble: the budget less RESERVE).

# 1. The fused kernel on CUDA against the core: what VERIFIED_ON_GPU waits for.
pytest_step kernel_tests 55 headline tests/nn/kernels/test_relative_triton.py
# 2. The L6-XL, eager and compiled (σ/plain is a gate's cost; compiled is the MFU target).
step train_eager_l6-xl 35 headline "$PYTHON" "${TRAIN_XL[@]}" ht-table5/l6-xl \
    ht-table5/l6-xl+sigmoid --json "$DEST/train_eager_l6-xl.json"
step train_compiled_l6-xl 90 headline "$PYTHON" "${TRAIN_XL[@]}" --compile ht-table5/l6-xl \
    --json "$DEST/train_compiled_l6-xl.json"
step train_compiled_l6-xl_sigmoid 90 headline "$PYTHON" "${TRAIN_XL[@]}" --compile \
    ht-table5/l6-xl+sigmoid --json "$DEST/train_compiled_l6-xl_sigmoid.json"
# 3. The fused relative attention against the core: training and evaluation shapes, peaks.
step fused_relative 35 headline "$PYTHON" benchmarks/bench_fused_relative.py --device cuda \
    --precision bf16 --json "$DEST/fused_relative.json"
# 4. The Transformer-XL code's MemTransformerLM at the L6-XL shape, beside ours.
step xl_reference 35 headline "$PYTHON" benchmarks/bench_xl_reference.py --device cuda \
    --precision bf16 --fused-optimizer --steps 10 --warmup 3 --rounds 2 \
    --json "$DEST/xl_reference.json"
# 5. x-transformers with flash attention against the T-L3 at its published size.
step vs_xtransformers 30 headline "$PYTHON" benchmarks/bench_vs_xtransformers.py \
    --device cuda --precision bf16 --d-model 512 --layers 3 --heads 8 --d-inner 2048 \
    --batch 16 --seq-len 400 --dropout 0.15 --threads 4 --steps 5 --rounds 3 \
    --json "$DEST/vs_xtransformers.json"
# 6. The T-L3 through the trainer, eager.
step train_eager_t-l3 35 headline "$PYTHON" "${TRAIN[@]}" ht-table1/t-l3 \
    ht-table1/t-l3+sigmoid --json "$DEST/train_eager_t-l3.json"
# 7. The library on the GPU against the CPU as its oracle (tiny trainings eager).
pytest_step device_tests 40 headline tests/test_device.py -k "not compiled_training_step"

# With the time left: the compiled step's own test, a batch that fills the GPU, the rest.
pytest_step device_compiled_tests 100 extra tests/test_device.py -k compiled_training_step
step train_compiled_l6-xl_wide 90 extra "$PYTHON" "${TRAIN_XL[@]}" --compile --batch 128 \
    ht-table5/l6-xl --json "$DEST/train_compiled_l6-xl_wide.json"
step train_eager_rt-l3 35 extra "$PYTHON" "${TRAIN[@]}" ht-table4/rt-l3 \
    ht-table4/rt-l3+sigmoid --json "$DEST/train_eager_rt-l3.json"
step train_compiled_t-l3 120 extra "$PYTHON" "${TRAIN[@]}" --compile ht-table1/t-l3 \
    ht-table1/t-l3+sigmoid --json "$DEST/train_compiled_t-l3.json"
step train_compiled_rt-l3 120 extra "$PYTHON" "${TRAIN[@]}" --compile ht-table4/rt-l3 \
    ht-table4/rt-l3+sigmoid --json "$DEST/train_compiled_rt-l3.json"

if [ -n "$PLAN" ]; then exit 0; fi

# The headline figures, into the one results file.
status=0
if ! timeout -k 5 20 "$PYTHON" benchmarks/gpu_check_summary.py "$DEST" > "$DEST/summary.log" 2>&1
then
    echo "gpu_check: the summary failed (see $DEST/summary.log); the steps' records are in $DEST/"
    status=1
fi
failed=()
for name in "${HEADLINE[@]}"; do
    if ! grep -q "^$name	0	" "$DEST/steps.tsv"; then failed+=("$name"); fi
done
if [ "${#failed[@]}" -gt 0 ]; then
    echo "gpu_check: headline steps that did not pass: ${failed[*]}"
    status=1
fi
echo "gpu_check: $SECONDS s; results: $DEST/gpu_check.json (logs and records in $DEST/)"
exit "$status"
