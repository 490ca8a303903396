"""vidscope's Prefect deployments, applied to the configured server with one call.

- ``nightly-ingest/nightly``: the nightly flow on ``[server] nightly_cron`` in ``[server]
  timezone`` (02:00 UTC by default), scanning ``[server] watch_folders``;
- ``ask/on-demand`` and ``search/on-demand``: the query flows, run when triggered (UI, API or
  ``prefect deployment run``).

All run on the ``process`` work pool ``[server] work_pool``, whose worker ``vidscope server up``
starts. Entry points are module paths (``vidscope.flows.nightly.nightly``), so any worker with
vidscope installed can run them without pulling code; the data dir and config file travel in the
deployments' job variables.
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from vidscope.core.settings import OFFLINE_ENVIRONMENT, Settings
from vidscope.deployments.server import api_url


@dataclass(frozen=True)
class DeploymentSpec:
    """One deployment: which flow (``module:attribute``), its name, and an optional cron."""

    flow: str
    name: str
    description: str
    scheduled: bool = False
    tags: tuple[str, ...] = ("vidscope",)


#: The deployments ``apply_deployments`` creates or updates.
DEPLOYMENTS: tuple[DeploymentSpec, ...] = (
    DeploymentSpec(
        "vidscope.flows.nightly:nightly",
        "nightly",
        "Ingest new or changed videos from the watch folders.",
        scheduled=True,
    ),
    DeploymentSpec(
        "vidscope.flows.ask:ask",
        "on-demand",
        "Answer a question about one ingested video (parameters: video_id, question).",
    ),
    DeploymentSpec(
        "vidscope.flows.search:search",
        "on-demand",
        "Find the videos of the library that match a query.",
    ),
)


@dataclass
class Applied:
    """The outcome for one deployment: its full name and id, or why it was not applied."""

    spec: DeploymentSpec
    full_name: str | None = None
    deployment_id: str | None = None
    error: str | None = None
    schedule: dict[str, str] = field(default_factory=dict)


def check_schedule(settings: Settings) -> None:
    """Refuse an unknown time zone or a malformed cron expression with a clear message."""
    from prefect.client.schemas.schedules import CronSchedule
    from pydantic import ValidationError

    try:
        ZoneInfo(settings.server.timezone)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ValueError(f"[server] timezone {settings.server.timezone!r} is not a known time zone") from exc
    try:
        CronSchedule(cron=settings.server.nightly_cron, timezone=settings.server.timezone)
    except ValidationError as exc:
        raise ValueError(
            f"[server] nightly_cron {settings.server.nightly_cron!r} is not a cron expression"
        ) from exc


#: Seconds between the heartbeat events of a deployment's flow runs (Prefect's minimum; its default
#: is 180, which any other process reporting to the server, such as ``vidscope ingest``, keeps).
HEARTBEAT_SECONDS = 30
#: A flow run silent this long has lost its process or its host. Server-wide, so it must exceed the
#: slowest heartbeat of any process reporting there: over three of Prefect's default 180 s. Where
#: every process beats every 30 s (the simulated cluster), 90 s is enough.
LOST_AFTER_SECONDS = 600
#: The automation that marks such a run Crashed (else it shows Running for ever; issue 42).
CRASH_AUTOMATION = "vidscope: flow run lost (no heartbeat)"


def job_environment(settings: Settings) -> dict[str, str]:
    """Environment of every flow run: the data dir, the config file, heartbeats, telemetry off."""
    env = dict(OFFLINE_ENVIRONMENT)
    env["PREFECT_FLOWS_HEARTBEAT_FREQUENCY"] = str(HEARTBEAT_SECONDS)
    env["VIDSCOPE_DATA_DIR"] = str(Path(settings.data_dir).expanduser().resolve())
    config = Path(os.environ.get("VIDSCOPE_CONFIG", "vidscope.toml"))
    if config.exists():
        env["VIDSCOPE_CONFIG"] = str(config.resolve())
    return env


def ensure_work_pool(settings: Settings) -> bool:
    """Create the ``process`` work pool if the server does not have it; True when created."""
    from prefect import get_client
    from prefect.client.schemas.actions import WorkPoolCreate
    from prefect.exceptions import ObjectAlreadyExists, ObjectNotFound
    from prefect.workers.process import ProcessWorker

    with get_client(sync_client=True) as client:
        try:
            client.read_work_pool(settings.server.work_pool)
            return False
        except ObjectNotFound:
            pass
        try:
            client.create_work_pool(
                WorkPoolCreate(
                    name=settings.server.work_pool,
                    type="process",
                    base_job_template=ProcessWorker.get_default_base_job_template(),
                    description="vidscope: ingestion and query flows as local processes",
                )
            )
        except ObjectAlreadyExists:  # a worker created it meanwhile
            return False
    return True


def ensure_crash_detection(lost_after: int = LOST_AFTER_SECONDS) -> bool:
    """Create the automation that marks a flow run Crashed when no heartbeat came for ``lost_after``
    seconds (its process, or the whole worker host, was killed); True when created or changed.
    Without it such a run shows Running for ever."""
    from datetime import timedelta

    from prefect import get_client
    from prefect.client.schemas.objects import StateType
    from prefect.events.actions import ChangeFlowRunState
    from prefect.events.schemas.automations import AutomationCore, EventTrigger, Posture

    with get_client(sync_client=True) as client:
        for existing in client.read_automations_by_name(CRASH_AUTOMATION):
            if existing.trigger.within == timedelta(seconds=lost_after):  # type: ignore[union-attr]
                return False
            client.delete_automation(existing.id)
        ends = ("heartbeat", "Completed", "Failed", "Cancelled", "Crashed")
        trigger = EventTrigger(
            match={"prefect.resource.id": "prefect.flow-run.*"},
            after={"prefect.flow-run.heartbeat"},
            expect={f"prefect.flow-run.{end}" for end in ends},
            for_each={"prefect.resource.id"},
            posture=Posture.Proactive,
            threshold=1,
            within=timedelta(seconds=lost_after),
        )
        message = f"no heartbeat for {lost_after} s: its process or its host was lost"
        client.create_automation(
            AutomationCore(
                name=CRASH_AUTOMATION,
                description="Mark a flow run Crashed when its heartbeats stop.",
                trigger=trigger,
                actions=[ChangeFlowRunState(state=StateType.CRASHED, message=message)],
            )
        )
    return True


def _load_flow(reference: str) -> Any:
    module, _, attribute = reference.partition(":")
    return getattr(importlib.import_module(module), attribute)


def apply_deployments(
    settings: Settings, *, url: str | None = None, lost_after: int = LOST_AFTER_SECONDS
) -> list[Applied]:
    """Create or update every deployment on the server at ``url`` (default: the configured one), and
    the automation that marks a flow run silent for ``lost_after`` seconds Crashed.

    A flow that cannot be imported is reported and skipped; the others are still applied.
    """
    from prefect.deployments.runner import EntrypointType
    from prefect.schedules import Cron
    from prefect.settings import PREFECT_API_URL, temporary_settings

    check_schedule(settings)
    results = []
    job_variables = {"env": job_environment(settings)}
    with temporary_settings({PREFECT_API_URL: url or api_url(settings)}):
        ensure_work_pool(settings)
        ensure_crash_detection(lost_after)
        for spec in DEPLOYMENTS:
            result = Applied(spec)
            results.append(result)
            try:
                flow = _load_flow(spec.flow)
            except (ImportError, AttributeError) as exc:
                result.error = f"cannot import {spec.flow}: {exc}"
                continue
            schedules = []
            if spec.scheduled:
                cron, zone = settings.server.nightly_cron, settings.server.timezone
                schedules = [Cron(cron, timezone=zone)]
                result.schedule = {"cron": cron, "timezone": zone}
            deployment = flow.to_deployment(
                name=spec.name,
                description=spec.description,
                schedules=schedules,
                tags=list(spec.tags),
                work_pool_name=settings.server.work_pool,
                job_variables=job_variables,
                entrypoint_type=EntrypointType.MODULE_PATH,
            )
            result.deployment_id = str(deployment.apply(work_pool_name=settings.server.work_pool))
            result.full_name = f"{flow.name}/{spec.name}"
    return results
