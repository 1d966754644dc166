#!/usr/bin/env bash
# Reproduce one row of the README's Multi30k table from nothing: set up .venv, train
# recipes/multi30k.toml from scratch on the CPU, keep the moving average of its weights, choose the
# beam size and length penalty on val, and score test_2016_flickr and test_2017_flickr with sacreBLEU.
#
#   bash scripts/multi30k.sh en de        # also: de en, en fr, fr en, en cs, cs en
#   bash scripts/multi30k.sh en de --seed 2               # more options go to `aiayn train`
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

. scripts/setup.sh                         # .venv, aiayn, $AIAYN_DATA_DIR

start=$SECONDS
aiayn train --config "$recipe" --src-lang "$src" --tgt-lang "$tgt" --out "$run" "$@"
echo "training took $(( (SECONDS - start) / 60 )) min $(( (SECONDS - start) % 60 )) s (wall time, data and tokenizer included)"
# shellcheck disable=SC2086  # $average holds several options
aiayn average "$run" $average --out "$run/averaged"
aiayn evaluate "$run/averaged" --sweep --scores "$run/sweep.json"   # on multi30k:val, never a test set
tests="test_2016_flickr test_2017_flickr"
if [ "$src" = cs ] || [ "$tgt" = cs ]; then
    tests=test_2016_flickr                     # Multi30k has no Czech test_2017_flickr
fi
for test in $tests; do
    aiayn evaluate "$run/averaged" --test "multi30k:$test" --output "$run/$test.$tgt" --scores "$run/$test.json"
done
echo "all done in $(( (SECONDS - start) / 60 )) min $(( (SECONDS - start) % 60 )) s"

echo
echo "model: $run/averaged. To use aiayn from your shell:"
echo "  . .venv/bin/activate"
if [ -n "${AIAYN_DATA_DIR:-}" ]; then
    echo "  export AIAYN_DATA_DIR=$AIAYN_DATA_DIR     # where Multi30k is"
fi
