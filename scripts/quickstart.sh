#!/usr/bin/env bash
# From nothing to a translating model: set up .venv, train the small Transformer on Multi30k
# en->de for 5 minutes on the CPU (recipes/quickstart.toml), then translate a few sentences.
# Multi30k is read from $AIAYN_DATA_DIR (default: ../shared/data when it exists), else downloaded.
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

run="runs/quickstart-$(date +%Y%m%d-%H%M%S)"
aiayn train --config recipes/quickstart.toml --out "$run"
aiayn info "$run" | tail -8
aiayn translate "$run" \
    "A man in an orange hat starring at something." \
    "Two young children are playing in the sand." \
    "A woman is riding a bicycle down the street."
echo "model: $run (try: aiayn translate $run \"A dog runs on the beach.\")"
