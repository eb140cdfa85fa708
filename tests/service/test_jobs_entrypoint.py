"""The trainer job's entrypoint pieces that need no API or Ray: environment and stop signals."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from trainer.job import JobEnv, progress_line


def test_job_env_comes_from_the_environment_only(tmp_path: Path) -> None:
    env = JobEnv.from_environ(
        {
            "ROLLOUT_API_URL": "http://api:8000",
            "ROLLOUT_JOB_TOKEN": "t0ken",
            "ROLLOUT_EXPERIMENT_ID": "7",
            "ROLLOUT_JOB_DIR": str(tmp_path / "jobs" / "7"),
        }
    )
    assert (env.api_url, env.token, env.experiment_id) == ("http://api:8000", "t0ken", "7")
    assert env.job_dir == tmp_path / "jobs" / "7" and env.job_dir.is_dir()
    with pytest.raises(SystemExit, match="ROLLOUT_JOB_CLAIM"):
        JobEnv.from_environ({"ROLLOUT_API_URL": "x", "ROLLOUT_EXPERIMENT_ID": "7"})


def test_an_unwritable_job_dir_falls_back_to_a_temp_dir(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    env = JobEnv.from_environ(
        {
            "ROLLOUT_API_URL": "http://api",
            "ROLLOUT_JOB_TOKEN": "t",
            "ROLLOUT_EXPERIMENT_ID": "3",
            "ROLLOUT_JOB_DIR": str(blocker / "jobs"),
        }
    )
    try:
        assert env.job_dir.is_dir() and "rollout-job-3-" in env.job_dir.name
    finally:
        shutil.rmtree(env.job_dir)


def test_progress_line() -> None:
    line = progress_line(
        {"iteration": 3, "env_steps": 1536, "episode_return_mean": 22.44, "env_steps_per_s": 9e3},
        best_return=30.0,
    )
    assert line == "iter 3 steps 1536 return 22.4 (best 30.0) 9000 steps/s"
    first = {"iteration": 1, "env_steps": 8192, "env_steps_per_s": 1200.0}
    before = progress_line({**first, "episode_return_mean": float("nan")}, float("-inf"))
    assert before == "iter 1 steps 8192 return - (0 episodes finished yet) 1200 steps/s"


@pytest.mark.parametrize("how", ["sigterm", "orphaned"])
def test_the_stop_flag_is_set_by_sigterm_and_by_losing_the_parent(tmp_path: Path, how: str) -> None:
    out = tmp_path / "out.txt"
    child = textwrap.dedent(
        f"""
        import os, time
        from trainer.job import StopFlag
        flag = StopFlag()
        flag.install(poll_s=0.05)
        open({str(out)!r} + ".pid", "w").write(str(os.getpid()))
        deadline = time.monotonic() + 30
        while not flag.is_set and time.monotonic() < deadline:
            time.sleep(0.02)
        open({str(out)!r}, "w").write(f"{{flag.is_set}} {{flag.orphaned}}")
        """
    )
    # An intermediate shell stands in for Ray's job supervisor. In the orphan case it exits
    # ("dies") once the child is up; otherwise it waits for its child.
    pid_file = Path(f"{out}.pid")
    then = "wait" if how == "sigterm" else f'while [ ! -s "{pid_file}" ]; do sleep 0.05; done'
    shell = subprocess.Popen(
        ["sh", "-c", f'"{sys.executable}" -c "$CHILD" & {then}'],
        env={**os.environ, "CHILD": child},
        cwd=Path(__file__).resolve().parents[2],
    )
    deadline = time.monotonic() + 30
    while not pid_file.exists() or not pid_file.read_text():
        assert time.monotonic() < deadline, "the child did not start"
        time.sleep(0.05)
    if how == "sigterm":
        os.kill(int(pid_file.read_text()), 15)
    shell.wait(30)
    while not out.exists():
        assert time.monotonic() < deadline, "the stop flag was never set"
        time.sleep(0.05)
    time.sleep(0.1)
    assert out.read_text() == ("True True" if how == "orphaned" else "True False")
