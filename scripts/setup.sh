# Sourced by the scripts that train from nothing: set up .venv with the CPU wheel of torch and
# aiayn, activate it, and find Multi30k in ../shared/data when $AIAYN_DATA_DIR is not set.
if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
fi
. .venv/bin/activate
pip install --quiet torch==2.13.0        # the CPU wheel; install it before the project
pip install --quiet -e .
if [ -z "${AIAYN_DATA_DIR:-}" ] && [ -d ../shared/data/multi30k ]; then
    export AIAYN_DATA_DIR="$(cd ../shared/data && pwd)"
fi
