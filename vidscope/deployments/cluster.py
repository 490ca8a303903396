"""A cluster of several hosts on one machine: the Prefect server (on PostgreSQL) with a Dask scheduler,
and N worker hosts that reach it only over the network (``scripts/cluster.sh``).

Each worker host is a Linux network namespace with an address of its own on a private bridge (and a
UTS namespace of its own, so it has its own host name), running what a real worker host runs: a
Prefect process worker of the server's pool (it takes flow runs, such as the nightly deployment's)
and a Dask worker of the one cluster whose scheduler runs next to the server (ingestion fans out
there, one video per task). The hosts share the data dir and the watch folders as a path, as they
would share a mounted file system. Everything is started with ``up``, extra hosts with
``add-host``, a host lost at once (every process of it killed) with ``kill-host``, the server or
PostgreSQL restarted with ``restart-server`` / ``restart-postgres``, a command run on a host with
``exec`` (``exec h1 -- vidscope ingest …``) and all of it torn down with ``down``. What ``up``
started is recorded in ``<data_dir>/cluster/cluster.json``; the later commands read it.

Needs root (``ip netns``, ``ip link``, ``unshare``); this is a simulation for tests, benchmarks and
a first look, not a deployment tool: on real hosts the same processes are started by hand, as
docs/operations.md ("From one machine to a cluster") says.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import httpx

from vidscope.core.settings import OFFLINE_ENVIRONMENT, ServerSettings, Settings
from vidscope.core.tls import httpx_tls
from vidscope.deployments.deploy import HEARTBEAT_SECONDS

#: The state file, under the data dir.
STATE = Path("cluster") / "cluster.json"


class ClusterError(RuntimeError):
    """A step of bringing the cluster up or down failed (the message says which)."""


@dataclass
class Cluster:
    """What ``up`` started: names, addresses, ports and paths (saved as JSON in the data dir)."""

    data_dir: str
    name: str = "vsc"
    subnet: str = "10.251.0"
    port: int = 4200
    dask_port: int = 8786
    pool: str = "vidscope-process"
    config: str | None = None
    watch: list[str] = field(default_factory=list)
    #: Dask worker processes per host (each single-threaded: one video at a time).
    dask_workers: int = 1
    hosts: list[int] = field(default_factory=list)

    # ------------------------------------------------------------------ names and addresses

    @property
    def server_address(self) -> str:
        """The server host's address on the bridge (the Prefect API and the Dask scheduler)."""
        return f"{self.subnet}.1"

    def host_address(self, host: int) -> str:
        return f"{self.subnet}.{10 + host}"

    def netns(self, host: int) -> str:
        return f"{self.name}-h{host}"

    def hostname(self, host: int) -> str:
        return f"{self.name}-h{host}"

    @property
    def bridge(self) -> str:
        return f"{self.name}br"

    def veth(self, host: int) -> str:
        return f"{self.name}h{host}"

    @property
    def api_url(self) -> str:
        return f"http://{self.server_address}:{self.port}/api"

    @property
    def dask_address(self) -> str:
        return f"tcp://{self.server_address}:{self.dask_port}"

    @property
    def root(self) -> Path:
        return Path(self.data_dir) / "cluster"

    def host_dir(self, host: int) -> Path:
        return self.root / f"h{host}"

    def settings(self) -> Settings:
        """The server host's settings: the server on the bridge address, PostgreSQL it owns."""
        server = ServerSettings(
            host=self.server_address,
            port=self.port,
            work_pool=self.pool,
            database="postgres-local",
            watch_folders=[Path(w) for w in self.watch],
        )
        return Settings(data_dir=Path(self.data_dir), server=server)

    def environment(self, host: int | None = None) -> dict[str, str]:
        """What every vidscope and Prefect process of a host sees: the server's API, the shared data
        dir and config, the Dask fan-out, the watch folders, telemetry off."""
        env = dict(os.environ)
        env.update(OFFLINE_ENVIRONMENT)
        env.update(
            {
                "PREFECT_API_URL": self.api_url,
                "PREFECT_HOME": str((self.host_dir(host) if host else self.root / "server") / "prefect-home"),
                "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
                "DO_NOT_TRACK": "1",
                # Every flow run here beats every 30 s, so a lost host's run is Crashed after 90 s.
                "PREFECT_FLOWS_HEARTBEAT_FREQUENCY": str(HEARTBEAT_SECONDS),
                "VIDSCOPE_DATA_DIR": self.data_dir,
                "VIDSCOPE_INGEST__TASK_RUNNER": "dask",
                "VIDSCOPE_INGEST__DASK_ADDRESS": self.dask_address,
                "VIDSCOPE_SERVER__WATCH_FOLDERS": json.dumps(self.watch),
                "VIDSCOPE_SERVER__WORK_POOL": self.pool,
            }
        )
        if self.config:
            env["VIDSCOPE_CONFIG"] = self.config
        return env

    def save(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        (Path(self.data_dir) / STATE).write_text(json.dumps(asdict(self), indent=1) + "\n")

    @classmethod
    def load(cls, data_dir: Path) -> Cluster:
        path = data_dir / STATE
        try:
            return cls(**json.loads(path.read_text()))
        except (OSError, ValueError, TypeError) as exc:
            raise ClusterError(f"no cluster recorded at {path} (run `cluster up` first): {exc}") from exc


# ---------------------------------------------------------------------------- commands


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30, check=False)
    if check and done.returncode != 0:
        raise ClusterError(f"ip {' '.join(args)}: {done.stderr.strip() or done.returncode}")
    return done


def _spawn(
    argv: list[str], env: dict[str, str], log: Path, pid_file: Path, cluster: Cluster, host: int | None = None
) -> int:
    """Start ``argv`` detached (its own process group), on ``host`` (its namespaces) or the server host."""
    if host is not None:
        # ip netns exec -> unshare (own host name) -> sh sets it -> exec the program: one pid throughout.
        argv = [
            "ip",
            "netns",
            "exec",
            cluster.netns(host),
            "unshare",
            "--uts",
            "--",
            "sh",
            "-c",
            'hostname "$0" && exec "$@"',
            cluster.hostname(host),
            *argv,
        ]
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        child = subprocess.Popen(
            argv,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=log.parent,
            start_new_session=True,
        )
    pid_file.write_text(f"{child.pid}\n")
    return child.pid


def _wait_for(check: object, what: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(httpx.HTTPError, OSError):
            if check():  # type: ignore[operator]
                return
        time.sleep(0.5)
    raise ClusterError(f"{what} within {timeout:.0f} s")


def _workers_online(cluster: Cluster) -> set[str]:
    """The names of the pool's workers the server sees as online."""
    response = httpx.post(
        f"{cluster.api_url}/work_pools/{cluster.pool}/workers/filter",
        json={"workers": {"status": {"any_": ["ONLINE"]}}},
        timeout=5,
        verify=httpx_tls(cluster.api_url),
    )
    return {w["name"] for w in response.json()} if response.status_code == 200 else set()


def _dask_workers(cluster: Cluster) -> int:
    """Dask workers connected to the scheduler (asked from a short-lived client)."""
    from distributed import Client

    with Client(cluster.dask_address, timeout=10) as client:
        return len(client.scheduler_info(n_workers=-1)["workers"])


def _network_up(cluster: Cluster) -> None:
    if _ip("link", "show", cluster.bridge, check=False).returncode != 0:
        _ip("link", "add", cluster.bridge, "type", "bridge")
        _ip("addr", "add", f"{cluster.server_address}/24", "dev", cluster.bridge)
    _ip("link", "set", cluster.bridge, "up")


def _host_network(cluster: Cluster, host: int) -> None:
    ns = cluster.netns(host)
    if ns not in _ip("netns", "list").stdout.split():
        _ip("netns", "add", ns)
    if _ip("link", "show", cluster.veth(host), check=False).returncode != 0:
        _ip("link", "add", cluster.veth(host), "type", "veth", "peer", "name", "eth0", "netns", ns)
        _ip("link", "set", cluster.veth(host), "master", cluster.bridge, "up")
        _ip("-n", ns, "addr", "add", f"{cluster.host_address(host)}/24", "dev", "eth0")
    _ip("-n", ns, "link", "set", "eth0", "up")
    _ip("-n", ns, "link", "set", "lo", "up")


def start_server(cluster: Cluster, timeout: float = 180.0) -> None:
    """PostgreSQL, the Prefect server (no worker on the server host) and the Dask scheduler."""
    from vidscope.deployments import server

    os.environ.update({k: v for k, v in cluster.environment().items() if k.startswith("VIDSCOPE_")})
    try:
        server.start(cluster.settings(), timeout=timeout, api=False, worker=False)
    except server.ServerError as exc:
        raise ClusterError(f"the server did not start: {exc}") from exc
    (cluster.root / "server" / "prefect-home").mkdir(parents=True, exist_ok=True)
    pid_file = cluster.root / "scheduler.pid"
    if not _alive(_read_pid(pid_file)):
        argv = [
            sys.executable,
            "-m",
            "distributed.cli.dask_scheduler",
            "--host",
            cluster.server_address,
            "--port",
            str(cluster.dask_port),
            "--no-dashboard",
            "--no-show",
        ]
        _spawn(argv, cluster.environment(), cluster.root / "scheduler.log", pid_file, cluster)
    _wait_for(lambda: _dask_workers(cluster) >= 0, "the Dask scheduler did not answer", timeout)


def restart_server(cluster: Cluster) -> None:
    """Stop the Prefect server process (its database stays up) and start it again on the same address."""
    from vidscope.deployments import server

    server.stop(cluster.settings(), processes=("server",), database=False)
    start_server(cluster)


def restart_postgres(cluster: Cluster) -> None:
    """Stop PostgreSQL under the running server (fast shutdown) and start it again on its port."""
    from vidscope.deployments import server

    database = server.local_postgres(cluster.settings())
    before = database.port()
    database.stop()
    database.start()
    if database.port() != before:
        raise ClusterError(f"PostgreSQL came back on port {database.port()}, the server uses {before}")


def apply_deployments(cluster: Cluster) -> None:
    from vidscope.deployments.deploy import apply_deployments as apply

    os.environ.update({k: v for k, v in cluster.environment().items() if k.startswith("VIDSCOPE_")})
    applied = apply(cluster.settings(), url=cluster.api_url, lost_after=3 * HEARTBEAT_SECONDS)
    failed = [r.error for r in applied if r.error]
    if failed:
        raise ClusterError("; ".join(str(f) for f in failed))


def start_host(cluster: Cluster, host: int, timeout: float = 120.0) -> None:
    """The host's namespace and address, its Prefect process worker and its Dask worker(s)."""
    _host_network(cluster, host)
    env, folder = cluster.environment(host), cluster.host_dir(host)
    (folder / "prefect-home").mkdir(parents=True, exist_ok=True)
    name = cluster.hostname(host)
    prefect = [
        sys.executable,
        "-m",
        "prefect",
        "worker",
        "start",
        "--pool",
        cluster.pool,
        "--type",
        "process",
        "--name",
        f"vidscope-{name}",
    ]
    dask = [
        sys.executable,
        "-m",
        "distributed.cli.dask_worker",
        cluster.dask_address,
        "--name",
        name,
        "--nworkers",
        str(cluster.dask_workers),
        "--nthreads",
        "1",
        "--no-dashboard",
        "--host",
        cluster.host_address(host),
        "--local-directory",
        str(folder / "dask"),
    ]
    for process, argv in (("worker", prefect), ("dask", dask)):
        if not _alive(_read_pid(folder / f"{process}.pid")):
            _spawn(argv, env, folder / f"{process}.log", folder / f"{process}.pid", cluster, host)
    if host not in cluster.hosts:
        cluster.hosts.append(host)
        cluster.save()
    _wait_for(
        lambda: f"vidscope-{name}" in _workers_online(cluster),
        f"the Prefect worker of {name} was not online",
        timeout,
    )


def host_pids(cluster: Cluster, host: int) -> list[int]:
    """Every process running in the host's network namespace (none when it has none)."""
    done = _ip("netns", "pids", cluster.netns(host), check=False)
    return [int(p) for p in done.stdout.split()] if done.returncode == 0 else []


def kill_host(cluster: Cluster, host: int, timeout: float = 15.0) -> int:
    """The host is lost at once: SIGKILL to every process in its namespace. Returns how many."""
    killed = 0
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pids = host_pids(cluster, host)
        if not pids:
            return killed
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
                killed += 1
        _reap_all()
        time.sleep(0.2)
    raise ClusterError(f"processes {host_pids(cluster, host)} of {cluster.hostname(host)} outlived SIGKILL")


def stop_host(cluster: Cluster, host: int, grace: float = 10.0) -> None:
    """TERM the host's processes (a worker's flow runs are ended with it), KILL what is left,
    then remove its namespace and link."""
    for pid in host_pids(cluster, host):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while host_pids(cluster, host) and time.monotonic() < deadline:
        _reap_all()
        time.sleep(0.2)
    kill_host(cluster, host)
    _ip("link", "del", cluster.veth(host), check=False)
    _ip("netns", "del", cluster.netns(host), check=False)


def up(cluster: Cluster, hosts: int) -> Cluster:
    """Network, PostgreSQL, the Prefect server, the Dask scheduler, the deployments and ``hosts`` hosts."""
    if os.geteuid() != 0:
        raise ClusterError("the simulated cluster needs root (network namespaces)")
    Path(cluster.data_dir).mkdir(parents=True, exist_ok=True)
    cluster.save()
    _network_up(cluster)
    start_server(cluster)
    apply_deployments(cluster)
    for host in range(1, hosts + 1):
        start_host(cluster, host)
    return cluster


def down(cluster: Cluster) -> list[str]:
    """Every host, the Dask scheduler, the server and PostgreSQL, the bridge. Returns what was stopped."""
    from vidscope.deployments import server

    stopped = []
    for host in list(cluster.hosts):
        stop_host(cluster, host)
        stopped.append(cluster.hostname(host))
    pid = _read_pid(cluster.root / "scheduler.pid")
    if _alive(pid) and pid is not None:
        _end_group(pid)
        stopped.append("dask-scheduler")
    (cluster.root / "scheduler.pid").unlink(missing_ok=True)
    stopped += server.stop(cluster.settings())
    _ip("link", "del", cluster.bridge, check=False)
    return stopped


# ---------------------------------------------------------------------------- processes


def _read_pid(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def _alive(pid: int | None) -> bool:
    if pid is None:
        return False
    _reap_all()
    try:
        state = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def _reap_all() -> None:
    """Collect exited children of this process (so a killed host leaves no zombie of ours)."""
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass


def _end_group(pid: int, grace: float = 10.0) -> None:
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, sig)
        deadline = time.monotonic() + wait
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        if not _alive(pid):
            return


# ---------------------------------------------------------------------------- command line


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="cluster", description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", type=Path, required=True, help="the shared data dir")
    commands = parser.add_subparsers(dest="command", required=True)
    start = commands.add_parser("up", help="network, PostgreSQL, Prefect server, Dask scheduler, hosts")
    start.add_argument("--hosts", type=int, default=2)
    start.add_argument("--name", default="vsc", help="prefix of the namespaces and links (<= 5 characters)")
    start.add_argument("--subnet", default="10.251.0", help="the bridge's /24, e.g. 10.251.0")
    start.add_argument("--port", type=int, default=4200, help="the Prefect server's port")
    start.add_argument("--dask-port", type=int, default=8786)
    start.add_argument("--dask-workers", type=int, default=1, help="Dask worker processes per host")
    start.add_argument("--config", type=Path, help="vidscope.toml every host reads")
    start.add_argument("--watch", type=Path, action="append", default=[], help="a watch folder (repeatable)")
    add = commands.add_parser("add-host", help="start one more worker host")
    add.add_argument("host", type=int)
    kill = commands.add_parser("kill-host", help="SIGKILL every process of a host")
    kill.add_argument("host", type=int)
    commands.add_parser("restart-server", help="stop and start the Prefect server process")
    commands.add_parser("restart-postgres", help="stop and start PostgreSQL under the server")
    run = commands.add_parser("exec", help="run a command on a host: exec 1 -- vidscope ingest DIR")
    run.add_argument("host", type=int)
    run.add_argument("argv", nargs=argparse.REMAINDER)
    commands.add_parser("status", help="the hosts, their processes and the online workers")
    commands.add_parser("down", help="stop everything and remove the namespaces and the bridge")
    args = parser.parse_args(argv)
    data_dir = args.data_dir.resolve()
    try:
        if args.command == "up":
            if len(args.name) > 5:
                raise ClusterError("--name must be at most 5 characters (it prefixes link names)")
            cluster = Cluster(
                data_dir=str(data_dir),
                name=args.name,
                subnet=args.subnet,
                port=args.port,
                dask_port=args.dask_port,
                dask_workers=args.dask_workers,
                config=str(args.config.resolve()) if args.config else None,
                watch=[str(w.resolve()) for w in args.watch],
            )
            up(cluster, args.hosts)
            print(
                f"up: Prefect {cluster.api_url}, Dask {cluster.dask_address}, hosts "
                + ", ".join(f"{cluster.hostname(h)} {cluster.host_address(h)}" for h in cluster.hosts)
            )
            return 0
        cluster = Cluster.load(data_dir)
        if args.command == "add-host":
            start_host(cluster, args.host)
            print(f"{cluster.hostname(args.host)} {cluster.host_address(args.host)}: online")
        elif args.command == "kill-host":
            print(f"{cluster.hostname(args.host)}: killed {kill_host(cluster, args.host)} process(es)")
        elif args.command == "restart-server":
            restart_server(cluster)
            print(f"the Prefect server answers again at {cluster.api_url}")
        elif args.command == "restart-postgres":
            restart_postgres(cluster)
            print("PostgreSQL restarted on its port")
        elif args.command == "exec":
            argv = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
            if not argv:
                raise ClusterError("exec needs a command")
            ns = ["ip", "netns", "exec", cluster.netns(args.host)]
            return subprocess.run([*ns, *argv], env=cluster.environment(args.host), check=False).returncode
        elif args.command == "status":
            online = _workers_online(cluster)
            for host in cluster.hosts:
                name = cluster.hostname(host)
                state = "online" if f"vidscope-{name}" in online else "offline"
                processes = len(host_pids(cluster, host))
                print(f"{name} {cluster.host_address(host)}: {processes} process(es), {state}")
        elif args.command == "down":
            print("stopped: " + ", ".join(down(cluster)))
    except (ClusterError, httpx.HTTPError, OSError) as exc:
        print(f"cluster {args.command}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
