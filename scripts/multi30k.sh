#!/usr/bin/env bash
# Reproduce one row of the README's Multi30k table from nothing: set up .venv, train
# recipes/multi30k.toml from scratch on the CPU, keep the moving average of its weights, choose the
# beam size and length penalty on val, and score test_2016_flickr and test_2017_flickr with sacreBLEU.
#
#   bash scripts/multi30k.sh en de        # also: de en, en fr, fr en, en cs, cs en
#   bash scripts/multi30k.sh en de --seed 2               # more options go to `aiayn train`
#   bash scripts/multi30k.sh en de --resume               # after a stop: on from the last checkpoint
#   bash scripts/multi30k.sh en de --relative-positions   # relative positions (Shaw et al. 2018),
#                                                         # K = 16, instead of the sinusoids
#   RECIPE=recipes/multi30k-small.toml AVERAGE="--last 5" bash scripts/multi30k.sh en de
#                                         # the earlier recipe: `small`, its last 5 checkpoints averaged
#
# Writes runs/multi30k-SRCTGT/ (-relative for the variant; RUN=DIR for another place): checkpoints,
# metrics.jsonl, averaged/ (with decoding.json, the search settings chosen on val), hypotheses,
# scores *.json.
set -euo pipefail
cd "$(dirname "$0")/.."
src=${1:-en}
tgt=${2:-de}
shift $(( $# < 2 ? $# : 2 ))
recipe=${RECIPE:-recipes/multi30k.toml}
average=${AVERAGE:---ema --last 1}     # how the model to translate with is made from the run
run=${RUN:-runs/multi30k-$src$tgt}
if [ "${1:-}" = "--relative-positions" ]; then
    shift
    set -- --relative-positions 16 --positional none "$@"
    run="$run-relative"
fi

tests="multi30k:test_2016_flickr multi30k:test_2017_flickr"
if [ "$src" = cs ] || [ "$tgt" = cs ]; then
    tests=multi30k:test_2016_flickr            # Multi30k has no Czech test_2017_flickr
fi
. scripts/recipe.sh
