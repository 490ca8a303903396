"""Object storage (issue 42): a data dir whose Lance tables live in S3-compatible storage.

The server is real: moto's standalone server (``moto_server``, the dev extra), a separate process
speaking the S3 REST API on loopback, started once per test session and killed after it. It keeps
objects in memory; its recorder appends every request to a file, so a server killed mid-run is
brought back by replaying the recorded writes into a new process: what had been stored before the
kill is there again, as it would be on a durable S3 after an outage.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from media import text_video
from stores import NO_MODELS

from vidscope.core.settings import ModelSettings, Settings, StorageSettings
from vidscope.storage.location import POINTER_FILE, storage_options
from vidscope.storage.store import Store, StoreError

MOTO_SERVER = Path(sys.executable).with_name("moto_server")
BUCKET = "vidscope-test"
#: Any key pair: moto checks none, but Lance's S3 client signs every request and needs one.
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "vidscope-test", "AWS_SECRET_ACCESS_KEY": "vidscope-test-secret"}
#: One retry of a refused request, given up after 2 s: a killed server fails the run quickly.
FAST_FAILURE = {"max_retries": 1, "retry_timeout_s": 2.0}


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class S3Server:
    """moto's S3 server on a loopback port, recording every request to ``recording``."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.port = _free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.recording = folder / "requests.jsonl"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        env = {**os.environ, "MOTO_ENABLE_RECORDING": "1", "MOTO_RECORDER_FILEPATH": str(self.recording)}
        log = (self.folder / "moto.log").open("ab")
        self.process = subprocess.Popen(
            [str(MOTO_SERVER), "-H", "127.0.0.1", "-p", str(self.port)], stdout=log, stderr=log, env=env
        )
        deadline = time.monotonic() + 30
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), 0.2):
                return
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    f"moto_server did not start: {(self.folder / 'moto.log').read_text()[-500:]}"
                )
            time.sleep(0.1)

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(10)
        self.process = None

    def restart(self) -> None:
        """A new server process holding what the killed one had stored: the recorded writes
        replayed in order (reads are left out: they change nothing)."""
        self.kill()
        writes = [
            line
            for line in self.recording.read_text().splitlines()
            if json.loads(line)["method"] in ("PUT", "POST", "DELETE")
        ]
        self.recording.write_text("".join(f"{line}\n" for line in writes))
        self.start()
        self._call("POST", "/moto-api/recorder/replay-recording")

    def _call(self, method: str, path: str) -> bytes:
        request = urllib.request.Request(self.endpoint + path, method=method)
        with urllib.request.urlopen(request, timeout=120) as response:
            body: bytes = response.read()
            return body

    def create_bucket(self) -> None:
        self._call("PUT", f"/{BUCKET}")

    def put(self, key: str, body: bytes) -> None:
        request = urllib.request.Request(f"{self.endpoint}/{BUCKET}/{key}", data=body, method="PUT")
        urllib.request.urlopen(request, timeout=30).close()

    def keys(self, prefix: str) -> list[str]:
        """Object keys under ``prefix`` (the first 1,000: enough for these tests)."""
        body = self._call("GET", f"/{BUCKET}?list-type=2&prefix={prefix}").decode()
        return [part.split("</Key>")[0] for part in body.split("<Key>")[1:]]


@pytest.fixture(scope="session")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    if not MOTO_SERVER.exists():
        pytest.skip("moto_server not installed (pip install 'moto[server]', in the dev extra)")
    server = S3Server(tmp_path_factory.mktemp("s3"))
    server.start()
    try:
        server.create_bucket()
        yield server
    finally:
        server.kill()


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in CREDENTIALS.items():
        monkeypatch.setenv(name, value)


def _storage(s3: S3Server, prefix: str, **extra: Any) -> StorageSettings:
    return StorageSettings(
        uri=f"s3://{BUCKET}/{prefix}", endpoint=s3.endpoint, allow_http=True, region="us-east-1", **extra
    )


def _options(storage: StorageSettings) -> dict[str, str]:
    return storage_options(**storage.model_dump(exclude={"uri"}))


def test_store_tables_live_in_the_bucket_and_the_data_dir_remembers_where(
    s3: S3Server, aws_env: None, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    storage = _storage(s3, "unit")
    store = Store(data, text_dim=4, tables_uri=storage.uri, storage_options=_options(storage))
    rows = [
        {
            "video_id": "v1",
            "clip_index": i,
            "start": float(i),
            "end": i + 1.0,
            "text_embedding": [1.0, i, 0, 0],
        }
        for i in range(3)
    ]
    assert store.upsert(store.clips, rows) == 3
    store.replace_video_rows(store.clips, "v1", rows[:2])  # one atomic commit: the third row goes
    assert store.count(store.clips) == 2
    nearest = store.nearest(store.clips, [1.0, 1.0, 0, 0], k=1, columns=["clip_index"])
    assert nearest[0]["clip_index"] == 1
    # Nothing under the data dir but the note saying where the tables are; they are in the bucket.
    assert sorted(p.name for p in data.iterdir()) == [POINTER_FILE]
    assert json.loads((data / POINTER_FILE).read_text())["uri"] == f"s3://{BUCKET}/unit"
    assert any(k.startswith("unit/clips.lance/_versions/") for k in s3.keys("unit/"))
    assert "secret" not in (data / POINTER_FILE).read_text()  # credentials stay in the environment

    # A process that knows only the data dir (the usage log, another host) finds the same tables,
    # and DuckDB's SQL reads them too.
    again = Store(data, text_dim=4)
    assert again.location.uri == f"s3://{BUCKET}/unit" and again.count(again.clips) == 2
    from vidscope.storage.sql import query

    assert query(again, "SELECT count(*) FROM clips")[1] == [(2,)]

    # The data dir refuses a second home, and a data dir with local tables refuses object storage.
    with pytest.raises(
        StoreError, match="keeps its tables in s3://vidscope-test/unit, not s3://vidscope-test/other"
    ):
        Store(data, tables_uri=f"s3://{BUCKET}/other")
    local = tmp_path / "local"
    local_store = Store(local, text_dim=4)
    local_store.upsert(local_store.clips, rows[:1])
    with pytest.raises(StoreError, match="already holds its tables in"):
        Store(local, tables_uri=storage.uri, storage_options=_options(storage))
    with pytest.raises(ValueError, match="s3://bucket/prefix"):
        StorageSettings(uri="/mnt/shared")


def test_an_unreachable_server_is_one_line_and_nothing_half_written(
    s3: S3Server, aws_env: None, tmp_path: Path
) -> None:
    storage = _storage(s3, "down", max_retries=0, retry_timeout_s=1.0)
    store = Store(tmp_path / "data", text_dim=4, tables_uri=storage.uri, storage_options=_options(storage))
    row = {"video_id": "v1", "clip_index": 0, "start": 0.0, "end": 1.0}
    store.upsert(store.clips, [row])
    # The same tables through an endpoint nobody listens on: what a stopped server looks like.
    gone = storage.model_copy(update={"endpoint": f"http://127.0.0.1:{_free_port()}"})
    cut_off = Store(tmp_path / "data", text_dim=4, tables_uri=gone.uri, storage_options=_options(gone))
    started = time.monotonic()
    with pytest.raises(StoreError) as failed:
        cut_off.upsert(cut_off.clips, [{**row, "clip_index": 1}])
    message = str(failed.value)
    assert "\n" not in message and message.startswith(f"object storage {gone.endpoint} did not answer")
    assert "nothing half-written" in message and "LanceError" not in message
    assert time.monotonic() - started < 30  # the retries of FAST_FAILURE, not Lance's 180 s default
    with pytest.raises(StoreError, match="did not answer"):
        cut_off.count(cut_off.clips)
    # The server that kept answering still has exactly what was committed.
    back = Store(tmp_path / "data", text_dim=4, tables_uri=storage.uri, storage_options=_options(storage))
    assert back.rows(back.clips, columns=["clip_index"]).column("clip_index").to_pylist() == [0]


def test_processes_opening_a_data_dir_at_once_all_bind_it(tmp_path: Path) -> None:
    """Workers started together on a data dir each write tables.json (here each with other retry
    settings, so each rewrites it); none fails on another's file, and the note stays whole."""
    from concurrent.futures import ThreadPoolExecutor

    def open_one(i: int) -> str:
        options = storage_options(endpoint="http://127.0.0.1:9", max_retries=i)  # never contacted
        return Store(
            tmp_path / "data", tables_uri=f"s3://{BUCKET}/shared", storage_options=options
        ).location.uri

    with ThreadPoolExecutor(8) as pool:
        assert set(pool.map(open_one, range(400))) == {f"s3://{BUCKET}/shared"}
    assert sorted(p.name for p in (tmp_path / "data").iterdir()) == [POINTER_FILE]
    assert Store(tmp_path / "data").location.uri == f"s3://{BUCKET}/shared"


def test_two_writers_at_once_keep_every_commit(s3: S3Server, aws_env: None, tmp_path: Path) -> None:
    """Two stores (as on two hosts, each with its own data dir) write one table in the bucket at the
    same time: Lance's conditional PUT turns a lost race into a conflict the store retries, so no
    commit overwrites another."""
    import threading

    storage = _storage(s3, "two-writers")
    stores = [
        Store(tmp_path / f"host{i}", text_dim=4, tables_uri=storage.uri, storage_options=_options(storage))
        for i in range(2)
    ]
    stores[0].table(stores[0].clips)  # created once, before the race

    def write(store: Store, video: str) -> None:
        for i in range(6):
            store.upsert(store.clips, [{"video_id": video, "clip_index": i, "start": i, "end": i + 1.0}])

    threads = [threading.Thread(target=write, args=(store, f"v{i}")) for i, store in enumerate(stores)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert stores[1].count(stores[1].clips, "v0") == 6 and stores[0].count(stores[0].clips, "v1") == 6


@pytest.mark.parametrize("where", ["local", "s3"])
def test_a_table_whose_creation_was_cut_short_is_created_on_next_use(
    s3: S3Server, aws_env: None, tmp_path: Path, where: str
) -> None:
    """A writer lost before a table's first commit (killed, or its storage gone) leaves the table's
    files without a version: listed, yet "not found" when opened. The next write creates it."""
    orphan = "clips.lance/_transactions/0-cut-short.txn"
    if where == "s3":
        storage = _storage(s3, "cut-short")
        s3.put(f"cut-short/{orphan}", b"a transaction whose commit never happened")
        store = Store(
            tmp_path / "data", text_dim=4, tables_uri=storage.uri, storage_options=_options(storage)
        )
    else:
        (tmp_path / "data" / "lance" / orphan).parent.mkdir(parents=True)
        (tmp_path / "data" / "lance" / orphan).write_text("a transaction whose commit never happened")
        store = Store(tmp_path / "data", text_dim=4)
    assert store.count(store.clips) == 0
    store.upsert(store.clips, [{"video_id": "v1", "clip_index": 0, "start": 0.0, "end": 1.0}])
    assert store.count(store.clips) == 1


def test_a_missing_bucket_or_missing_credentials_is_one_line(
    s3: S3Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    row = {"video_id": "v1", "clip_index": 0, "start": 0.0, "end": 1.0}
    for name, value in CREDENTIALS.items():
        monkeypatch.setenv(name, value)
    nowhere = StorageSettings(uri="s3://no-such-bucket/x", endpoint=s3.endpoint, allow_http=True)
    store = Store(tmp_path / "a", text_dim=4, tables_uri=nowhere.uri, storage_options=_options(nowhere))
    with pytest.raises(StoreError) as failed:
        store.upsert(store.clips, [row])
    assert str(failed.value) == (
        f"bucket 'no-such-bucket' does not exist on {s3.endpoint}; create it first (s3://no-such-bucket/x)"
    )
    # No key in the environment and no instance to ask (the metadata service is what an EC2 host
    # would answer; off here, as it is on any machine without one, after a timeout).
    for name in CREDENTIALS:
        monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    storage = _storage(s3, "no-credentials", max_retries=0, retry_timeout_s=1.0)
    store = Store(tmp_path / "b", text_dim=4, tables_uri=storage.uri, storage_options=_options(storage))
    with pytest.raises(StoreError, match="^no credentials for s3://vidscope-test/no-credentials: set AWS_"):
        store.upsert(store.clips, [row])


def _ingest_settings(data: Path, storage: StorageSettings) -> Settings:
    # Every model off but the text reader: the video's words are found by OCR, as a user would.
    models = {**NO_MODELS}
    models.pop("text_reader")
    return Settings(data_dir=data, storage=storage, models=ModelSettings(**models))


def _counts(store: Store, video_id: str) -> dict[str, int]:
    return {spec.name: store.count(spec, video_id) for spec in store.specs}


@pytest.fixture(scope="module")
def menu_video(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("videos")
    return text_video(
        folder / "menu.mp4", duration=4.0, size=(320, 180), texts=[(0.0, 4.0, "TOMATO BASIL SOUP")]
    )


@pytest.fixture(scope="module")
def ingested(s3: S3Server, menu_video: Path, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The menu video ingested once, without a fault, into the bucket: (library, report)."""
    import vidscope

    settings = _ingest_settings(tmp_path_factory.mktemp("clean") / "data", _storage(s3, "library"))
    library = vidscope.Library(settings=settings)
    with pytest.MonkeyPatch.context() as patch:
        for name, value in CREDENTIALS.items():
            patch.setenv(name, value)
        (report,) = library.ingest([menu_video])
    return library, report


@pytest.mark.slow  # one real ingest (OCR, Prefect): ~30-60 s on a busy 2-core machine
def test_ingest_search_and_an_up_to_date_rerun_on_object_storage(
    s3: S3Server, aws_env: None, tmp_path: Path, menu_video: Path, ingested: Any
) -> None:
    import vidscope
    from vidscope.flows.ingest_plan import UP_TO_DATE, plan_ingest
    from vidscope.models.open_store import open_store

    library, report = ingested
    settings = library.settings
    assert report.status == "ok", report
    found = library.search("tomato basil", moments=True)
    assert found.moments and "TOMATO BASIL" in found.moments[0].text
    answer = library.ask("menu", "What is the soup?", options=["Onion", "Tomato basil", "Pea"])
    assert answer.choice == "B", answer
    assert not (settings.data_dir / "lance").exists()
    keys = s3.keys("library/")
    for table in ("videos", "clips", "ledger"):
        assert any(k.startswith(f"library/{table}.lance/") for k in keys), table
    # The CLI's plan for a second ingest decides from the ledger in the bucket: nothing to do.
    plan = plan_ingest([str(menu_video)], settings, open_store(settings))
    assert not plan.pending and [s.status for s in plan.settled] == [UP_TO_DATE]
    # A bundle moves the video from the bucket to a data dir on local disk, answers unchanged.
    library.export(["menu"], tmp_path / "bundle")
    local = vidscope.Library(settings=_ingest_settings(tmp_path / "local", StorageSettings()))
    assert local.import_(tmp_path / "bundle").imported == [report.video_id]
    assert local.ask("menu", "What is the soup?").answer == library.ask("menu", "What is the soup?").answer
    assert (tmp_path / "local" / "lance" / "clips.lance").is_dir()


@pytest.mark.slow  # 2-3 real ingests (two through the CLI in a child): ~2-3 min on 2 busy cores
def test_a_server_killed_mid_ingest_loses_nothing_and_the_rerun_completes(
    s3: S3Server, aws_env: None, tmp_path: Path, menu_video: Path, ingested: Any
) -> None:
    data = tmp_path / "data"
    storage = _storage(s3, "killed", **FAST_FAILURE)
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env.update(CREDENTIALS)
    env.update({f"VIDSCOPE_MODELS__{role.upper()}": "" for role in NO_MODELS if role != "text_reader"})
    env.update({f"VIDSCOPE_STORAGE__{k.upper()}": str(v) for k, v in storage.model_dump().items()})
    env["VIDSCOPE_CONFIG"] = str(tmp_path / "none.toml")
    env["COLUMNS"] = "1000"  # a failure's line unwrapped
    command = [sys.executable, "-m", "vidscope.cli", "--data-dir", str(data), "ingest", str(menu_video)]

    seen = s3.recording.stat().st_size
    run = subprocess.Popen(command, env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        # Kill the server once the video is registered and its clips are being written.
        deadline = time.monotonic() + 180
        while run.poll() is None and time.monotonic() < deadline:
            with s3.recording.open() as recording:
                recording.seek(seen)
                if f"/{BUCKET}/killed/clips.lance/" in recording.read():
                    break
            time.sleep(0.05)
        assert run.poll() is None, (
            f"the ingest ended before the server could be killed: {run.communicate()[0]!r}"
        )
        s3.kill()
        output = run.communicate(timeout=300)[0].decode()
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
        if s3.process is None:
            s3.restart()
    assert run.returncode == 1, output
    assert "Traceback" not in output
    flat = " ".join(output.split())  # as printed, before the terminal wraps it
    assert f"ingestion failed: StoreError: object storage {s3.endpoint} did not answer" in flat, output
    assert "failed menu.mp4 · segment: StoreError: object storage" in flat, output

    # What was committed before the kill is there after the restart, readable in every table.
    store = Store(data)
    (video,) = store.rows(store.videos).to_pylist()
    assert video["file_name"] == "menu.mp4"
    for spec in store.all_specs:
        store.rows(spec)  # every table at its latest committed version opens and reads
    before = _counts(store, video["video_id"])

    again = subprocess.run(command, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stdout + again.stderr
    store = Store(data)
    after = _counts(store, video["video_id"])
    assert before["videos"] == 1 and before["clips"] <= after["clips"]
    # Every table holds exactly the rows the run without a fault gave the same video.
    assert after == _counts(ingested[0].store, video["video_id"])
    ledger = store.rows(store.ledger, video_id=video["video_id"]).to_pylist()
    stages = [row["stage"] for row in ledger]
    assert len(stages) == len(set(stages))  # each stage once, none twice
    assert all(row["status"] in ("done", "skipped") for row in ledger), ledger
    rerun = subprocess.run(command, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0 and "1 up to date" in rerun.stdout, rerun.stdout
