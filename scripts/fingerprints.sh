#!/bin/bash
# The outputs a refactor or a speed-up must leave byte-identical, written into DIR:
# validate (chip and source groups), serve_validate and the MLPerf report as CSVs (with their text
# reports beside them) and a fixed sweep's digest. Compare two trees with `cmp` file by file.
# Usage, from the repository root, in an environment with membound's dependencies:
#   bash scripts/fingerprints.sh DIR        (about 2 minutes on 2 cores)
set -e
out=${1:?usage: scripts/fingerprints.sh DIR}; mkdir -p "$out"
export PYTHONPATH=$PWD/src
python -m membound validate --csv "$out/validate_chip.csv" > "$out/validate_chip.txt" 2>&1
python -m membound validate --group source --csv "$out/validate_source.csv" > "$out/validate_source.txt" 2>&1
python -m membound.fidelity.serve_validate --csv "$out/serve_validate.csv" > "$out/serve_validate.txt" 2>&1
python -m membound.fidelity.mlperf_validate --csv "$out/mlperf.csv" > "$out/mlperf.txt" 2>&1
python benchmarks/sweep_digest.py > "$out/sweep_digest.txt" 2>&1
sha256sum "$out"/*.csv "$out"/sweep_digest.txt
