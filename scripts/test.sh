#!/usr/bin/env bash
# The test command: set up, build, run every test. Ends with ctest's summary line.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh build
cd build
ctest --output-on-failure -j2 --timeout 600
