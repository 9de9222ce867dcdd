#!/usr/bin/env bash
# The main job: set up, build, make the default model if it is missing, and run it.
# Until the server and a trained demo model exist, the default model is a
# random-weight model of the Qwen3-0.6B shape, and the job is `fathom bench` on it.
# Usage: scripts/run.sh [fathom bench options...]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh build
model=${FATHOM_MODEL:-models/qwen3-0.6b-random}
if [ ! -f "$model/config.json" ]; then
  echo "run: writing the default random-weight model to $model"
  /usr/bin/python3 scripts/make_random_model.py --shape qwen3-0.6b --out "$model"
fi
exec build/fathom bench --model "$model" "$@"
