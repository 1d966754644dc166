#!/usr/bin/env bash
# The multilingual recipe against bilingual ones, on one GPU: the multilingual Multi30k model (recipes/multi30k-multilingual.toml,
# 6 directions, 9,600 updates) and bilingual models of recipes/multi30k-small.toml (4,800 updates each),
# all trained at once on the same GPU, each averaged over its last 5 checkpoints and scored on
# test_2016_flickr (beam 4) on that GPU.
#
#   AIAYN_DATA_DIR=DIR bash benchmarks/multilingual_gpu.sh OUT [PAIR ...]   # default pairs: en-cs cs-en fr-en
#
# Writes under OUT: each run's log, metrics.jsonl and scores (results.tar.gz), the times each run started
# and ended (times.tsv), and the multilingual model's averaged directory as model.tar.gz.part-*
# (cat them together), so that it can be scored, served and exported on another machine.
# Runs from the source tree (PYTHONPATH=src): no install needed beside PyTorch and aiayn's dependencies.
# Environment: WORK (the runs, default /tmp/multilingual-gpu), DEADLINE=S (stop training still running
# after S seconds, average it as it stands), DEVICE (default cuda), EXTRA (more `aiayn train` options),
# MULTI_EXTRA (more options for the multilingual run alone), BILINGUAL (the bilingual recipe, default
# recipes/multi30k-small.toml), MULTI (the multilingual one, default recipes/multi30k-multilingual.toml),
# AVERAGE (how each run's model is made, default "--last 5"; "--ema --last 1" for runs with --ema-decay).
set -u
out=$1; shift
pairs=("${@:-en-cs cs-en fr-en}")
read -r -a pairs <<< "${pairs[*]}"
for pair in "${pairs[@]}"; do
    [[ $pair =~ ^[a-z]+-[a-z]+$ ]] || { echo "multilingual_gpu.sh: '$pair' is not a pair such as en-cs" >&2; exit 2; }
done
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
work=${WORK:-/tmp/multilingual-gpu}
device=${DEVICE:-cuda}
EXTRA=${EXTRA:-}   # more training options, for a short trial: EXTRA="--max-steps 10 --save-every 2" DEVICE=cpu
MULTI_EXTRA=${MULTI_EXTRA:-}   # the multilingual run's alone, e.g. a wider model: "--d-model 512 --d-ff 2048 --n-heads 8"
BILINGUAL=${BILINGUAL:-recipes/multi30k-small.toml}
MULTI=${MULTI:-recipes/multi30k-multilingual.toml}
AVERAGE=${AVERAGE:---last 5}
mkdir -p "$out" "$work"
aiayn() { python3 -m aiayn "$@"; }
stamp() { echo -e "$1\t$2\t$(date +%s.%N)" >> "$out/times.tsv"; }

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > "$out/machine.txt" 2>&1
python3 -c "import torch, sys; print(sys.version.split()[0], torch.__version__, torch.cuda.get_device_name())" \
    >> "$out/machine.txt" 2>&1

one_run() {  # NAME TRAIN-OPTIONS...: train, average, score on the GPU
    local name=$1; shift
    local run=$work/$name
    stamp "$name" train-start
    aiayn train --out "$run" --device "$device" --threads 2 "$@" $EXTRA > "$work/$name.train.log" 2>&1 || return 1
    stamp "$name" train-end
    aiayn average "$run" $AVERAGE --out "$run/averaged" > "$work/$name.average.log" 2>&1 || return 1
    stamp "$name" averaged
}

score() {  # NAME: score the averaged model on test_2016_flickr, every direction it has
    local run=$work/$1
    aiayn evaluate "$run/averaged" --test multi30k:test_2016_flickr --device "$device" --output "$run/test_2016_flickr" \
        --scores "$run/test_2016_flickr.json" > "$work/$1.evaluate.log" 2>&1
    stamp "$1" scored
}

ship_model() {  # the multilingual model's averaged directory, in parts small enough to come back
    tar -C "$work/multilingual" -czf "$work/model.tar.gz" averaged
    split -b 15m -d "$work/model.tar.gz" "$out/model.tar.gz.part-"
    md5sum "$work/model.tar.gz" > "$out/model.md5"
}

ship_results() {
    tar -C "$work" -czf "$out/results.tar.gz" --exclude='checkpoints' --exclude='*.safetensors' \
        --exclude='*.pt' --exclude='*.bin' --exclude=model.tar.gz .
}

(one_run multilingual --config "$MULTI" $MULTI_EXTRA \
    || aiayn average "$work/multilingual" $AVERAGE --out "$work/multilingual/averaged" > /dev/null 2>&1
 ship_model && score multilingual) &
pids=($!)
for pair in "${pairs[@]}"; do
    (one_run "$pair" --config "$BILINGUAL" --src-lang "${pair%-*}" --tgt-lang "${pair#*-}" \
        || aiayn average "$work/$pair" $AVERAGE --out "$work/$pair/averaged" > /dev/null 2>&1
     score "$pair") &
    pids+=($!)
done
running() { local p; for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && return 0; done; return 1; }
# Ship what there is every 30 s, so that a call stopped by its time limit still returns the logs. With
# DEADLINE=S, training still running S seconds after the start is stopped (Ctrl-C: a checkpoint is saved),
# averaged as it stands and marked "stopped" in times.tsv.
while running; do
    sleep 10
    if [ -n "${DEADLINE:-}" ] && [ "$SECONDS" -ge "$DEADLINE" ] && [ -z "${stopped:-}" ]; then
        stopped=1
        echo -e "deadline\tstopped\t$(date +%s.%N)" >> "$out/times.tsv"
        pkill -INT -f "aiayn train"
    fi
    [ $((SECONDS % 30)) -lt 10 ] && ship_results
done
wait
ship_results
cat "$out/times.tsv"
