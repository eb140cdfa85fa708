"""ROLLOUT_JOBS_USERS without Ray: the setting's checks, the pool as the queue's slots, and the
data dir it prepares. The real clusters run in tests/service/test_job_clusters.py."""

from __future__ import annotations

import asyncio
import os
import stat
from pathlib import Path

import pytest
from pydantic import ValidationError

from app.core.config import Settings
from app.core.layout import evaluation_jobs_dir, jobs_dir
from app.jobs.job_clusters import JobCluster, JobClustersLauncher, processes_of
from app.jobs.launcher import JobRequest, RayJobState, RayUnavailable
from app.jobs.resources import JobResources


def test_the_pool_is_a_comma_list_of_distinct_unprivileged_users(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, jobs_users="nobody", jobs_enabled=False)
    assert settings.jobs_users == ["nobody"]
    for value, error in (
        ("nobody,nobody", "named once"),
        ("nobody,no-such-user-here", "no OS user 'no-such-user-here'"),
        ("root", "must not be root"),
    ):
        with pytest.raises(ValidationError, match=error):
            Settings(data_dir=tmp_path, jobs_users=value)
    with pytest.raises(ValidationError, match="not both"):
        Settings(data_dir=tmp_path, jobs_users="nobody", jobs_user="nobody")
    with pytest.raises(ValidationError, match="external cluster"):
        Settings(data_dir=tmp_path, jobs_users="nobody", ray_address="10.0.0.5:6379")


def _cluster(submission_id: str, user: str, cpus: float, tmp_path: Path) -> JobCluster:
    return JobCluster(
        submission_id=submission_id,
        user=user,
        token="t",
        temp_dir=tmp_path / submission_id,
        job_dir=tmp_path / "jobs" / submission_id,
        cpus=cpus,
    )


def test_the_users_are_the_queue_slots(tmp_path: Path) -> None:
    """Each running job holds a user; with none free nothing more fits the machine, and a
    submit that finds none is refused as the cluster's state (the job stays queued)."""

    async def main() -> None:
        launcher = JobClustersLauncher(tmp_path, ["nobody", "daemon"], stop_grace_s=5, total_cpus=8)
        empty = await launcher.cluster_resources()
        assert empty is not None and (empty.total_cpus, empty.used_cpus) == (8, 0)
        launcher._clusters["a"] = _cluster("a", "nobody", 1.25, tmp_path)
        one = await launcher.cluster_resources()
        assert one is not None and one.used_cpus == 1.25
        assert launcher.free_users() == ["daemon"]
        launcher._clusters["b"] = _cluster("b", "daemon", 1.0, tmp_path)
        full = await launcher.cluster_resources()
        assert full is not None and full.used_cpus == full.total_cpus == 8
        request = JobRequest(
            experiment_id=3,
            resources=JobResources(1.0, 0.0, 0.0, 0.0),
            claim="c",
            api_url="http://127.0.0.1:1",
            job_dir=tmp_path / "jobs" / "3",
        )
        with pytest.raises(RayUnavailable, match="every jobs user"):
            await launcher.submit("rollout-3-x", request)
        missing = await launcher.job("rollout-unknown")
        assert missing.state == RayJobState.MISSING

    asyncio.run(main())


@pytest.mark.skipif(os.geteuid() != 0, reason="the pool's dirs are made as root")
def test_with_a_pool_the_job_dirs_are_passable_and_the_service_s_own(tmp_path: Path) -> None:
    settings = Settings(
        data_dir=tmp_path / "data", jobs_users="nobody", frontend_dir=tmp_path, jobs_enabled=False
    )
    settings.prepare_data_dir()
    assert stat.S_IMODE(settings.data_dir.stat().st_mode) == 0o711
    for path in (jobs_dir(settings.data_dir), evaluation_jobs_dir(settings.data_dir)):
        assert stat.S_IMODE(path.stat().st_mode) == 0o711
        assert path.stat().st_uid == 0


def test_processes_of_a_user_are_found_by_real_uid() -> None:
    mine = processes_of(os.getuid())
    assert os.getpid() in mine
    assert not processes_of(2**31 - 7)  # no such uid


def test_a_job_ends_once_whoever_asks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The launcher's watch and the reconciler may see the same job end at the same time: its
    cluster is released once, and both (and every later caller) get its final state and log
    tail, not a missing job."""
    import time

    from app.jobs.launcher import RayJob

    class Client:
        def get_job_logs(self, submission_id: str) -> str:
            time.sleep(0.2)  # the second caller arrives meanwhile
            return "line 1\nline 2"

    released: list[str] = []

    async def main() -> None:
        launcher = JobClustersLauncher(tmp_path, ["nobody"], stop_grace_s=5, total_cpus=2)
        monkeypatch.setattr(launcher, "_release_now", lambda c: released.append(c.submission_id))
        cluster = _cluster("s1", "nobody", 1.0, tmp_path)
        cluster.client = Client()  # type: ignore[assignment]
        launcher._clusters["s1"] = cluster
        done = RayJob(RayJobState.SUCCEEDED, "ok")
        first, second = await asyncio.gather(
            launcher._end(cluster, done), launcher._end(cluster, done)
        )
        assert first == second == done
        assert launcher.free_users() == []  # not before its processes are gone
        await asyncio.gather(*launcher._releasing)
        assert released == ["s1"]
        assert (await launcher.job("s1")) == done
        assert await launcher.log_tail("s1") == "line 1\nline 2"
        assert launcher.free_users() == ["nobody"]

    asyncio.run(main())


def test_a_fresh_head_without_its_job_agent_yet_is_offered_the_job_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ray's dashboard answers before its job agent is up on a busy machine; that refusal is
    retried, any other is final."""
    from app.jobs import job_clusters

    monkeypatch.setattr(job_clusters, "SUBMIT_RETRY_S", 0.01)
    not_yet = (
        "Request failed with status code 500: "
        "No available agent to submit job, please try again later."
    )

    class Client:
        def __init__(self, refusals: list[str]) -> None:
            self.refusals = refusals
            self.calls = 0

        def submit_job(self, **kwargs: object) -> str:
            self.calls += 1
            if self.refusals:
                raise RuntimeError(self.refusals.pop(0))
            return str(kwargs["submission_id"])

    async def main() -> None:
        launcher = JobClustersLauncher(tmp_path, ["nobody"], stop_grace_s=5, total_cpus=2)
        cluster = _cluster("s1", "nobody", 1.0, tmp_path)
        cluster.client = patient = Client([not_yet, not_yet])  # type: ignore[assignment]
        await launcher._submit_when_ready(cluster, {"submission_id": "s1"})
        assert patient.calls == 3

        # A dropped connection whose request got through: the retry finds the job there.
        class Dropped(Client):
            def submit_job(self, **kwargs: object) -> str:
                self.calls += 1
                if self.calls == 1:
                    raise ConnectionError("Connection aborted.")
                raise RuntimeError("Job with submission_id s1 already exists.")

        cluster.client = dropped = Dropped([])  # type: ignore[assignment]
        await launcher._submit_when_ready(cluster, {"submission_id": "s1"})
        assert dropped.calls == 2
        cluster.client = Client(["Request failed with status code 400: bad entrypoint"])  # type: ignore[assignment]
        with pytest.raises(RuntimeError, match="bad entrypoint"):
            await launcher._submit_when_ready(cluster, {"submission_id": "s1"})

    asyncio.run(main())
