"""Two ingestions of one video at once (two hosts of a cluster, the nightly run beside a command)
write its rows once: the second waits for the first, then finds every stage current.

Found by tests/test_cluster.py: two ``vidscope ingest`` commands from two hosts both ingested the
same video side by side, its clips were inserted twice, and the next stage failed with "duplicate
natural keys" on both hosts.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from media import text_video
from stores import NO_MODELS

from vidscope.core.settings import Settings
from vidscope.models.open_store import open_store
from vidscope.storage.ingest_lock import ingesting
from vidscope.tasks.probe import content_hash


def _ingest(data: Path, config: Path, video: Path) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"} | {"VIDSCOPE_CONFIG": str(config)}
    return subprocess.Popen(
        [sys.executable, "-m", "vidscope.cli", "--data-dir", str(data), "ingest", str(video)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )


def test_two_ingestions_of_one_video_at_once_store_it_once(tmp_path: Path) -> None:
    video = tmp_path / "sign.mp4"
    text_video(video, duration=4.0, size=(160, 90), fps=5, texts=[(0.0, 4.0, "OPEN")])
    config = tmp_path / "vidscope.toml"
    config.write_text("[models]\n" + "".join(f'{role} = ""\n' for role in NO_MODELS))
    data = tmp_path / "data"
    settings = Settings(data_dir=data, models=NO_MODELS)
    video_id = content_hash(video)

    # While another process holds the video's ingestion, a command waits and writes nothing.
    with ingesting(data, video_id):
        first = _ingest(data, config, video)
        time.sleep(4)
        assert first.poll() is None, first.communicate()[0]
        assert open_store(settings).video_record(video_id) is None
        second = _ingest(data, config, video)  # a third ingestion queued behind both
    outputs = [p.communicate(timeout=240)[0] for p in (first, second)]
    assert [first.returncode, second.returncode] == [0, 0], outputs

    store = open_store(settings)
    clips = store.rows(store.clips, video_id=video_id, columns=["video_id", "start"]).to_pylist()
    assert clips and len(clips) == len({c["start"] for c in clips}), clips  # each clip once
    ledger = store.rows(store.ledger, video_id=video_id, columns=["stage"]).to_pylist()
    stages = Counter(r["stage"] for r in ledger)
    assert stages and set(stages.values()) == {1}, stages
    # One of the two did the work; the other found it done.
    assert sorted("1 new" in out for out in outputs) == [False, True], outputs
