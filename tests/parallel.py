"""`make test`'s pytest run: the suite in two processes side by side, then the timing tests alone.

Why: about half of the suite's time is Ray jobs and browser pages (markers `ray`, `browser`),
which spend much of it waiting on job start-ups, outages and pages, and the other half is
in-process API and trainer tests that keep one core busy. Side by side on a 2-core machine
they finish in about two thirds of the time one after the other. Only the jobs' process starts
the shared Ray cluster. The few tests that assert wall-clock latencies (marker `timing`) run
afterwards on their own, so the other process's load never decides them.

    python -m tests.parallel [pytest args...]   # the args go to every group

Each group writes to its own log (printed whole when the group ends) and its own --basetemp;
the exit status is the first failing group's (pytest's "no tests collected" counts as passed).
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO

SIDE_BY_SIDE = {
    "jobs and browser": "(ray or browser) and not timing",
    "api and trainer": "not ray and not browser and not timing",
}
ALONE = {"timing": "timing"}
NO_TESTS_COLLECTED = 5


Started = tuple[subprocess.Popen[bytes], IO[bytes], float]  # the process, its log, its start


def _start(name: str, expr: str, args: list[str], workdir: Path) -> Started:
    slug = name.replace(" ", "-")
    log = (workdir / f"{slug}.log").open("w+b")
    command = [
        sys.executable, "-m", "pytest", "-m", expr, "-p", "no:cacheprovider",
        f"--basetemp={workdir / slug}", *args,
    ]  # fmt: skip
    print(f"[{name}] pytest -m '{expr}' (log {log.name})", flush=True)
    return subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT), log, time.monotonic()


def _report(name: str, code: int, log: IO[bytes], seconds: float) -> int:
    log.seek(0)
    sys.stdout.write(f"\n===== [{name}] exit {code} after {seconds:.0f} s =====\n")
    sys.stdout.flush()
    sys.stdout.buffer.write(log.read())
    sys.stdout.flush()
    log.close()
    return 0 if code == NO_TESTS_COLLECTED else code


def run(groups: dict[str, str], args: list[str], workdir: Path) -> list[int]:
    """The groups side by side, each one's log printed as it ends; their exit statuses."""
    started = {name: _start(name, expr, args, workdir) for name, expr in groups.items()}
    codes: dict[str, int] = {}
    try:
        while len(codes) < len(started):
            for name, (proc, log, t0) in started.items():
                if name not in codes and (code := proc.poll()) is not None:
                    codes[name] = _report(name, code, log, time.monotonic() - t0)
            time.sleep(0.5)
    except BaseException:
        for proc, _, _ in started.values():
            proc.terminate()
        for proc, _, _ in started.values():
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
        raise
    return [codes[name] for name in groups]


def main(args: list[str]) -> int:
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="rollout-tests-") as tmp:
        workdir = Path(tmp)
        codes = run(SIDE_BY_SIDE, args, workdir)
        codes += run(ALONE, args, workdir)
    failed = [code for code in codes if code != 0]
    print(f"\nall groups: {'FAILED' if failed else 'passed'} in {time.monotonic() - t0:.0f} s")
    return failed[0] if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
