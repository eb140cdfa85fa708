"""The record of the local Ray head a service started for its data dir (`ray-head.json`).

`rollout serve` starts its Ray head in a process session of its own, so the head and its jobs
outlive an API process that is killed (SIGKILL, OOM, a crash). The record lets the next
`rollout serve` on the same data dir find that head again: adopt it when it is still the head
we started (same pid, same start time, same boot, the same `ray start --head --temp-dir=…`
command line) and still answers, or stop it, with its jobs, when it does not. A recorded pid is
never signalled before it has been checked to be that very head: pids are reused.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from app.core import layout
from app.jobs.ray_head import LocalRayHead, alive, descendants, proc_start_time

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class HeadRecord:
    """Where a local head runs and how to recognise its processes."""

    pid: int  # `ray start --head --block`, the leader of the head's process group
    started: int  # its start time (clock ticks since boot, /proc/<pid>/stat)
    boot_id: str  # pids and start times mean nothing after a reboot
    address: str  # GCS address
    dashboard_url: str  # Jobs API
    temp_dir: str  # Ray's --temp-dir: part of every head process's command line
    owned_temp: bool  # a /tmp dir made for the head, removed with it
    owner_pid: int  # the API process that started or adopted the head
    owner_started: int
    # pid -> start time of the head's daemons (GCS, raylet, dashboard...) once it was ready:
    # what is left of a head whose leader died, found by pid and start time.
    daemons: dict[str, int] = field(default_factory=dict)


def boot_id() -> str:
    with contextlib.suppress(OSError):
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    return ""


def whereabouts(head: LocalRayHead) -> dict[str, Any]:
    """The fields every record of a running head holds (the shared head's here, each job's
    cluster in app/jobs/job_clusters.py): which process it is, on which boot, where it answers."""
    assert head.pid is not None
    return {
        "pid": head.pid,
        "started": head.started,
        "boot_id": boot_id(),
        "address": head.address,
        "dashboard_url": head.dashboard_url,
    }


def path_for(data_dir: Path) -> Path:
    return layout.head_record_file(data_dir)


def save(data_dir: Path, record: HeadRecord) -> None:
    """Write the record atomically (a crash never leaves half a file)."""
    target = path_for(data_dir)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(asdict(record), indent=2) + "\n")
    tmp.replace(target)


def load(data_dir: Path) -> HeadRecord | None:
    """The recorded head, or None (no record, or one this version cannot read)."""
    target = path_for(data_dir)
    try:
        return HeadRecord(**json.loads(target.read_text()))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, TypeError) as exc:
        log.warning("ignoring unreadable %s: %s", target, exc)
        return None


def clear(data_dir: Path) -> None:
    path_for(data_dir).unlink(missing_ok=True)


def _cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def is_that_head(record: HeadRecord) -> bool:
    """True only if the recorded pid is still the very `ray start --head` process we started."""
    if record.boot_id != boot_id() or proc_start_time(record.pid) != record.started:
        return False
    argv = _cmdline(record.pid)
    return "start" in argv and "--head" in argv and f"--temp-dir={record.temp_dir}" in argv


def owner_alive(record: HeadRecord) -> bool:
    """The API process that holds the head is still running (same boot, pid and start time)."""
    return (
        record.boot_id == boot_id()
        and record.owner_pid != os.getpid()
        and proc_start_time(record.owner_pid) == record.owner_started
    )


def leftovers(record: HeadRecord) -> dict[int, int]:
    """pid -> start time of what is left of a head whose leader is gone: its recorded daemons
    still running (same pid and start time), everything below them (workers, job drivers),
    and any process of the leader's group that names the head's temp dir (a head that died
    before its daemons were recorded)."""
    found: dict[int, int] = {}
    if record.boot_id != boot_id():
        return found
    daemons = {int(pid): started for pid, started in record.daemons.items()}
    for pid in alive(daemons):
        found[pid] = daemons[pid]
        found.update(descendants(pid))
    with contextlib.suppress(OSError):
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            pid = int(entry.name)
            try:
                in_group = os.getpgid(pid) == record.pid
            except OSError:
                continue
            started = proc_start_time(pid)
            if (
                in_group
                and started is not None
                and started >= record.started
                and any(record.temp_dir in part for part in _cmdline(pid))
            ):
                found[pid] = started
                found.update(descendants(pid))
    return found
