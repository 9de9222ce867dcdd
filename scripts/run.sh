#!/usr/bin/env bash
# The main job: set up, build, and serve the default model (OpenAI and Anthropic APIs on
# http://127.0.0.1:8080 unless --host/--port say otherwise).
# The default model is fathom-chat-small (assets/models/): a 12M-parameter Qwen3-architecture
# chat model this project trained on WordNet and the Jargon File (scripts/train/). It answers
# "What does X mean?"-style questions in the right form, often with wrong content. It is
# served with its draft model, assets/models/fathom-draft, for speculative decoding (unless
# --spec or --draft-model is given).
# It says at start where the chat page is and how to chat in a terminal instead.
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
# Where to go from here: the chat page (the port and host as given, if given) and the terminal chat.
port=8080 host=127.0.0.1 args=("$@")
for i in "${!args[@]}"; do
  case ${args[$i]} in
    --port) port=${args[$((i + 1))]:-$port} ;;
    --port=*) port=${args[$i]#--port=} ;;
    --host) host=${args[$((i + 1))]:-$host} ;;
    --host=*) host=${args[$i]#--host=} ;;
  esac
done
[ "$host" = 0.0.0.0 ] && host=127.0.0.1
page="http://$host:$port/"
[ "$port" = 0 ] && page="the address it prints"
if [[ " $* " != *" --no-webui "* ]]; then
  echo "run: once it listens, open $page in a browser to chat with the model (scripts/run.sh --no-webui: no page);"
fi
echo "run: or chat in a terminal: build/fathom chat --model $model${speculation[*]:+ ${speculation[*]}}"
exec build/fathom serve --model "$model" "${speculation[@]}" "$@"
