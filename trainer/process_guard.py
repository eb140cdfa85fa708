"""Keep one process's memory out of reach of the other processes of its OS user.

Every Ray job of a cluster runs as the same OS user, and a job runs user code (an env module).
On Linux any process may read the memory (`/proc/<pid>/mem`) and environment of another of its
user, unless that one is non-dumpable: so each job's driver (trainer.api_client.job_preamble)
and each of its Ray workers (the launcher's `worker_process_setup_hook`) marks itself
non-dumpable before it holds anything worth stealing (the job token), and `rollout serve` does
the same for the service's secrets. What stays open to another job of that user: files it can
write (see docs/operations.md, "Security model").
"""

from __future__ import annotations

import ctypes
import os
import sys

from trainer.wire import ENV_JOB_NICENESS

PR_SET_DUMPABLE = 4  # prctl(2)
# How the launcher names this for Ray's runtime_env (imported in every worker of the job).
WORKER_SETUP_HOOK = f"{__name__}.setup_worker"


def setup_worker() -> None:
    """Ray's `worker_process_setup_hook` for every worker of a job: non-dumpable, then at the
    job's CPU priority (the driver gets it from `nice -n`; Ray starts actors' workers itself)."""
    make_undumpable()
    lower_priority(int(os.environ.get(ENV_JOB_NICENESS) or 0))


def lower_priority(niceness: int) -> None:
    """Run this process at `niceness` at least (never raises its priority: an unprivileged
    process could not take it back)."""
    if niceness > os.getpriority(os.PRIO_PROCESS, 0):
        os.setpriority(os.PRIO_PROCESS, 0, min(niceness, 19))


def make_undumpable() -> bool:
    """Mark this process non-dumpable (Linux): other processes of the same OS user without
    CAP_SYS_PTRACE can no longer read its /proc/<pid>/mem or /proc/<pid>/environ, nor ptrace
    it. Children are not affected (execve resets it). False where the platform has no prctl."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False
