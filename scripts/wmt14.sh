#!/usr/bin/env bash
# The paper's WMT14 English-German base model (recipes/wmt14-ende-base.toml): prepare the data,
# train with torchrun on this machine's GPUs, average the last 5 checkpoints, score newstest2014.
# Run it where aiayn is installed (pip install -e ".[hf]" for the hub's dataset).
#
#   bash scripts/wmt14.sh                               # the `wmt14` dataset of HuggingFace datasets
#   WMT14_DIR=/data/wmt14 bash scripts/wmt14.sh         # local files: train.{en,de},
#                                                       # newstest2013.{en,de}, newstest2014.{en,de}
#   GPUS=4 bash scripts/wmt14.sh                        # default: every GPU nvidia-smi lists
#   NNODES=2 NODE_RANK=0 MASTER=host:29500 bash scripts/wmt14.sh   # on each machine, NODE_RANK 0, 1
#   DRY_RUN=1 OUT=/tmp/wmt14-dry bash scripts/wmt14.sh  # the whole path on a tiny synthetic corpus,
#                                                       # 2 CPU processes, a few updates
#
# Writes $DATA (default data/wmt14-ende) and $OUT (default runs/wmt14-ende): checkpoints,
# metrics.jsonl, averaged/, newstest2014.de and its scores. Run it again to resume training.
# More arguments go to `aiayn train`.
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
out=${OUT:-runs/wmt14-ende}
data=${DATA:-data/wmt14-ende}
vocab=37000
options=()

if [ -n "${DRY_RUN:-}" ]; then
    train=synthetic:reverse; valid=synthetic:reverse:val; test=synthetic:reverse:test
    vocab=300; gpus=2
    options=(--preset tiny --device cpu --threads 1 --batch-tokens 256 --update-tokens 600
             --warmup-steps 4 --max-steps 6 --save-every 1 --valid-every 3 --bleu-every 6 --log-every 1)
elif [ -n "${WMT14_DIR:-}" ]; then
    train=$WMT14_DIR/train; valid=$WMT14_DIR/newstest2013; test=$WMT14_DIR/newstest2014
else
    train=hf:wmt14:de-en:train; valid=hf:wmt14:de-en:validation; test=hf:wmt14:de-en:test
fi
gpus=${GPUS:-${gpus:-$(nvidia-smi -L 2>/dev/null | wc -l)}}
if [ "$gpus" -lt 1 ]; then gpus=1; fi

if [ ! -f "$data/data.json" ]; then
    $python -m aiayn prepare --train "$train" --valid "$valid" --src-lang en --tgt-lang de \
        --vocab-size "$vocab" --out "$data"
fi

if [ "${NNODES:-1}" -gt 1 ]; then
    launch=(--nnodes "$NNODES" --node-rank "${NODE_RANK:?set NODE_RANK}" --rdzv-backend c10d
            --rdzv-endpoint "${MASTER:?set MASTER=host:port}")
else
    launch=(--standalone)
fi
torchrun=("$python" -m torch.distributed.run "${launch[@]}" --nproc-per-node "$gpus" -m aiayn train)
start=$SECONDS
if [ -d "$out/checkpoints" ]; then
    "${torchrun[@]}" --out "$out" --resume "$@"
else
    "${torchrun[@]}" --config recipes/wmt14-ende-base.toml --data "$data" --out "$out" "${options[@]}" "$@"
fi
echo "training took $(( (SECONDS - start) / 3600 )) h $(( (SECONDS - start) % 3600 / 60 )) min"

if [ "${NODE_RANK:-0}" -eq 0 ]; then
    $python -m aiayn average "$out" --last 5 --out "$out/averaged" --force
    $python -m aiayn evaluate "$out/averaged" --test "$test" --output "$out/newstest2014.de" \
        --scores "$out/newstest2014.json"
fi
