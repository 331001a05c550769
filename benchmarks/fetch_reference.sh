#!/usr/bin/env bash
# Fills .reference/transformer-xl/pytorch/ (git-ignored) with the three files of the
# Transformer-XL code that benchmarks/bench_xl_reference.py runs beside ours:
# kimiyoung/transformer-xl at commit 44781ed, each checked against its SHA-256 (the pins in
# bench_xl_reference.py) before it is kept.
#
#   bash benchmarks/fetch_reference.sh               # downloads them from GitHub
#   bash benchmarks/fetch_reference.sh --from CLONE  # or takes them from a clone of the repo
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
COMMIT=44781ed21dbaec88b280f74d9ae2877f52b492a5
DEST=.reference/transformer-xl/pytorch
declare -A SHA256=(
    [mem_transformer.py]=38cbc93a8f7b06b85976e88e161349b34f2ac226b8a7796bd6d82c30dc592827
    [utils/proj_adaptive_softmax.py]=fe7ff45785c24c200462f181206efed632036d658fa5a77a4968a987c3b924f4
    [utils/log_uniform_sampler.py]=48ef19d323485065a9b69f0dad5dbc3926926e1f6af9379ce9e3b5331c44b458
)
CLONE=""
if [ "${1:-}" = "--from" ]; then CLONE="${2:?--from needs a clone of kimiyoung/transformer-xl}"; fi
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
for name in "${!SHA256[@]}"; do
    mkdir -p "$TMP/$(dirname "$name")"
    if [ -n "$CLONE" ]; then
        git -C "$CLONE" show "$COMMIT:pytorch/$name" > "$TMP/$name"
    else
        curl -fsSL "https://raw.githubusercontent.com/kimiyoung/transformer-xl/$COMMIT/pytorch/$name" \
            -o "$TMP/$name"
    fi
    if [ "$(sha256sum "$TMP/$name" | cut -d' ' -f1)" != "${SHA256[$name]}" ]; then
        echo "fetch_reference: $name is not the pinned file (SHA-256 differs); nothing kept" >&2
        exit 2
    fi
done
mkdir -p "$DEST"
cp -r "$TMP/." "$DEST/"
echo "fetch_reference: $DEST holds kimiyoung/transformer-xl@${COMMIT:0:7}'s ${#SHA256[@]} files"
