#!/usr/bin/env bash
# The test suite once per CPU kernel setting, to show it does not depend on which kernels this CPU
# picks: PyTorch's own choice, ATen's AVX2 and plain C++ kernels, and oneDNN without AVX-512 or
# AMX. Each run takes as long as the whole suite; CI runs the default one only.
#
#   bash scripts/test-kernels.sh                  # every setting, the whole suite
#   bash scripts/test-kernels.sh tests/serve -x   # arguments go to pytest
#   KERNELS="ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2" bash scripts/test-kernels.sh   # some only
#                                                 # (after CI, which ran the default one)
#
# Prints one summary line per setting, and the tests that failed under it; exits 1 if any failed.
set -uo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || { echo "no .venv: run bash .ci/run first" >&2; exit 2; }

status=0
log=$(mktemp)
for setting in ${KERNELS:-default ATEN_CPU_CAPABILITY=avx2 ATEN_CPU_CAPABILITY=default ONEDNN_MAX_CPU_ISA=AVX2}; do
    [ "$setting" = default ] && setting=""
    kernels=$(env $setting .venv/bin/python -c "import torch; print(torch.backends.cpu.get_cpu_capability())")
    # A compile cache of its own: TorchInductor's is not keyed by ATEN_CPU_CAPABILITY, and code
    # compiled under one setting fails to build under another.
    inductor=$(mktemp -d)
    env $setting TORCHINDUCTOR_CACHE_DIR="$inductor" .venv/bin/python -m pytest -q -p no:cacheprovider "$@" \
        > "$log" 2>&1 || status=1
    rm -rf "$inductor"
    echo "${setting:-default kernels} (ATen picks $kernels): $(tail -n 1 "$log")"
    grep -E '^(FAILED|ERROR) ' "$log" | sed 's/^/    /'
done
rm -f "$log"
exit $status
