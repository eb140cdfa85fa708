"""The load benchmark end to end at a tiny scale: two API processes on a fresh PostgreSQL
database, simulated jobs, websocket clients, a query storm; no errors, every sample kind seen,
and the table lands in a markdown file. (Speed is measured by the benchmark, not here.)"""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from benchmarks import load_bench
from tests.service.postgres import fresh_database, postgres_available

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(240)]


def test_a_small_load_run_has_no_errors_and_writes_its_table(tmp_path: Path) -> None:
    if not postgres_available():
        pytest.skip("no PostgreSQL")
    args = argparse.Namespace(
        workers=2,
        experiments=3,
        ws_clients=10,
        rate=2.0,
        query_rate=20.0,
        query_tasks=1,
        checkpoint_every=3,
        checkpoint_kb=10,
        duration=4.0,
        warmup=1.0,
        ws_procs=1,
    )
    with fresh_database() as url:
        summary = load_bench.run(args, url)
    assert summary["errors"] == 0, summary["error_samples"]
    assert summary["latency_samples"] > 0 and summary["health_samples"] > 0
    assert summary["queries"] > 0 and summary["messages"] > 0
    doc = tmp_path / "benchmarks.md"
    doc.write_text("# Benchmarks\n\n## Service\n\n<!-- service_bench:start -->\nx\n"
                   "<!-- service_bench:end -->\n\nafter\n")  # fmt: skip
    load_bench.write(doc, load_bench.markdown(args, summary))
    load_bench.write(doc, load_bench.markdown(args, summary))  # replaces, never duplicates
    text = doc.read_text()
    assert text.count(load_bench.START) == 1 and text.endswith("after\n")
    assert "| ingest -> websocket, p99 (ms) |" in text
