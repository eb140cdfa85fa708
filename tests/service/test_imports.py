"""The API process stays small: importing it never loads torch, gymnasium or Ray."""

from __future__ import annotations

import subprocess
import sys


def test_app_main_imports_no_heavy_modules():
    code = (
        "import sys, app.main, app.service_cli; "
        "from app.core.config import Settings; app.main.create_app(Settings(jobs_enabled=False)); "
        "heavy = [m for m in ('torch', 'gymnasium', 'ray') if m in sys.modules]; "
        "print(','.join(heavy))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == ""
