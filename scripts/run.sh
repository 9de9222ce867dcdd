#!/usr/bin/env bash
# The main job: set up, build, make the default model if it is missing, and serve it
# (OpenAI and Anthropic APIs on http://127.0.0.1:8080 unless --host/--port say otherwise).
# The default model is a random-weight model of the Qwen3-0.6B shape with the real
# Qwen3 tokenizer and chat template: its answers are meaningless, its API and speed are real.
# Usage: scripts/run.sh [fathom serve options...]   (FATHOM_MODEL=DIR serves another folder)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh build
default_model=models/qwen3-0.6b-random
model=${FATHOM_MODEL:-$default_model}
if [ "$model" = "$default_model" ]; then
  if [ ! -f "$model/config.json" ]; then
    echo "run: writing the default random-weight model to $model"
    /usr/bin/python3 scripts/make_random_model.py --shape qwen3-0.6b --out "$model"
  fi
  # The real Qwen3 tokenizer and chat template (fetched by setup into .cache/).
  if [ ! -f "$model/tokenizer.json" ]; then
    cp .cache/tokenizers/qwen3/tokenizer.json .cache/tokenizers/qwen3/tokenizer_config.json "$model/"
  fi
fi
exec build/fathom serve --model "$model" "$@"
