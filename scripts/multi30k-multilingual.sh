#!/usr/bin/env bash
# Reproduce the README's multilingual Multi30k row from nothing: set up .venv, train
# recipes/multi30k-multilingual.toml (one model, 6 directions) on the CPU, average the last 5
# checkpoints, and score every direction on test_2016_flickr with sacreBLEU: about 2.5-3 hours on a
# 2-core CPU (an update 0.98 s), 6 minutes on one H200 (benchmarks/multilingual_gpu.sh).
#
#   bash scripts/multi30k-multilingual.sh             # more options go to `aiayn train`
#   RECIPE=recipes/multi30k-multilingual-tiny.toml AVERAGE="--ema --last 1" RUN=runs/multilingual-tiny \
#       bash scripts/multi30k-multilingual.sh         # the bilingual recipe's levers (measured worse)
#
#   bash scripts/multi30k-multilingual.sh --resume    # go on from the run's last checkpoint after a stop
#                                                     # (with the RUN and RECIPE it was started with)
#
# Writes runs/multi30k-multilingual/ (RUN=DIR for another place): checkpoints, metrics.jsonl,
# averaged/, hypotheses (test_2016_flickr.SRC-TGT), scores test_2016_flickr.json (each direction
# under "directions").
set -euo pipefail
cd "$(dirname "$0")/.."
recipe=${RECIPE:-recipes/multi30k-multilingual.toml}
average=${AVERAGE:---last 5}     # how the model to translate with is made from the run
run=${RUN:-runs/multi30k-multilingual}

. scripts/setup.sh                         # .venv, aiayn, $AIAYN_DATA_DIR

start=$SECONDS
aiayn train --config "$recipe" --out "$run" "$@"
echo "training took $(( (SECONDS - start) / 60 )) min $(( (SECONDS - start) % 60 )) s (wall time, data and tokenizer included)"
# shellcheck disable=SC2086  # $average holds several options
aiayn average "$run" $average --out "$run/averaged"
aiayn evaluate "$run/averaged" --test multi30k:test_2016_flickr --output "$run/test_2016_flickr" \
    --scores "$run/test_2016_flickr.json"

echo
echo "model: $run/averaged, one model for $(python -c "import json; print(', '.join(json.load(open('$run/averaged/config.json'))['data']['pairs']))")."
echo "To use aiayn from your shell:"
echo "  . .venv/bin/activate"
if [ -n "${AIAYN_DATA_DIR:-}" ]; then
    echo "  export AIAYN_DATA_DIR=$AIAYN_DATA_DIR     # where Multi30k is"
fi
echo "  aiayn translate $run/averaged --src-lang en --tgt-lang cs \"A dog runs on the beach.\""
