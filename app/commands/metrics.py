"""`rollout metrics ID [--csv | --json] [--names a,b] [-o FILE]`: an experiment's metrics,
every stored point, as one CSV table (a row per env step, a column per series; empty where a
series has no point at that step) or as JSON ({"experiment_id", "series": {name: {step,
value}}}, the API's shape)."""

from __future__ import annotations

import argparse
import csv
import io
import json
import sys
from pathlib import Path

from app.client import RolloutClient
from app.commands.common import adder
from app.metrics.schemas import Series


def to_csv(series: dict[str, Series]) -> str:
    names = sorted(series)
    columns = {
        name: dict(zip(series[name].step, series[name].value, strict=True)) for name in names
    }
    steps = sorted({step for name in names for step in series[name].step})
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["step", *names])
    for step in steps:
        writer.writerow([step, *(_cell(columns[name].get(step)) for name in names)])
    return out.getvalue()


def _cell(value: float | None) -> str:
    return "" if value is None else repr(value)


def to_json(experiment_id: int, series: dict[str, Series]) -> str:
    body = {name: s.model_dump() for name, s in sorted(series.items())}
    return json.dumps({"experiment_id": experiment_id, "series": body}) + "\n"


def cmd_metrics(args: argparse.Namespace, client: RolloutClient) -> int:
    names = [n for n in args.names.split(",") if n] if args.names else None
    series = client.all_metrics(args.id, names)
    text = to_json(args.id, series) if args.json else to_csv(series)
    if args.output:
        Path(args.output).write_text(text)
        points = sum(len(s.step) for s in series.values())
        print(f"{args.output}: {len(series)} series, {points} points", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    parser = adder(sub, common)(
        "metrics", cmd_metrics, "export an experiment's metrics (CSV or JSON)"
    )
    parser.add_argument("id", type=int)
    form = parser.add_mutually_exclusive_group()
    form.add_argument("--csv", action="store_true", help="a row per env step (the default)")
    form.add_argument("--json", action="store_true", help="columnar series, as the API sends")
    parser.add_argument("--names", help="comma-separated series (default: all)")
    parser.add_argument("-o", "--output", help="write to this file instead of stdout")
