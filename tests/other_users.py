"""Running the service's jobs as other OS users in tests, the way an operator does: fresh system
users made for the test (`useradd`) and removed after it, an interpreter they may run, and a
small client of the served API.

A virtualenv made from a Python under /root (mode 0700) cannot be run by another user, so
`shared_python` makes one from the system's Python 3.11 that reuses this environment's packages
and the project (a .pth file), with a `ray` script beside it: `rollout serve` started with it
runs its jobs, as any user, from code every user may read.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import secrets
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from tests.serve_process import ROOT

SYSTEM_PYTHON = Path("/usr/bin/python3.11")


def why_not_other_users() -> str | None:
    """Why this machine cannot run jobs as other users (None when it can)."""
    if not sys.platform.startswith("linux") or os.geteuid() != 0:
        return "switching users needs root on Linux"
    if not SYSTEM_PYTHON.exists() or shutil.which("useradd") is None:
        return "needs the system's python3.11 and useradd"
    return None


@contextlib.contextmanager
def fresh_users(count: int) -> Iterator[list[str]]:
    """`count` new system users without a home or a shell, removed at the end."""
    stem = f"rt{secrets.token_hex(3)}"
    users = [f"{stem}-{chr(ord('a') + i)}" for i in range(count)]
    made: list[str] = []
    try:
        for user in users:
            subprocess.run(
                ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", user],
                check=True,
                capture_output=True,
            )
            made.append(user)
        yield users
    finally:
        for user in made:
            subprocess.run(["userdel", user], check=False, capture_output=True)


@contextlib.contextmanager
def shared_python(probe_user: str) -> Iterator[str | None]:
    """An interpreter every user may run, with this environment's packages and the project;
    None when `probe_user` still cannot import them with it."""
    venv = Path(tempfile.mkdtemp(prefix="rollout-sysvenv-", dir="/tmp"))
    try:
        subprocess.run(
            [str(SYSTEM_PYTHON), "-m", "venv", "--without-pip", str(venv)],
            check=True,
            capture_output=True,
        )
        site = venv / "lib" / "python3.11" / "site-packages"
        (site / "rollout.pth").write_text(f"{sysconfig.get_paths()['purelib']}\n{ROOT}\n")
        python = venv / "bin" / "python"
        ray = venv / "bin" / "ray"
        ray.write_text(
            f"#!{python}\nimport sys\nfrom ray.scripts.scripts import main\nsys.exit(main())\n"
        )
        ray.chmod(0o755)
        subprocess.run(["chmod", "-R", "a+rX", str(venv)], check=True)
        entry = pwd.getpwnam(probe_user)
        probe = subprocess.run(
            [str(python), "-c", "import ray, torch, trainer.job"],
            user=entry.pw_uid,
            group=entry.pw_gid,
            extra_groups=[],
            env={"PATH": "/usr/bin:/bin", "HOME": "/tmp"},
            cwd="/",
            capture_output=True,
            text=True,
            timeout=120,
        )
        yield str(python) if probe.returncode == 0 else None
    finally:
        shutil.rmtree(venv, ignore_errors=True)


class ServedApi:
    """The served API with its token, as a user's script would call it."""

    def __init__(self, url: str, token: str) -> None:
        self.http = httpx.Client(
            base_url=f"{url}/api/v1", timeout=30, headers={"Authorization": f"Bearer {token}"}
        )

    def submit(self, config: dict[str, Any], name: str) -> int:
        response = self.http.post("/experiments", json={"name": name, "config": config})
        assert response.status_code == 201, response.text
        return int(response.json()["id"])

    def get(self, exp_id: int) -> dict[str, Any]:
        response = self.http.get(f"/experiments/{exp_id}")
        response.raise_for_status()
        return dict(response.json())

    def wait(self, exp_id: int, statuses: set[str], timeout_s: float) -> dict[str, Any]:
        from tests.service.test_e2e_jobs import wait_for_status

        return wait_for_status(lambda: self.get(exp_id), statuses, timeout_s)

    def steps(self, exp_id: int) -> int:
        return int(self.get(exp_id).get("env_steps") or 0)
