"""A multi-node Ray cluster on this machine: a head and worker nodes, each its own ``ray start`` process.

As on real machines, every node is started by the ``ray`` command (``ray start --head``, then ``ray
start --address HEAD``), not by ``ray.init`` inside the test process. Each node runs with ``--block``
in a session of its own, so stopping the cluster ends exactly the processes started here (the
node's process group, by id) and nobody else's Ray: never ``ray stop``, which stops every Ray
on the machine. Every port is a free one chosen here and every node has a private ``--temp-dir``, so
several clusters (other people's, other tests') can run side by side.

    with LocalRayCluster(workers=2) as cluster:
        ... vtb run --executor ray --ray-address cluster.address ...
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType

CLUSTER_ENV = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "disabled"}
"""What the nodes and every client of the cluster need in their environment: no usage report, and no
token authentication (on by default in recent Ray; a private cluster on 127.0.0.1 does without, and a
client would otherwise need the token file the head writes into the home directory)."""

RAY = str(Path(sys.executable).with_name("ray"))
"""The ``ray`` command of this interpreter's environment (its workers import the same packages)."""


_handed_out: set[int] = set()


def free_port() -> int:
    """A TCP port that is free on 127.0.0.1 now and that no earlier call returned: the kernel may give
    the same free port to two probes in a row, and Ray refuses a node whose components share one."""
    while True:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = int(probe.getsockname()[1])
        if port not in _handed_out:
            _handed_out.add(port)
            return port


def node_ports() -> list[str]:
    """``ray start`` options giving a node's own servers free ports (the defaults are fixed numbers that
    two nodes on one machine, or two clusters, would share)."""
    return [f"--node-manager-port={free_port()}", f"--object-manager-port={free_port()}",
            f"--dashboard-agent-listen-port={free_port()}", f"--dashboard-agent-grpc-port={free_port()}",
            f"--runtime-env-agent-port={free_port()}", f"--metrics-export-port={free_port()}"]


class LocalRayCluster:
    """A head node and ``workers`` worker nodes, ``cpus`` CPUs each, started as separate ``ray start`` processes.

    ``env`` is added to the nodes' environment (what their workers see: ``PYTHONPATH``, API keys).
    ``head_cpus`` (default ``cpus``) may be 0, as KubeRay recommends for a head that runs no tasks.
    """

    def __init__(self, workers: int = 2, cpus: int = 1, head_cpus: int | None = None,
                 env: dict[str, str] | None = None, object_store_mb: int = 200, start_timeout_s: float = 120.0) -> None:
        self.workers, self.cpus = workers, cpus
        self.head_cpus = cpus if head_cpus is None else head_cpus
        self.env = {**os.environ, **CLUSTER_ENV, **(env or {})}
        self.object_store = object_store_mb * 2**20
        self.start_timeout_s = start_timeout_s
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.root = Path(tempfile.mkdtemp(prefix="vtbray-"))  # short: Ray's socket paths live under it
        self.nodes: list[subprocess.Popen[bytes]] = []

    def __enter__(self) -> LocalRayCluster:
        try:
            self._start(["--head", f"--port={self.port}", f"--num-cpus={self.head_cpus}", "--include-dashboard=false",
                         f"--dashboard-port={free_port()}", f"--ray-client-server-port={free_port()}"], "head")
            self.wait_for(1)
            for index in range(self.workers):
                self._start([f"--address={self.address}", f"--num-cpus={self.cpus}"], f"worker{index}")
            self.wait_for(1 + self.workers)
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()

    def _start(self, options: list[str], name: str) -> None:
        temp = self.root / name
        temp.mkdir()
        log = (self.root / f"{name}.log").open("wb")
        command = [RAY, "start", "--block", "--disable-usage-stats", f"--temp-dir={temp}",
                   "--node-ip-address=127.0.0.1", f"--object-store-memory={self.object_store}",
                   "--min-worker-port=0", "--max-worker-port=0",
                   *node_ports(), *options]
        self.nodes.append(subprocess.Popen(command, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                           start_new_session=True))  # its own process group: stopped by id
        log.close()

    def alive_nodes(self) -> list[str]:
        """The ids of the cluster's active nodes, as ``ray status`` lists them ("1 node_<id>")."""
        done = subprocess.run([RAY, "status", f"--address={self.address}"], env=self.env, capture_output=True,
                              text=True, timeout=60)
        if done.returncode != 0 or "Active:" not in done.stdout:
            return []
        active = done.stdout.split("Active:", 1)[1].split("Pending:", 1)[0]
        return [word.removeprefix("node_") for line in active.splitlines() for word in line.split()
                if word.startswith("node_")]

    def wait_for(self, count: int) -> None:
        """Return once ``count`` nodes are alive; RuntimeError (with the nodes' logs) if a node exits first
        or time runs out."""
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            dead = [p for p in self.nodes if p.poll() is not None]
            if dead:
                raise RuntimeError(f"a Ray node exited with {dead[0].returncode}: {self.logs()}")
            if len(self.alive_nodes()) >= count:
                return
            time.sleep(0.5)
        raise RuntimeError(f"{count} Ray nodes were not alive after {self.start_timeout_s:g} s: {self.logs()}")

    def logs(self) -> str:
        """The tail of every node's ``ray start`` output."""
        return " | ".join(f"{p.name}: {p.read_text(errors='replace')[-800:]}" for p in sorted(self.root.glob("*.log")))

    def pids(self) -> list[int]:
        """The ``ray start`` process of every node (their trees hold the node's raylet and workers)."""
        return [p.pid for p in self.nodes]

    def stop(self, grace_s: float = 5.0) -> None:
        """End every node: SIGTERM to each node's process group (the ``ray start --block`` process ends its
        node's processes, slowly), then SIGKILL to what is left of the group after ``grace_s``; the nodes'
        workers are in their node's group too. The temporary folder is removed."""
        for node in self.nodes:
            _signal_group(node.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        for node in self.nodes:
            try:
                node.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        while time.monotonic() < deadline and any(_group_alive(n.pid) for n in self.nodes):
            time.sleep(0.2)
        for node in self.nodes:
            _signal_group(node.pid, signal.SIGKILL)
            if node.poll() is None:
                node.wait(timeout=10)
        deadline = time.monotonic() + 10  # the folder goes once nothing of the nodes can write into it
        while time.monotonic() < deadline and any(_group_alive(n.pid) for n in self.nodes):
            time.sleep(0.1)
        self.nodes = []
        subprocess.run(["rm", "-rf", str(self.root)], check=False)


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:  # the group has already ended
        pass


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True
