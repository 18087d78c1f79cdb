"""The Ray executor on a real multi-node cluster: a head and a worker node, each its own ``ray start``.

One short test (a cluster takes ~20 s to start on 2 cores): ``vtb run --executor ray --ray-address``
on four sample tasks whose reference runs code, so that sandboxes start on both nodes; the results
equal a local run's and both nodes ran tasks. The driver is the ``vtb`` command, as on a cluster:
Ray keeps per-process state (its authentication mode) from an earlier ``ray.init`` in the test
process, which a driver connecting to another cluster must not inherit.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from support.cli import checkout_env, vtb
from support.ray_nodes import CLUSTER_ENV, LocalRayCluster
from support.together import together

from vtb_agents.episodes.regions import has_reference_code
from vtb_agents.rundir.store import ResultsStore
from vtb_agents.runner.executors import LocalExecutor
from vtb_agents.runner.run import RunConfig, run_suite
from vtb_agents.tasks import load_tasks

pytestmark = [
    pytest.mark.cluster,
    # `ray start` launches its components through a shell with unquoted paths: a Ray installed under a
    # path with a space cannot start a node at all (upstream limitation, docs/how-to/ray-cluster.md).
    pytest.mark.skipif(any(c.isspace() for c in sys.executable),
                       reason="Ray cannot start a node from a path with a space (its launch commands are unquoted)"),
]

WORKER_LINE = re.compile(r"Ray worker (\d+) \(node ([0-9a-f]+)\): (\d+) task")


@pytest.mark.slow
def test_vtb_run_on_a_two_node_cluster_gives_the_results_of_a_local_run(tmp_path):
    tasks = [t for t in load_tasks("sample") if has_reference_code(t)][:4]

    def on_the_cluster() -> tuple[list[str], subprocess.CompletedProcess[str]]:
        with LocalRayCluster(workers=1, cpus=1, env={"PYTHONPATH": checkout_env()["PYTHONPATH"]}) as cluster:
            nodes = cluster.alive_nodes()
            return nodes, vtb("-v", "run", "--tasks", "sample", "--model", "replay", "--judge", "rule",
                              "--concurrency", "4", "--out", tmp_path / "ray", "--executor", "ray",
                              "--ray-address", cluster.address, *(f"--task-id={t.id}" for t in tasks),
                              env=CLUSTER_ENV, columns=400)  # one log record per line

    (nodes, done), local = together(  # the local run (in this process) while the cluster starts: nothing shared
        on_the_cluster,
        lambda: run_suite(tasks, RunConfig(model="replay"), tmp_path / "local", executor=LocalExecutor(4)))
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads((tmp_path / "ray" / "summary.json").read_text()) == json.loads(
        (tmp_path / "local" / "summary.json").read_text())
    assert local.complete is True and local.tasks == 4
    mine, theirs = (ResultsStore(tmp_path / d).load()[0] for d in ("ray", "local"))
    assert sorted((r.task_id, r.outcome, [t.answer for t in r.episode.turns]) for r in mine) == sorted(
        (r.task_id, r.outcome, [t.answer for t in r.episode.turns]) for r in theirs)
    assert len(nodes) == 2
    ran = {node: int(count) for _, node, count in WORKER_LINE.findall(done.stderr)}
    assert sorted(ran) == sorted(nodes) and sum(ran.values()) == 4, done.stderr[-3000:]  # a worker on each node
    assert sorted(p.name for p in (tmp_path / "ray").glob("checkpoints-*.sqlite")) == [
        "checkpoints-0.sqlite", "checkpoints-1.sqlite"]
