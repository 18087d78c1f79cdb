"""The Ray executor on a real multi-node cluster: a head and a worker node, each its own ``ray start``.

One short test (a cluster takes ~20 s to start on 2 cores): four sample tasks whose reference runs
code, so that sandboxes start on both nodes; the results equal a local run's and both nodes ran tasks.
"""

from __future__ import annotations

import logging

from ray_nodes import CLUSTER_ENV, LocalRayCluster

from vtb_agents.episodes.regions import has_reference_code
from vtb_agents.rundir.store import ResultsStore
from vtb_agents.runner.executors import LocalExecutor
from vtb_agents.runner.ray_executor import RayExecutor
from vtb_agents.runner.run import RunConfig, run_suite
from vtb_agents.tasks import load_tasks


def test_a_two_node_cluster_gives_the_results_of_a_local_run(tmp_path, monkeypatch, caplog):
    tasks = [t for t in load_tasks("sample") if has_reference_code(t)][:4]
    for name, value in CLUSTER_ENV.items():
        monkeypatch.setenv(name, value)  # this process is the cluster's driver
    config = RunConfig(model="replay")
    caplog.set_level(logging.INFO, logger="vtb_agents.runner.ray_executor")
    with LocalRayCluster(workers=1, cpus=1) as cluster:
        nodes = cluster.alive_nodes()
        remote = run_suite(tasks, config, tmp_path / "ray", executor=RayExecutor(address=cluster.address,
                                                                                  concurrency=4))
    local = run_suite(tasks, config, tmp_path / "local", executor=LocalExecutor(4))
    assert remote == local and remote["complete"] is True and remote["tasks"] == 4
    mine, theirs = (ResultsStore(tmp_path / d).load()[0] for d in ("ray", "local"))
    assert sorted((r.task_id, r.outcome, [t.answer for t in r.episode.turns]) for r in mine) == sorted(
        (r.task_id, r.outcome, [t.answer for t in r.episode.turns]) for r in theirs)
    assert len(nodes) == 2
    ran = {record.args[1]: record.args[2] for record in caplog.records  # type: ignore[index]
           if record.msg == "Ray worker %d (node %s): %d task(s)"}
    assert sorted(ran) == sorted(nodes) and sum(ran.values()) == 4  # one worker per node, 2 tasks at once each
    assert sorted(p.name for p in (tmp_path / "ray").glob("checkpoints-*.sqlite")) == [
        "checkpoints-0.sqlite", "checkpoints-1.sqlite"]
