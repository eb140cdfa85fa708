"""docs/architecture.md names only what exists: every repository path it gives is there, and
every function, class or attribute it names in a file is defined in that file.

Only backticked tokens are read:

- a path has a `/` or ends in a file suffix (`app/jobs/salvage.py`, `app/studies/`,
  `trainer/env_runner*.py`: a glob must match at least one file). A path whose first part is not
  at the repository root is relative to the path before it in the same paragraph, list item or
  table row (inside it when that one is a directory, else beside it), so "`trainer/config.py`,
  `presets.py`" and "`frontend/src/api/`, `data/`" are lists;
- a name belongs to the file just before it: an identifier or `Class.member` that follows a
  `.py`/`.ts` path with only whitespace between ("`trainer/loop.py` `ReporterSink.on_iteration`"),
  or follows such a name after a comma or "and" ("`app/live/topics.py` `columnar`,
  `metrics_message`"); a call's arguments are ignored (`Reporter.add_metrics(step, time_s)`);
- a dotted module (`app.live.messages`, `app/core/auth.check_job_token`) is its longest prefix
  that is a module, and the rest names inside it.

Other tokens (commands, routes, types, bare identifiers) are not checked. A name is defined by
`def`/`class`/assignment in Python (module level, or in the class for `Class.member`) and by
`function`/`class`/`const`/... or a class member in TypeScript.
"""

from __future__ import annotations

import ast
import functools
import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "architecture.md"

# Files a job writes at run time (in its job dir), named by the document but not in the repository.
RUNTIME_FILES = frozenset({"metrics.jsonl", "final_status.json"})
FILE_SUFFIXES = (".py", ".ts", ".json", ".jsonl", ".md", ".toml", ".ini", ".mako", ".css", ".gz")
CODE_SUFFIXES = (".py", ".ts")
GLOB_CHARS = frozenset("*?[")

TOKEN = re.compile(r"`([^`]+)`")
NAME = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")
CALL = re.compile(r"(?P<head>[^\s(]+)\(.*\)", re.DOTALL)
CHAIN_GAP = re.compile(r"\s*(?:,|,?\s+and)?\s*")
BLOCK_START = re.compile(r"\s*(?:[-*] |\d+\. |#|\|)")


@dataclass
class Checked:
    """What one document names: the paths and the (file, name) pairs, and what is wrong."""

    paths: list[str] = field(default_factory=list)
    names: list[tuple[str, str]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def blocks(text: str) -> list[tuple[int, str]]:
    """(first line number, text) of each paragraph, list item, heading and table row."""
    out: list[tuple[int, list[str]]] = []
    open_block = False  # the last block may go on with the next line
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            open_block = False
            continue
        if not open_block or BLOCK_START.match(line):
            out.append((number, []))
        out[-1][1].append(line)
        open_block = not line.lstrip().startswith(("|", "#"))
    return [(number, "\n".join(lines)) for number, lines in out]


def check(text: str, root: Path = ROOT) -> Checked:
    """Every path and name the text gives, checked against the tree at `root`."""
    result = Checked()
    for first_line, block in blocks(text):
        base: Path | None = None  # where relative paths of this block resolve
        owner: Path | None = None  # the code file names attach to
        chained = False  # the previous token was a name of `owner`
        last_end = 0
        for match in TOKEN.finditer(block):
            gap, last_end = block[last_end : match.start()], match.end()
            line = first_line + block.count("\n", 0, match.start())
            token = match.group(1).strip()
            if call := CALL.fullmatch(token):
                token = call["head"]
            where = f"docs/architecture.md:{line}: `{match.group(1)}`"
            attached = owner is not None and (
                not gap.strip() or (chained and CHAIN_GAP.fullmatch(gap) is not None)
            )
            if attached and NAME.fullmatch(token) and not token.endswith(FILE_SUFFIXES):
                assert owner is not None
                result.names.append((owner.relative_to(root).as_posix(), token))
                if not defines(owner, token):
                    rel = owner.relative_to(root).as_posix()
                    result.problems.append(f"{where}: {rel} defines no `{token}`")
                chained = True
                continue
            owner, chained = None, False
            if any(c.isspace() for c in token) or token.startswith(("/", "-")) or "://" in token:
                continue
            if token in RUNTIME_FILES:
                continue
            dotted = module_reference(token, root)
            if dotted is not None:
                module, rest = dotted
                result.paths.append(token)
                if module is None:
                    result.problems.append(f"{where}: no module {token!r} in the repository")
                    continue
                if rest:
                    result.names.append((module.relative_to(root).as_posix(), rest))
                    if not defines(module, rest):
                        rel = module.relative_to(root).as_posix()
                        result.problems.append(f"{where}: {rel} defines no `{rest}`")
                owner = module if module.suffix in CODE_SUFFIXES else None
                continue
            if not is_path(token):
                continue
            result.paths.append(token)
            found = resolve(token, base, root)
            if found is None:
                result.problems.append(f"{where}: no such path in the repository")
                # The rest of a list resolves as if it existed: one error, not one per item.
                rel = token.rstrip("/")
                base = root / rel if token.endswith("/") else (root / rel).parent
                continue
            base = found if found.is_dir() else found.parent
            if found.is_file() and found.suffix in CODE_SUFFIXES:
                owner = found
    return result


def is_path(token: str) -> bool:
    return "/" in token or token.endswith(FILE_SUFFIXES)


def module_reference(token: str, root: Path) -> tuple[Path | None, str] | None:
    """(module file, dotted name inside it) for `app.live.messages`-like tokens and
    `app/core/auth.check_job_token`; None when the token is no dotted module reference."""
    if token.endswith(FILE_SUFFIXES) or token.endswith("/") or GLOB_CHARS & set(token):
        return None
    dotted = token.replace("/", ".")
    if "." not in dotted or not NAME.fullmatch(dotted):
        return None
    parts = dotted.split(".")
    if not (root / parts[0] / "__init__.py").is_file():
        return None  # `result.metrics` and the like: not a module of the repository
    for k in range(len(parts), 0, -1):
        stem = root.joinpath(*parts[:k])
        for module in (stem.with_suffix(".py"), stem / "__init__.py"):
            if module.is_file():
                return module, ".".join(parts[k:])
    return None, ""


def resolve(token: str, base: Path | None, root: Path) -> Path | None:
    """The file or directory a path token names (for a glob: the directory of its first
    match), or None."""
    rel = token.rstrip("/")
    first = rel.split("/")[0]
    at_root = base is None or (not GLOB_CHARS & set(first) and (root / first).exists())
    bases = [root] if at_root else [base, base.parent]
    for directory in bases:
        assert directory is not None
        if GLOB_CHARS & set(rel):
            matches = sorted(directory.glob(rel))
            if matches:
                return matches[0]
            continue
        candidate = directory / rel
        if candidate.exists() and (not token.endswith("/") or candidate.is_dir()):
            return candidate
    return None


def defines(path: Path, name: str) -> bool:
    """Whether the Python or TypeScript file defines `name` (`Class.member` for a member)."""
    if path.suffix == ".py":
        return _py_defines(path, name)
    if path.suffix == ".ts":
        return _ts_defines(path.read_text(encoding="utf-8"), name)
    return False


@functools.cache
def _py_tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _py_scope(body: list[ast.stmt]) -> dict[str, ast.stmt]:
    """The names a module or class body defines: def, class, assignment (also inside `if` and
    `try` at that level)."""
    names: dict[str, ast.stmt] = {}
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names[node.name] = node
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                for leaf in ast.walk(target):
                    if isinstance(leaf, ast.Name):
                        names[leaf.id] = node
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names[node.target.id] = node
        elif isinstance(node, ast.If):
            names.update(_py_scope(node.body + node.orelse))
        elif isinstance(node, ast.Try):
            handlers = [stmt for h in node.handlers for stmt in h.body]
            names.update(_py_scope(node.body + handlers + node.orelse + node.finalbody))
    return names


def _py_defines(path: Path, name: str) -> bool:
    body: list[ast.stmt] = _py_tree(path).body
    *outer, last = name.split(".")
    for part in outer:
        node = _py_scope(body).get(part)
        if not isinstance(node, ast.ClassDef):
            return False
        body = node.body
    return last in _py_scope(body)


_TS_MODIFIERS = (
    r"(?:(?:export|default|declare|abstract|async|public|private|protected|static|readonly"
    r"|override|get|set)\s+)*"
)
_TS_KINDS = r"(?:function\*?|class|const|let|var|interface|type|enum)"


def _ts_defines(source: str, name: str) -> bool:
    *outer, last = name.split(".")
    if not outer:
        pattern = rf"^\s*{_TS_MODIFIERS}{_TS_KINDS}\s+{re.escape(last)}\b"
        return re.search(pattern, source, re.MULTILINE) is not None
    if len(outer) > 1:
        return False
    found = re.search(rf"^{_TS_MODIFIERS}class\s+{re.escape(outer[0])}\b", source, re.MULTILINE)
    if found is None:
        return False
    end = re.compile(r"^\}", re.MULTILINE).search(source, found.end())
    body = source[found.end() : end.start() if end else len(source)]
    member = rf"^\s+{_TS_MODIFIERS}{re.escape(last)}\s*[(<:=?!]"
    return re.search(member, body, re.MULTILINE) is not None


def test_architecture_doc_names_only_what_exists():
    checked = check(DOC.read_text(encoding="utf-8"))
    if checked.problems:
        lines = "\n".join(checked.problems)
        pytest.fail(f"docs/architecture.md names what the code lacks:\n{lines}", pytrace=False)
    # The checker really read the document (a parser that finds nothing passes anything).
    assert len(checked.paths) >= 60, checked.paths
    assert len(checked.names) >= 40, checked.names


def test_checker_reports_missing_paths_and_names():
    text = """\
| `trainer/config.py`, `presets.py`, `no_such_module.py` | `PPOConfig`, `list[int]`, `metrics.jsonl`

`trainer/loop.py` `ReporterSink.on_iteration` calls `trainer/reporter.py`
`Reporter.add_metrics(step)` then `Reporter.no_such_method`; `trainer/loop.py` `JsonlSink`,
`no_such_function` and `trainer/nope*.py`.

Also `frontend/src/data/series.ts` `BoundedSeries.append`, `NoSuchSeries`, `app/live/nowhere/`,
`app.live.messages`, `app.live.nosuchmodule`, `app/core/auth.check_job_token` and
`app/core/auth.no_such_check`; `frontend/src/api/`, `data/`, `gone/`.
"""
    checked = check(text)
    assert ("trainer/loop.py", "ReporterSink.on_iteration") in checked.names
    assert ("trainer/reporter.py", "Reporter.add_metrics") in checked.names
    assert ("trainer/loop.py", "no_such_function") in checked.names
    assert ("frontend/src/data/series.ts", "NoSuchSeries") in checked.names
    # `Reporter.no_such_method` follows prose, not a file: it is not a name of any file.
    assert not any(name == "Reporter.no_such_method" for _, name in checked.names)
    missing = "\n".join(checked.problems)
    for wrong in (
        "`no_such_module.py`: no such path",
        "trainer/loop.py defines no `no_such_function`",
        "`trainer/nope*.py`: no such path",
        "frontend/src/data/series.ts defines no `NoSuchSeries`",
        "`app/live/nowhere/`: no such path",
        "app/live/__init__.py defines no `nosuchmodule`",
        "app/core/auth.py defines no `no_such_check`",
        "`gone/`: no such path",
    ):
        assert wrong in missing, (wrong, checked.problems)
    assert len(checked.problems) == 8, checked.problems
