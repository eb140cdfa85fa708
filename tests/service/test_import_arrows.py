"""The import arrows docs/architecture.md states hold: a domain imports its own and earlier
domains at module level, with the two exceptions the document names; `core` imports no
domain at module level; composition roots import anything. A new module-level import against
the order fails here (imports inside functions are the document's way to reach a later domain).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# docs/architecture.md: "core <- experiments <- metrics, checkpoints <- evaluations, sweeps <-
# studies <- live <- jobs; presets and references ... import only core".
RANK = {
    "core": 0,
    "presets": 0.5,
    "references": 0.5,
    "experiments": 1,
    "metrics": 2,
    "checkpoints": 2,
    "evaluations": 3,
    "sweeps": 3,
    "studies": 4,
    "live": 5,
    "jobs": 6,
}
# The document's two exceptions: (importing domain, imported module prefix).
EXCEPTIONS = (
    # the live vocabulary, imported by the services that publish
    (("experiments", "checkpoints", "evaluations", "metrics"), "app.live.topics"),
    (("experiments", "checkpoints", "evaluations"), "app.live.messages"),
    # the job kernel, which imports only core and itself
    (("evaluations",), "app.jobs.kernel"),
    (("evaluations",), "app.jobs.launcher"),
    (("evaluations",), "app.jobs.resources"),
    (("studies",), "app.jobs.kernel"),
)
KERNEL = ("app/jobs/kernel.py", "app/jobs/launcher.py", "app/jobs/resources.py")
KERNEL_MODULES = ("app.jobs.kernel", "app.jobs.launcher", "app.jobs.resources")


def _module_level_imports(source: str) -> list[str]:
    """The app modules a file imports when it is imported (not inside a function)."""
    found = []
    for node in ast.parse(source).body:
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found += [f"{node.module}.{a.name}" for a in node.names]
    return [m for m in found if m.startswith("app.")]


def _allowed(domain: str, module: str) -> bool:
    return any(
        domain in importers and (module == prefix or module.startswith(prefix + "."))
        for importers, prefix in EXCEPTIONS
    )


def violations(relative: str, source: str) -> list[str]:
    """`relative` (app/<domain>/...) against the documented order."""
    parts = Path(relative).parts
    domain = parts[1] if len(parts) > 2 else None
    if domain not in RANK:
        return []  # composition roots: app/main.py, app/models.py, app/cli.py, client, commands
    found = []
    for module in _module_level_imports(source):
        target = module.split(".")[1]
        if relative in KERNEL:  # only core and each other
            bad = target != "core" and not module.startswith(KERNEL_MODULES)
        else:
            later = target in RANK and target != domain and RANK[target] >= RANK[domain]
            bad = later and not _allowed(domain, module)
        if bad:
            found.append(f"{relative} imports {module}")
    return found


def test_every_module_level_import_follows_the_documented_order() -> None:
    found = []
    for path in sorted((ROOT / "app").rglob("*.py")):
        found += violations(str(path.relative_to(ROOT)), path.read_text())
    assert found == []


def test_the_checker_reports_imports_against_the_order() -> None:
    later = "from app.studies.service import get\n"
    assert violations("app/sweeps/service.py", later) == [
        "app/sweeps/service.py imports app.studies.service.get"
    ]
    assert violations("app/core/db.py", "import app.experiments.models\n") == [
        "app/core/db.py imports app.experiments.models"
    ]
    assert violations("app/jobs/kernel.py", "from app.experiments import service\n") == [
        "app/jobs/kernel.py imports app.experiments.service"
    ]
    assert violations("app/jobs/kernel.py", "from app.jobs.salvage import s\n") != []
    assert violations("app/jobs/kernel.py", "from app.jobs.launcher import JobRequest\n") == []
    # Same rank is not an order either (sweeps and evaluations are side by side).
    assert violations("app/sweeps/x.py", "from app.evaluations import service\n") != []
    inside = "def f():\n    from app.studies.service import get\n"
    assert violations("app/sweeps/service.py", inside) == []
    assert violations("app/main.py", later) == []
    assert violations("app/evaluations/scheduling.py", "from app.jobs import kernel\n") == []
    assert violations("app/experiments/router.py", "from app.jobs.salvage import s\n") != []
