"""Sweep members spread over a two-node Ray cluster on one machine: a head with 2 CPUs and a
second node (2 CPUs, custom resource `node_b`) joined to it, both on free ports of
127.0.0.2 (loopback, but an address Ray does not rewrite to the machine's external one, so a
second node can join; no traffic leaves the loopback interface), and the real
service pointed at the head (an existing cluster, as with RAY_ADDRESS). Four 1-CPU members
with max_parallel 4 cannot all fit on one node, and each job's driver node (Ray's job info)
shows them landing on both. Skipped with the reason when the second node cannot start."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.jobs.ray_head import LocalRayHead, apply_ray_env
from tests.service.ray_worker import NODE_IP, LocalRayWorker
from tests.service.test_e2e_jobs import LiveService, make_settings, stop_all, wait_for
from tests.service.test_e2e_sweeps import ENDED, TINY

pytestmark = pytest.mark.ray


@pytest.fixture(scope="module")
def cluster() -> Iterator[tuple[LocalRayHead, LocalRayWorker]]:
    apply_ray_env()
    head = LocalRayHead(num_cpus=2, object_store_bytes=256 * 1024**2, node_ip=NODE_IP)
    try:
        head.start()
    except (RuntimeError, TimeoutError, OSError) as exc:
        pytest.skip(f"a Ray head on {head.node_ip} failed: {exc}")
    worker = LocalRayWorker(head, num_cpus=2, resources={"node_b": 1})
    try:
        try:
            worker.start()
        except (RuntimeError, TimeoutError, OSError) as exc:
            pytest.skip(f"the second Ray node could not start on this machine: {exc}")
        yield head, worker
    finally:
        worker.stop()
        head.stop()


@pytest.fixture(scope="module")
def service(cluster: tuple[LocalRayHead, LocalRayWorker], tmp_path_factory) -> Iterator[Any]:
    head, _ = cluster
    data_dir: Path = tmp_path_factory.mktemp("two-nodes")
    live = LiveService(make_settings(data_dir, head.dashboard_url)).start()
    try:
        yield live
    finally:
        if live.thread.is_alive():
            stop_all(live)
            live.stop()


def _nodes(head: LocalRayHead) -> dict[str, dict[str, float]]:
    from ray.util.state import list_nodes

    return {
        n.node_id: dict(n.resources_total)
        for n in list_nodes(address=head.dashboard_url, detail=True)
        if n.state == "ALIVE"
    }


def test_sweep_members_land_on_both_nodes(
    cluster: tuple[LocalRayHead, LocalRayWorker], service: LiveService
) -> None:
    head, _ = cluster
    from ray.job_submission import JobSubmissionClient

    nodes = _nodes(head)
    assert len(nodes) == 2, nodes
    node_b = next(node for node, res in nodes.items() if "node_b" in res)
    body = {"name": "two nodes", "config": TINY, "grid": {}, "seeds": [0, 1, 2, 3]}
    response = service.http.post("/sweeps", json={**body, "max_parallel": 4})
    assert response.status_code == 201, response.text
    sweep = response.json()
    state: dict[str, Any] = {}

    def finished() -> bool:
        state.update(service.http.get(f"/sweeps/{sweep['id']}").json())
        return all(m["status"] in ENDED for m in state["members"])

    wait_for(finished, 300, "the sweep to finish", lambda: state.get("counts"))
    assert state["status"] == "succeeded", [(m["status"], m["error"]) for m in state["members"]]
    jobs = JobSubmissionClient(head.dashboard_url)
    driver_nodes = {
        m["id"]: jobs.get_job_info(m["ray_job_id"]).driver_node_id for m in state["members"]
    }
    assert set(driver_nodes.values()) == set(nodes), (driver_nodes, nodes)
    assert node_b in driver_nodes.values()
