#!/usr/bin/env bash
# One prepared GPU check: the device tests, the trainer's throughput and MFU, the reference
# implementations beside ours, and the headline ratios, in at most 8 minutes on one H100.
#
#   bash benchmarks/gpu_check.sh
#
# Writes one folder, $OUT/gpu_check/ when OUT is set, else build/gpu_check/: each step's log
# and JSON record, and gpu_check.json, which holds them all with the headline figures
# (benchmarks/gpu_check_summary.py). Every step has its own time limit, so one that fails
# or hangs loses only its own figures; the limits are cut to what is left of the whole budget
# (GPU_CHECK_SECONDS, default 455 s from the script's start, the summary's 25 s after it
# included), and a step with too little left is skipped with a line saying so. Refuses to
# start, in one line, where torch sees no CUDA device. PYTHON picks the interpreter (default:
# python, else python3); the checkout's src/ is imported. The device tests need pytest, the
# x-transformers step the x-transformers package (it says "skipped" without it), the
# reference step kimiyoung/transformer-xl's pytorch/ in .reference/transformer-xl/pytorch/.

set -u

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT" || exit 2
if [ -z "${PYTHON:-}" ]; then
    if command -v python >/dev/null 2>&1; then PYTHON=python; else PYTHON=python3; fi
fi
export PYTHONPATH="$ROOT/src${PYTHONPATH:+:$PYTHONPATH}"

if ! "$PYTHON" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' \
        >/dev/null 2>&1; then
    echo "gpu_check: torch sees no CUDA device here; run it on a machine with one" \
        "(nothing was written)" >&2
    exit 2
fi

if [ -n "${OUT:-}" ]; then DEST="$OUT/gpu_check"; else DEST="$ROOT/build/gpu_check"; fi
mkdir -p "$DEST" || exit 2
: > "$DEST/steps.tsv"
BUDGET="${GPU_CHECK_SECONDS:-455}"
RESERVE=25   # kept for the last step's kill (timeout -k 5) and the summary (20 s and 5)
MIN_STEP=20  # a step given less than this is skipped
START=0      # SECONDS counts from the script's start: the CUDA check above is in the budget

record() {  # record NAME STATUS SECONDS BUDGET NOTE
    printf '%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$5" >> "$DEST/steps.tsv"
}

step() {  # step NAME LIMIT_SECONDS COMMAND...: run COMMAND under its own time limit
    local name=$1 limit=$2
    shift 2
    local left=$((BUDGET - RESERVE - (SECONDS - START)))
    if [ "$left" -lt "$limit" ]; then limit=$left; fi
    if [ "$limit" -lt "$MIN_STEP" ]; then
        record "$name" skipped 0 0 "no time left in the ${BUDGET} s budget"
        echo "gpu_check: $name skipped: no time left in the ${BUDGET} s budget"
        return
    fi
    echo "gpu_check: $name (limit $limit s)"
    local begin=$SECONDS
    timeout -k 5 "$limit" "$@" > "$DEST/$name.log" 2>&1
    local status=$?
    local note=""
    if [ "$status" -eq 124 ] || [ "$status" -eq 137 ]; then
        note="stopped at its ${limit} s limit"
    fi
    record "$name" "$status" $((SECONDS - begin)) "$limit" "$note"
    echo "gpu_check: $name: exit status $status after $((SECONDS - begin)) s${note:+ ($note)}"
}

skip() {  # skip NAME REASON...
    record "$1" skipped 0 0 "${*:2}"
    echo "gpu_check: $1 skipped: ${*:2}"
}

# (the T-L3 and RT-L3 train with SGD, the L6-XL with Adam: fused Adam for the L6-XL only)
TRAIN=(benchmarks/bench_train_step.py --device cuda --precision bf16 --window 10 --windows 2
       --rounds 1)
TRAIN_XL=(benchmarks/bench_train_step.py --device cuda --precision bf16 --window 10 --windows 2
          --rounds 1 --fused-optimizer)

# 1. The library on the GPU against the CPU as its oracle.
step device_tests 55 "$PYTHON" -m pytest tests/test_device.py -q -p no:cacheprovider \
    --junitxml="$DEST/device_tests.xml"

# 2. The trainer: plain and σ-SDU, bf16, eager (each pair in one run: σ/plain is a gate's cost).
step train_eager_t-l3 35 "$PYTHON" "${TRAIN[@]}" ht-table1/t-l3 ht-table1/t-l3+sigmoid \
    --json "$DEST/train_eager_t-l3.json"
step train_eager_rt-l3 35 "$PYTHON" "${TRAIN[@]}" ht-table4/rt-l3 ht-table4/rt-l3+sigmoid \
    --json "$DEST/train_eager_rt-l3.json"
step train_eager_l6-xl 35 "$PYTHON" "${TRAIN_XL[@]}" ht-table5/l6-xl ht-table5/l6-xl+sigmoid \
    --json "$DEST/train_eager_l6-xl.json"
# compiled (about a minute of compilation each): the L6-XL, one preset a run
step train_compiled_l6-xl 90 "$PYTHON" "${TRAIN_XL[@]}" --compile ht-table5/l6-xl \
    --json "$DEST/train_compiled_l6-xl.json"
step train_compiled_l6-xl_sigmoid 90 "$PYTHON" "${TRAIN_XL[@]}" --compile \
    ht-table5/l6-xl+sigmoid \
    --json "$DEST/train_compiled_l6-xl_sigmoid.json"

# 3. The fused relative attention against the current core (its own benchmark, when present).
if [ -f benchmarks/bench_fused_relative.py ]; then
    step fused_relative 25 "$PYTHON" benchmarks/bench_fused_relative.py --device cuda \
        --precision bf16 --json "$DEST/fused_relative.json"
else
    skip fused_relative "benchmarks/bench_fused_relative.py is not in this checkout"
fi

# 4. The Transformer-XL code's MemTransformerLM at the L6-XL shape, beside ours.
if [ -f .reference/transformer-xl/pytorch/mem_transformer.py ]; then
    step xl_reference 35 "$PYTHON" benchmarks/bench_xl_reference.py --device cuda \
        --precision bf16 --fused-optimizer --steps 10 --warmup 3 --rounds 2 \
        --json "$DEST/xl_reference.json"
else
    skip xl_reference ".reference/transformer-xl/pytorch/ is absent" \
        "(kimiyoung/transformer-xl's pytorch/ goes there)"
fi

# 5. x-transformers with flash attention against the T-L3 at its published size.
step vs_xtransformers 30 "$PYTHON" benchmarks/bench_vs_xtransformers.py --device cuda \
    --precision bf16 --d-model 512 --layers 3 --heads 8 --d-inner 2048 --batch 16 \
    --seq-len 400 --dropout 0.15 --threads 4 --steps 5 --rounds 3 \
    --json "$DEST/vs_xtransformers.json"

# With the time left: the T-L3 and RT-L3 compiled too.
step train_compiled_t-l3 120 "$PYTHON" "${TRAIN[@]}" --compile ht-table1/t-l3 \
    ht-table1/t-l3+sigmoid --json "$DEST/train_compiled_t-l3.json"
step train_compiled_rt-l3 120 "$PYTHON" "${TRAIN[@]}" --compile ht-table4/rt-l3 \
    ht-table4/rt-l3+sigmoid --json "$DEST/train_compiled_rt-l3.json"

# The headline ratios, into the one results file.
if ! timeout -k 5 20 "$PYTHON" benchmarks/gpu_check_summary.py "$DEST" > "$DEST/summary.log" 2>&1
then
    echo "gpu_check: the summary failed (see $DEST/summary.log); the steps' records are in $DEST/"
fi
echo "gpu_check: $SECONDS s; results: $DEST/gpu_check.json (logs and records in $DEST/)"
