#!/usr/bin/env bash
# Every check that needs a CUDA device, as one run on a machine with one (benchmarks/system/gpu.py
# is limited to 7 minutes, to fit a 10-minute call):
# the CUDA tests (graph capture, graphed engine steps against offline decode), then
# benchmarks/system/gpu.py (offline figures, eager and with CUDA graphs, and the engine's levels).
#
#   bash benchmarks/gpu_checks.sh          # results in $OUT, else gpu-out/
#
# It runs this checkout (PYTHONPATH=src) on the machine's python3 and its CUDA torch. Packages
# these checks import that such a machine may lack (soundfile with cffi and pycparser, soxr) can
# be put in .whl/ as wheels for its Python, e.g.
#   pip download --no-deps --only-binary=:all: --python-version 3.12 \
#       --platform manylinux2014_x86_64 -d .whl soundfile cffi pycparser soxr
# and are installed into /tmp/site first.
set -uo pipefail
out=${OUT:-gpu-out}
mkdir -p "$out"
if compgen -G ".whl/*.whl" > /dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl \
        && export PYTHONPATH=/tmp/site
fi
export PYTHONPATH="src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available())" \
    | tee "$out/gpu.txt"
python3 -m pytest -q -p no:cacheprovider tests/nn/test_cuda_graphs.py \
    tests/server/test_step_graphs.py 2>&1 | tee "$out/tests.txt"
timeout 420 python3 benchmarks/system/gpu.py --seconds 10 --engine-streams 1,4,16,64,256 \
    --json "$out/gpu.json" 2>&1 | tee -a "$out/gpu.txt"
