#!/usr/bin/env bash
# From nothing to a translating model: set up .venv, train the small Transformer on Multi30k
# en->de for 250 updates (recipes/quickstart.toml; 4 to 8 minutes on a 2-core CPU), then
# translate three sentences (the words differ a little from one CPU to another). Multi30k is read
# from $AIAYN_DATA_DIR (default: ../shared/data when it exists), else downloaded into ~/.cache/aiayn.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
fi
. .venv/bin/activate
pip install --quiet --upgrade pip
pip install --quiet torch==2.13.0        # the CPU wheel; install it before the project
pip install --quiet -e .

if [ -z "${AIAYN_DATA_DIR:-}" ] && [ -d ../shared/data/multi30k ]; then
    export AIAYN_DATA_DIR="$(cd ../shared/data && pwd)"
fi

run=runs/quickstart                      # runs/quickstart-2, -3, ... when it is taken
n=1
while [ -e "$run" ]; do n=$((n + 1)); run="runs/quickstart-$n"; done
start=$SECONDS
aiayn train --config recipes/quickstart.toml --out "$run"
echo "training took $(( (SECONDS - start) / 60 )) min $(( (SECONDS - start) % 60 )) s"
aiayn translate "$run" \
    "A man in an orange hat starring at something." \
    "Two young children are playing in the sand." \
    "A woman is riding a bicycle down the street."

echo
echo "model: $run. To use aiayn from your shell:"
echo "  . .venv/bin/activate"
if [ -n "${AIAYN_DATA_DIR:-}" ]; then
    echo "  export AIAYN_DATA_DIR=$AIAYN_DATA_DIR     # where Multi30k is"
fi
echo "  aiayn translate $run \"A dog runs on the beach.\""
