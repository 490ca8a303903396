#!/usr/bin/env bash
# A simulated cluster on this machine (needs root): PostgreSQL, the Prefect server and a Dask
# scheduler on the "server host", and N worker hosts, each a network namespace with its own address
# running a Prefect process worker and a Dask worker, sharing the data dir as a path.
#
#   scripts/cluster.sh --data-dir /srv/vidscope up --hosts 2 --config vidscope.toml --watch /srv/videos
#   scripts/cluster.sh --data-dir /srv/vidscope status
#   scripts/cluster.sh --data-dir /srv/vidscope exec 1 -- vidscope ingest /srv/videos
#   scripts/cluster.sh --data-dir /srv/vidscope kill-host 2      # lose a host at once
#   scripts/cluster.sh --data-dir /srv/vidscope add-host 2       # bring it back
#   scripts/cluster.sh --data-dir /srv/vidscope down
#
# The steps are in vidscope/deployments/cluster.py; tests/test_cluster.py runs this script.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
python="${VIDSCOPE_PYTHON:-$here/.venv/bin/python}"
[ -x "$python" ] || python="$(command -v python3)"
exec "$python" -m vidscope.deployments.cluster "$@"
