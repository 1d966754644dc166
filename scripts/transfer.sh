#!/usr/bin/env bash
# Reproduce the README's "start from a model" rows: en->fr trained on only the first 2,000 Multi30k
# training pairs, scored on test_2016_flickr, each run the same number of updates:
#   scratch  the small Transformer from nothing (its own 8k BPE vocabulary from the 2,000 pairs)
#   init     --init-from the en->de recipe model (runs/multi30k-ende/averaged, bash scripts/multi30k.sh en de)
#   marian   --init-from that model converted to a Marian directory (aiayn convert to-marian)
# then an early-stopped fine-tune (--patience 2 --stop-metric bleu --min-delta 0.1, greedy BLEU every
# 50 updates: it stops once two validations in a row gain less than 0.1 BLEU on the best).
#
#   bash scripts/transfer.sh                 # 2,000 pairs, 300 updates
#   PAIRS=5000 UPDATES=600 bash scripts/transfer.sh
#   SWEEP="0.016 0.048 0.5" bash scripts/transfer.sh   # also `init` with these --lr-scale values
#   PARENT=DIR VALID=SPEC TEST=SPEC OUT=DIR ...   # another parent, validation and test sets, output
#
# Writes runs/transfer-enfr/: the data, parent-marian/, one run directory per row, *.json scores, results.md.
set -euo pipefail
cd "$(dirname "$0")/.."
pairs=${PAIRS:-2000}
updates=${UPDATES:-300}
parent=${PARENT:-runs/multi30k-ende/averaged}
valid=${VALID:-multi30k:val}
test=${TEST:-multi30k:test_2016_flickr}
out=${OUT:-runs/transfer-enfr}
. .venv/bin/activate
python -c "import transformers" 2>/dev/null || pip install --quiet -e ".[interop]"   # convert to-marian
if [ -z "${AIAYN_DATA_DIR:-}" ] && [ -d ../shared/data/multi30k ]; then
    export AIAYN_DATA_DIR="$(cd ../shared/data && pwd)"
fi
if [ ! -d "$parent" ]; then
    echo "no $parent: train it first with  bash scripts/multi30k.sh en de" >&2
    exit 1
fi

mkdir -p "$out/data"
python - "$pairs" "$out/data/train" <<'EOF'
import sys
from aiayn.data import multi30k
pairs, prefix = int(sys.argv[1]), sys.argv[2]
corpus = multi30k.load("train", "en", "fr")
for lang, side in (("en", corpus.source), ("fr", corpus.target)):
    with open(f"{prefix}.{lang}", "w", encoding="utf-8") as f:
        f.writelines(line + "\n" for line in side[:pairs])
EOF
[ -d "$out/parent-marian" ] || aiayn convert to-marian "$parent" "$out/parent-marian"

common=(--train "$out/data/train" --valid "$valid" --src-lang en --tgt-lang fr --max-steps "$updates"
        --valid-every 50 --bleu-every 0 --save-every "$updates" --keep-checkpoints 1)
train() {  # NAME FLAGS...: train runs/transfer-enfr/NAME unless done, then score its newest checkpoint
    local name=$1; shift  # (or $SCORE, a path under the run) on test_2016_flickr
    local run="$out/$name"
    if [ ! -f "$out/$name.json" ]; then
        rm -rf "$run"
        local start=$SECONDS
        aiayn train "$@" --out "$run" 2>&1 | grep -v "it/s\|step/s" | tee "$out/$name.log"
        echo "$(( SECONDS - start ))" > "$out/$name.seconds"
        aiayn evaluate "$run/${SCORE:-}" --test "$test" --output "$out/$name.fr" --scores "$out/$name.json"
    fi
}

train init --init-from "$parent" "${common[@]}"
for scale in ${SWEEP:-}; do
    train "init-lr$scale" --init-from "$parent" --warmup-steps 100 --lr-scale "$scale" "${common[@]}"
done
train marian --init-from "$out/parent-marian" "${common[@]}"
# From scratch: the recipe's model and dropout, warmed up over 100 updates to a peak rate of 1e-3.
train scratch --preset small --dropout 0.3 --attention-dropout 0 --activation-dropout 0 \
    --warmup-steps 100 --lr-scale 0.16 "${common[@]}"
SCORE=checkpoints/best train early --init-from "$parent" "${common[@]}" --max-steps 2000 --bleu-every 50 --bleu-beam 1 \
    --patience 2 --stop-metric bleu --min-delta 0.1 --keep-checkpoints 2

python - "$out" <<'EOF'
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
rows = ["| run | valid loss before the first update | valid loss at the end | test BLEU | test chrF | training s |",
        "|---|---|---|---|---|---|"]
for scores in sorted(out.glob("*.json")):
    name = scores.stem
    valid = [json.loads(line) for line in (out / name / "metrics.jsonl").read_text().splitlines()]
    losses = [r for r in valid if r["kind"] == "valid"]
    first = f"{losses[0]['loss']:.4f}" if losses and losses[0]["step"] == 0 else "-"
    s = json.loads(scores.read_text())
    seconds = (out / f"{name}.seconds").read_text().strip()
    rows.append(f"| {name} | {first} | {losses[-1]['loss']:.4f} (step {losses[-1]['step']}) | {s['bleu']:.2f} "
                f"| {s['chrf']:.2f} | {seconds} |")
text = "\n".join(rows) + "\n"
(out / "results.md").write_text(text)
print(text)
EOF
