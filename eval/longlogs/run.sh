#!/usr/bin/env bash
# Runs each failing scenario of train.py under torchrun with 8 ranks on CPU and keeps
# every rank's output, prefixed as `torchrun --tee 3` prefixes it, in SCENARIO.log.
# Usage: eval/longlogs/run.sh PYTHON (a Python with torch installed)
set -u
python=${1:-python3}
cd "$(dirname "$0")"
for scenario in ${SCENARIOS:-exception sigkill skipped nan straggler}; do
    "$python" -m torch.distributed.run --nproc-per-node 8 --tee 3 --master-port 29517 \
        train.py "$scenario" > "$scenario.log" 2>&1
    echo "$scenario: exit $?, $(wc -l < "$scenario.log") lines"
done
