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
import errno
import os
import sys
import time
from pathlib import Path

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


def set_session_niceness(pid: int, niceness: int) -> bool:
    """Give `pid`'s session as a whole the CPU priority `niceness`; False where the kernel has
    no such thing or refuses.

    With autogroup scheduling (Linux's default where CONFIG_SCHED_AUTOGROUP is on, see
    /proc/sys/kernel/sched_autogroup_enabled) the CPU is shared between sessions first, and a
    process's nice value counts only against the processes of its own session. A job's driver
    runs in a session of its own (Ray's job supervisor starts it so) and its Ray workers in the
    Ray head's: at nice 5 within those sessions they still took as much of a busy machine as
    the whole API process. A session's own nice value (/proc/<pid>/autogroup) weighs it
    against the others. A process in the root group (no session of its own) is refused by the
    kernel, so the whole machine is never lowered. Without CAP_SYS_ADMIN the kernel takes one
    such change per 100 ms machine-wide (EAGAIN): retried a few times."""
    value = str(min(max(niceness, 0), 19))
    for attempt in range(5):
        try:
            Path(f"/proc/{pid}/autogroup").write_text(value)
        except OSError as error:
            if error.errno != errno.EAGAIN:
                return False
            time.sleep(0.1 + 0.05 * attempt)
        else:
            return True
    return False


def lower_job_priority() -> None:
    """A job driver's CPU priority (ROLLOUT_JOB_NICENESS): its session's, and its own (which
    `nice -n` already set when the launcher started it so)."""
    niceness = int(os.environ.get(ENV_JOB_NICENESS) or 0)
    if niceness > 0:
        set_session_niceness(os.getpid(), niceness)
        lower_priority(niceness)


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
