"""Experiments' jobs run at a lower CPU priority than the API (`ROLLOUT_JOB_NICENESS`): the
driver under `nice -n`, each Ray worker of the job lowering its own priority as it starts
(Ray starts actors' workers itself). tests/service/test_job_isolation.py checks a real job's
driver and EnvRunner; here the setting, the launcher's runtime_env and the worker hook."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from app.core.config import JOB_NICENESS, Settings
from app.jobs.launcher import JobRequest, RayJobLauncher
from app.jobs.ray_head import LocalRayHead
from app.jobs.resources import JobResources
from trainer.process_guard import set_session_niceness
from trainer.wire import ENV_JOB_NICENESS


def _request(niceness: int) -> JobRequest:
    return JobRequest(
        experiment_id=1,
        resources=JobResources(driver_cpus=1.0, driver_gpus=0.0, actor_cpus=1.0, actor_gpus=0.0),
        claim="claim",
        api_url="http://127.0.0.1:8000",
        job_dir=Path("/tmp/job"),
        niceness=niceness,
    )


def test_the_setting_defaults_to_yielding_and_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ROLLOUT_JOB_NICENESS", raising=False)
    assert Settings().job_niceness == JOB_NICENESS > 0
    monkeypatch.setenv("ROLLOUT_JOB_NICENESS", "0")
    assert Settings().job_niceness == 0
    monkeypatch.setenv("ROLLOUT_JOB_NICENESS", "20")
    with pytest.raises(ValidationError, match="job_niceness"):
        Settings()


@pytest.mark.parametrize("niceness", [0, 7])
def test_the_workers_of_a_job_learn_its_niceness_from_the_runtime_env(niceness: int) -> None:
    launcher = RayJobLauncher("http://ray.invalid:8265", stop_grace_s=1)
    runtime_env = launcher.runtime_env(_request(niceness))
    assert runtime_env["worker_process_setup_hook"] == "trainer.process_guard.setup_worker"
    assert runtime_env["env_vars"].get(ENV_JOB_NICENESS) == (str(niceness) if niceness else None)


def _hook_in_a_process(start_niceness: int, job_niceness: str | None) -> tuple[int, bool]:
    """(niceness, dumpable) of a fresh process at `start_niceness` after the worker hook."""
    code = (
        "import ctypes, os; from trainer.process_guard import setup_worker; setup_worker(); "
        "dumpable = ctypes.CDLL(None).prctl(3, 0, 0, 0, 0); "
        "print(os.getpriority(os.PRIO_PROCESS, 0), dumpable)"
    )
    env = {"PATH": "/usr/bin:/bin", **({ENV_JOB_NICENESS: job_niceness} if job_niceness else {})}
    out = subprocess.run(
        ["nice", "-n", str(start_niceness), sys.executable, "-c", code],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        cwd=Path(__file__).resolve().parents[2],
    ).stdout.split()
    return int(out[0]), out[1] == "1"


def test_the_worker_hook_lowers_priority_and_never_raises_it() -> None:
    assert _hook_in_a_process(0, "7") == (7, False)
    assert _hook_in_a_process(0, None) == (0, False)
    assert _hook_in_a_process(10, "5") == (10, False)  # already lower: left as it is
    assert _hook_in_a_process(0, "40") == (19, False)


AUTOGROUP = Path("/proc/self/autogroup")


@pytest.mark.skipif(not AUTOGROUP.exists(), reason="the kernel has no autogroup scheduling")
def test_a_session_as_a_whole_takes_the_jobs_niceness() -> None:
    """With autogroup scheduling a process's nice value counts only within its session; a job
    driver runs in a session of its own and its workers in the Ray head's, so both sessions
    get the jobs' niceness (the driver's preamble, the service's local head)."""
    own = AUTOGROUP.read_text()  # empty where this session is the root group (no setsid above)
    child = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        before = Path(f"/proc/{child.pid}/autogroup").read_text().split()
        assert before[-1] == "0"
        assert set_session_niceness(child.pid, 7)
        after = Path(f"/proc/{child.pid}/autogroup").read_text().split()
        assert after == [before[0], "nice", "7"]
        assert AUTOGROUP.read_text() == own  # this test's own session: untouched
    finally:
        child.kill()
        child.wait()
    assert not set_session_niceness(child.pid, 7)  # gone: False, no error
    assert LocalRayHead().niceness == 0  # tests and tools: unchanged unless asked


@pytest.mark.skipif(not AUTOGROUP.exists(), reason="the kernel has no autogroup scheduling")
def test_a_job_driver_lowers_its_session_in_its_preamble(tmp_path: Path) -> None:
    own = AUTOGROUP.read_text()
    script = (
        "from trainer.api_client import job_preamble; job_preamble(preload='json'); "
        "import os; print(open('/proc/self/autogroup').read().split()[-1], os.nice(0))"
    )
    env = {**os.environ, ENV_JOB_NICENESS: "6"}
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60,
        start_new_session=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["6", "6"]
    assert AUTOGROUP.read_text() == own


def test_a_rate_limited_session_change_is_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without CAP_SYS_ADMIN the kernel takes one autogroup change per 100 ms machine-wide and
    answers EAGAIN meanwhile: the change is retried, not dropped; other refusals are final."""
    import errno

    from trainer import process_guard

    writes: list[str] = []
    refusals = [errno.EAGAIN, errno.EAGAIN]

    def write_text(self: Path, value: str) -> int:
        writes.append(value)
        if refusals:
            raise OSError(refusals.pop(0), "refused")
        return len(value)

    monkeypatch.setattr(Path, "write_text", write_text)
    monkeypatch.setattr(process_guard.time, "sleep", lambda s: None)
    assert set_session_niceness(12345, 7)
    assert writes == ["7", "7", "7"]
    refusals[:] = [errno.EINVAL]
    assert not set_session_niceness(12345, 7)  # the root group, a gone process: no retry
    assert len(writes) == 4
    refusals[:] = [errno.EAGAIN] * 10
    assert not set_session_niceness(12345, 7)  # still limited after a few tries: given up
    assert len(writes) == 9
