"""The API process stays small: importing it never loads torch, gymnasium or Ray."""

from __future__ import annotations

import subprocess
import sys


def test_app_main_imports_no_heavy_modules():
    code = (
        "import sys, app.main, app.cli; "
        "from app.core.config import Settings; app.main.create_app(Settings(jobs_enabled=False)); "
        "heavy = [m for m in ('torch', 'gymnasium', 'ray') if m in sys.modules]; "
        "print(','.join(heavy))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == ""


def test_client_imports_no_heavy_modules():
    """`app.client` is what users' scripts and notebooks import: no torch, gymnasium, Ray or
    SQLAlchemy (its wire models come from the schema modules, never the ORM)."""
    code = (
        "import sys, app.client; "
        "from app.client import RolloutClient; RolloutClient('http://127.0.0.1:1').close(); "
        "heavy = [m for m in ('torch', 'gymnasium', 'ray', 'sqlalchemy') if m in sys.modules]; "
        "print(','.join(heavy))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == ""
