"""Which Prefect API, if any, an on-demand query run reports to — found without importing Prefect.

A process with no Prefect API to talk to would make Prefect start a temporary API server for its
first flow (7+ s, then thrown away with everything it recorded). Queries (``ask``) therefore run as
flow runs only when a server is there to see them:

1. Prefect's own ``PREFECT_API_URL`` (the environment, the active Prefect profile, or a
   ``temporary_settings`` block when Prefect is already imported), if it answers its health check;
2. else the server ``vidscope server up`` started for this data dir (its pid file, then the
   configured ``[server] host:port``), if it answers;
3. else none: the query runs in-process without Prefect (:mod:`vidscope.flows.ask`).
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

from vidscope.core.settings import Settings

log = logging.getLogger(__name__)

#: Seconds a health check may take; a local server answers in milliseconds.
HEALTH_TIMEOUT = 2.0


def server_api_url(settings: Settings) -> str:
    """The API address of the server ``vidscope server up`` runs for ``settings``."""
    return f"http://{settings.server.host}:{settings.server.port}/api"


def server_pid_file(settings: Settings) -> Path:
    """The pid file of that server (under the data dir's ``server`` managed directory)."""
    return Path(settings.data_dir).expanduser().resolve() / "server" / "server.pid"


def is_healthy(api_url: str, timeout: float = HEALTH_TIMEOUT) -> bool:
    """The Prefect API at ``api_url`` answers its health check."""
    import urllib.error
    import urllib.request  # here, not at the top: most questions find no API to check (~6 ms)

    try:
        with urllib.request.urlopen(api_url.rstrip("/") + "/health", timeout=timeout) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError, ValueError):
        return False


def configured_api_url() -> str | None:
    """``PREFECT_API_URL`` as Prefect would resolve it in this process (``None`` when unset)."""
    if "prefect.settings" in sys.modules:  # Prefect is loaded: ask it (covers temporary_settings)
        from prefect.settings import PREFECT_API_URL

        return PREFECT_API_URL.value() or None
    if "PREFECT_API_URL" in os.environ:
        return os.environ["PREFECT_API_URL"] or None
    return _profile_api_url()


def _profile_api_url() -> str | None:
    """``PREFECT_API_URL`` of the active profile in ``$PREFECT_HOME/profiles.toml``, if any."""
    home = Path(os.environ.get("PREFECT_HOME") or "~/.prefect").expanduser()
    try:
        text = (home / "profiles.toml").read_text()
    except OSError:
        return None
    import tomllib  # only when there is a profiles file to read

    try:
        profiles = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return None
    active = os.environ.get("PREFECT_PROFILE") or profiles.get("active", "ephemeral")
    value = profiles.get("profiles", {}).get(active, {}).get("PREFECT_API_URL")
    return str(value) if value else None


def _server_pid_alive(settings: Settings) -> bool:
    try:
        pid = int(server_pid_file(settings).read_text().strip())
        os.kill(pid, 0)
    except (OSError, ValueError):
        return False
    return True


def reachable_api(settings: Settings) -> str | None:
    """The Prefect API a query run should report to, or ``None`` to run without Prefect."""
    configured = configured_api_url()
    if configured:
        if is_healthy(configured):
            return configured
        log.warning("PREFECT_API_URL=%s does not answer; answering without Prefect", configured)
        return None
    if _server_pid_alive(settings) and is_healthy(server_api_url(settings)):
        return server_api_url(settings)
    return None
