#!/usr/bin/env bash
# The main job: set up, build, and serve the default model (OpenAI and Anthropic APIs on
# http://127.0.0.1:8080 unless --host/--port say otherwise).
# The default model is fathom-chat-small (assets/models/): a 12M-parameter Qwen3-architecture
# chat model this project trained on WordNet and the Jargon File (scripts/train/). It answers
# "What does X mean?"-style questions in the right form, often with wrong content. It is
# served with its draft model, assets/models/fathom-draft, for speculative decoding (unless
# --spec or --draft-model is given).
# Usage: scripts/run.sh [fathom serve options...]
#   FATHOM_MODEL=DIR serves another folder; FATHOM_MODEL=random serves a random-weight model
#   of the Qwen3-0.6B shape with the real Qwen3 tokenizer (real speed, meaningless answers).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh build
model=${FATHOM_MODEL:-assets/models/fathom-chat-small}
if [ "$model" = random ]; then
  model=models/qwen3-0.6b-random
  if [ ! -f "$model/config.json" ]; then
    echo "run: writing a random-weight Qwen3-0.6B-shape model to $model"
    /usr/bin/python3 scripts/make_random_model.py --shape qwen3-0.6b --out "$model"
  fi
  if [ ! -f "$model/tokenizer.json" ]; then
    cp .cache/tokenizers/qwen3/tokenizer.json .cache/tokenizers/qwen3/tokenizer_config.json "$model/"
  fi
fi
speculation=()
if [ "$model" = assets/models/fathom-chat-small ] && [[ " $* " != *" --spec "* && " $* " != *" --draft-model "* ]]; then
  speculation=(--draft-model assets/models/fathom-draft)
fi
exec build/fathom serve --model "$model" "${speculation[@]}" "$@"
