#!/usr/bin/env bash
# Where a multilingual model is told the target language: as the source's first token (Johnson et
# al., OPUS-MT: --language-token source) or as the decoder's first token (fairseq: --language-token
# target). Trains recipes/multi30k-multilingual.toml both ways for a quarter of its updates, the two
# runs side by side on one thread each, then scores each direction on test_2016_flickr (beam 4, the
# last checkpoint) and zero-shot de->fr, fr->de, de->cs (benchmarks/zero_shot.py).
#
#   bash benchmarks/language_token.sh               # 2,400 updates each
#   UPDATES=9600 OUT=runs/language-token bash benchmarks/language_token.sh
#
# Writes $OUT/{source,target}/ (runs), *.json (scores), zero-shot-*.md, and prints a table.
set -euo pipefail
cd "$(dirname "$0")/.."
updates=${UPDATES:-2400}
out=${OUT:-runs/language-token}
. scripts/setup.sh
mkdir -p "$out"
for where in source target; do
    run="$out/$where"
    if [ -f "$out/$where.json" ] || [ -d "$run/checkpoints/step_$(printf %08d "$updates")" ]; then
        continue
    elif ls "$run"/checkpoints/step_* > /dev/null 2>&1; then   # a session cut short: go on
        flags=(--resume --threads 1 --max-steps "$updates")
    else
        flags=(--config recipes/multi30k-multilingual.toml --language-token "$where" --threads 1
               --max-steps "$updates" --bleu-every "$updates" --keep-checkpoints 1)
    fi
    aiayn train "${flags[@]}" --out "$run" >> "$out/$where.log" 2>&1 &
done
wait
for where in source target; do
    if [ ! -f "$out/$where.json" ]; then
        aiayn evaluate "$out/$where" --test multi30k:test_2016_flickr --output "$out/$where.test" \
            --scores "$out/$where.json"
        python benchmarks/zero_shot.py "$out/$where" > "$out/zero-shot-$where.md"
    fi
done
python - "$out" <<'PY'
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
runs = {w: json.loads((out / f"{w}.json").read_text()) for w in ("source", "target")}
valid = {w: [json.loads(x) for x in (out / w / "metrics.jsonl").read_text().splitlines()] for w in runs}
print("| direction | " + " | ".join(f"{w}: BLEU / chrF" for w in runs) + " |")
print("|---|---|---|")
for d in runs["source"]["directions"]:
    print(f"| {d} | " + " | ".join(f"{r['directions'][d]['bleu']:.2f} / {r['directions'][d]['chrf']:.2f}"
                                   for r in runs.values()) + " |")
last = {w: [r for r in v if r["kind"] == "valid"][-1] for w, v in valid.items()}
print("| valid loss (pooled) | " + " | ".join(f"{last[w]['loss']:.4f} (step {last[w]['step']})" for w in runs) + " |")
for w in runs:
    print(f"\nzero-shot, {w}:\n" + (out / f"zero-shot-{w}.md").read_text())
PY
