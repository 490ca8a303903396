#!/usr/bin/env bash
# Set up vidscope on a fresh Debian/Ubuntu machine: system packages, a virtualenv in .venv, the
# whole stack (including the optional extras, so every test can run). Safe to run again.
#   bash scripts/setup.sh          everything: vidscope[all] with the dev tools (what CI installs)
#   bash scripts/setup.sh --core   only what the embedded profile runs: no torch, no browser, ~1/10
#                                  of the size
set -euo pipefail
cd "$(dirname "$0")/.."
mode=all
case "${1:-}" in
  "") ;;
  --core) mode=core ;;
  *) echo "usage: bash scripts/setup.sh [--core]" >&2; exit 2 ;;
esac

# ffmpeg: video tools used by tests and benchmarks; espeak-ng + sox: synthetic speech for the demo
# and tests. PyAV and decord bring their own decoders, so ingestion itself does not need these.
# chromium is a test dependency (the web page's browser test): the full install only.
tools=(ffmpeg espeak-ng sox)
[ "$mode" = core ] || tools+=(chromium)
missing=()
for tool in "${tools[@]}"; do command -v "$tool" >/dev/null || missing+=("$tool"); done
if [ ${#missing[@]} -gt 0 ]; then
  if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  elif command -v apt-get >/dev/null && command -v sudo >/dev/null; then
    sudo apt-get update -qq
    sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  else
    echo "warning: please install ${missing[*]} with your package manager" >&2
  fi
fi

PYTHON=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
.venv/bin/python -m pip install -q -U pip
# vidscope is installed editable: byte-compile it as installing a wheel does, or each command
# compiles it from source again where PYTHONDONTWRITEBYTECODE is set (CI's machines set it).
compile_vidscope() { .venv/bin/python -m compileall -q vidscope; }
if [ "$mode" = core ]; then
  .venv/bin/python -m pip install -q -c constraints.txt -e .
  compile_vidscope
  # The embedded MiniLM's weights are fetched pinned into the model cache on first use (or by
  # `.venv/bin/vidscope models pull`): no weight package, so no --no-deps step.
  .venv/bin/python -c "import cv2"
  echo "vidscope (core) is set up in .venv (run: .venv/bin/vidscope --help; everything: bash scripts/setup.sh)"
  exit 0
fi
# constraints.txt pins what is known broken (fastapi, SQLAlchemy) and makes the three OpenCV
# distributions that ultralytics, rapidocr and paddlex pull in agree on one version.
.venv/bin/python -m pip install -q -c constraints.txt -e '.[all]'
compile_vidscope
# All three OpenCV wheels share the cv2 folder; whichever was installed last wins. Reinstall the
# superset last so cv2 is complete, then check it.
.venv/bin/python -m pip install -q --no-deps --force-reinstall -c constraints.txt \
  opencv-contrib-python==4.10.0.84
.venv/bin/python -c "import cv2; assert cv2.__version__ == '4.10.0', cv2.__version__"
echo "vidscope is set up in .venv (run: .venv/bin/vidscope --help)"
