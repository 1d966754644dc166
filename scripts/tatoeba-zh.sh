#!/usr/bin/env bash
# English <-> Chinese from nothing: set up .venv, train recipes/tatoeba-zh.toml on Tatoeba's
# English-Mandarin pairs (tatoeba-zh, 22,646 pairs; read from $AIAYN_DATA_DIR/tatoeba-zh) on the
# CPU, keep the moving average of its weights, choose the beam size and length penalty on val, and
# score tatoeba-zh:test with sacreBLEU (BLEU by characters into Chinese, 13a into English) and chrF.
#
#   bash scripts/tatoeba-zh.sh en zh        # or: zh en
#   bash scripts/tatoeba-zh.sh en zh --seed 2             # more options go to `aiayn train`
#
# Writes runs/tatoeba-SRCTGT/ (RUN=DIR for another place): checkpoints, metrics.jsonl, averaged/
# (with decoding.json, the search settings chosen on val), test.TGT (the translations), test.json.
set -euo pipefail
cd "$(dirname "$0")/.."
src=${1:-en}
tgt=${2:-zh}
shift $(( $# < 2 ? $# : 2 ))
recipe=${RECIPE:-recipes/tatoeba-zh.toml}
average=${AVERAGE:---ema --last 1}     # how the model to translate with is made from the run
run=${RUN:-runs/tatoeba-$src$tgt}
tests=tatoeba-zh:test
. scripts/recipe.sh
