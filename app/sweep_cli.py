"""`rollout sweep submit | show | stop`: sweeps from the command line, against the service.

A sweep file (YAML or JSON) holds what POST /api/v1/sweeps takes:

    name: cartpole lr
    config: {env_id: CartPole-v1, stop: {env_steps: 50000}}
    grid: {lr: [0.001, 0.0003], stop.env_steps: [20000, 50000]}
    seeds: [0, 1, 2]
    max_parallel: 2
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from app.service_cli import Client, CliError, _fmt, load_config

SWEEP_FIELDS = {"name", "config", "grid", "seeds", "max_parallel"}


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    sweep = sub.add_parser("sweep", help="grid x seeds sweeps (submit, show, stop)")
    actions = sweep.add_subparsers(dest="sweep_command", required=True)
    submit = actions.add_parser("submit", parents=[common], help="submit a sweep file")
    submit.add_argument("file", help="a sweep file (.yaml, .json): name, config, grid, seeds")
    submit.add_argument("--name", help="overrides the file's name")
    show = actions.add_parser("show", parents=[common], help="a sweep's groups, ranked")
    show.add_argument("id", type=int)
    stop = actions.add_parser("stop", parents=[common], help="stop every member of a sweep")
    stop.add_argument("id", type=int)


def cmd_sweep(args: argparse.Namespace, client: Client) -> int:
    if args.sweep_command == "submit":
        return _submit(args, client)
    if args.sweep_command == "show":
        return _show(args.id, client)
    sweep = client.json("POST", f"/sweeps/{args.id}/stop")
    print(f"sweep {sweep['id']}: {sweep['status']} ({_counts(sweep)})")
    return 0


def _submit(args: argparse.Namespace, client: Client) -> int:
    body = load_config(args.file)
    unknown = sorted(set(body) - SWEEP_FIELDS)
    if unknown:
        raise CliError(
            f"{args.file}: unknown keys {', '.join(unknown)} (a sweep file holds "
            f"{', '.join(sorted(SWEEP_FIELDS))}; PPO fields go under `config`)",
            code=2,
        )
    body["name"] = args.name or body.get("name") or Path(args.file).stem
    sweep = client.json("POST", "/sweeps", json=body)
    print(f"sweep {sweep['id']}: {sweep['size']} experiments in {len(sweep['groups'])} groups")
    return 0


def _counts(sweep: dict[str, Any]) -> str:
    return ", ".join(f"{n} {status}" for status, n in sorted(sweep["counts"].items()))


def _show(sweep_id: int, client: Client) -> int:
    sweep = client.json("GET", f"/sweeps/{sweep_id}")
    metrics = client.json("GET", f"/sweeps/{sweep_id}/metrics", params={"points": 50})
    groups = metrics["metrics"]["episode_return_mean"]["groups"]
    print(f"sweep {sweep['id']} {sweep['name']!r}: {sweep['status']} ({_counts(sweep)})")
    print(f"{'RANK':>4}  {'FINAL MEAN':>10}  {'MIN':>8}  {'MAX':>8}  {'SEEDS':>5}  GROUP")
    ranked = sorted(groups, key=lambda g: (g["final"]["mean"] is None, -(g["final"]["mean"] or 0)))
    for rank, g in enumerate(ranked, 1):
        f = g["final"]
        print(
            f"{rank:>4}  {_fmt(f['mean'], 2):>10}  {_fmt(f['min'], 2):>8}  "
            f"{_fmt(f['max'], 2):>8}  {f['n']:>2}/{len(g['member_ids']):<2}  "
            f"{g['label'] or 'all seeds'}"
        )
    print(f"\n{'ID':>5}  {'STATUS':<10} {'STEPS':>10}  {'RETURN':>8}  NAME")
    for e in sweep["members"]:
        print(
            f"{e['id']:>5}  {e['status']:<10} {e['env_steps'] or 0:>10}  "
            f"{_fmt(e['episode_return_mean']):>8}  {e['name']}"
        )
    return 0
