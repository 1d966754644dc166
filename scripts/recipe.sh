# Sourced by multi30k.sh and tatoeba-zh.sh: train $recipe from scratch into $run ($src -> $tgt, more
# `aiayn train` options in "$@"), make the model to translate with ($average), choose the beam size
# and length penalty on the validation set, and score each of $tests (corpus specs).
. scripts/setup.sh                         # .venv, aiayn, $AIAYN_DATA_DIR

start=$SECONDS
aiayn train --config "$recipe" --src-lang "$src" --tgt-lang "$tgt" --out "$run" "$@"
echo "training took $(( (SECONDS - start) / 60 )) min $(( (SECONDS - start) % 60 )) s (wall time, data and tokenizer included)"
# shellcheck disable=SC2086  # $average holds several options
aiayn average "$run" $average --out "$run/averaged"
aiayn evaluate "$run/averaged" --sweep --scores "$run/sweep.json"   # on the validation set, never a test set
for test in $tests; do
    name=${test#*:}
    aiayn evaluate "$run/averaged" --test "$test" --output "$run/$name.$tgt" --scores "$run/$name.json"
done
echo "all done in $(( (SECONDS - start) / 60 )) min $(( (SECONDS - start) % 60 )) s"

echo
echo "model: $run/averaged. To use aiayn from your shell:"
echo "  . .venv/bin/activate"
if [ -n "${AIAYN_DATA_DIR:-}" ]; then
    echo "  export AIAYN_DATA_DIR=$AIAYN_DATA_DIR     # where the corpora are"
fi
