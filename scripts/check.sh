#!/usr/bin/env bash
# The static checks CI runs before the tests: lint, format, types, layer contracts.
set -euo pipefail
cd "$(dirname "$0")/.."
echo "== ruff check";          .venv/bin/ruff check .
echo "== ruff format --check"; .venv/bin/ruff format --check .
echo "== mypy";                .venv/bin/mypy
echo "== import-linter";       .venv/bin/lint-imports
