"""`rollout sweep submit | list | show | stop | delete`: grid x seeds sweeps on the service.

A sweep file (YAML or JSON) holds what POST /api/v1/sweeps takes:

    name: cartpole lr
    config: {env_id: CartPole-v1, stop: {env_steps: 50000}}
    grid: {lr: [0.001, 0.0003], stop.env_steps: [20000, 50000]}
    seeds: [0, 1, 2]
    max_parallel: 2
"""

from __future__ import annotations

import argparse

from app.client import RolloutClient
from app.commands.common import command_group, fmt
from app.commands.groups import add_stop_and_delete, counts_text, read_group_file
from app.sweeps.schemas import GroupSeries, SweepCreate

SWEEP_FIELDS = frozenset(SweepCreate.model_fields)


def cmd_submit(args: argparse.Namespace, client: RolloutClient) -> int:
    hint = "PPO fields go under `config`"
    body = read_group_file(args.file, SWEEP_FIELDS, "sweep", hint, args.name)
    sweep = client.submit_sweep(body)
    print(f"sweep {sweep.id}: {sweep.size} experiments in {len(sweep.groups)} groups")
    return 0


def _rank_key(group: GroupSeries) -> tuple[bool, float]:
    mean = group.final.mean
    return (mean is None, -(mean or 0.0))


def cmd_show(args: argparse.Namespace, client: RolloutClient) -> int:
    sweep = client.sweep(args.id)
    groups = client.sweep_metrics(args.id, points=50).metrics["episode_return_mean"].groups
    print(f"sweep {sweep.id} {sweep.name!r}: {sweep.status} ({counts_text(sweep.counts)})")
    print(f"{'RANK':>4}  {'FINAL MEAN':>10}  {'MIN':>8}  {'MAX':>8}  {'SEEDS':>5}  GROUP")
    for rank, g in enumerate(sorted(groups, key=_rank_key), 1):
        f = g.final
        print(
            f"{rank:>4}  {fmt(f.mean, 2):>10}  {fmt(f.min, 2):>8}  {fmt(f.max, 2):>8}  "
            f"{f.n:>2}/{len(g.member_ids):<2}  {g.label or 'all seeds'}"
        )
    print(f"\n{'ID':>5}  {'STATUS':<10} {'STEPS':>10}  {'RETURN':>8}  NAME")
    for e in sweep.members:
        print(
            f"{e.id:>5}  {e.status.value:<10} {e.env_steps or 0:>10}  "
            f"{fmt(e.episode_return_mean):>8}  {e.name}"
        )
    return 0


def cmd_list(args: argparse.Namespace, client: RolloutClient) -> int:
    print(f"{'ID':>5}  {'STATUS':<10} {'SIZE':>4}  {'CREATED':<19}  NAME")
    for sweep in client.sweeps(limit=args.limit).items:
        created = sweep.created_at.isoformat(timespec="seconds")[:19]
        print(f"{sweep.id:>5}  {sweep.status:<10} {sweep.size:>4}  {created:<19}  {sweep.name}")
    return 0


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    add = command_group(
        sub, common, "sweep", "grid x seeds sweeps (submit, list, show, stop, delete)"
    )

    submit = add("submit", cmd_submit, "submit a sweep file")
    submit.add_argument("file", help="a sweep file (.yaml, .json): name, config, grid, seeds")
    submit.add_argument("--name", help="overrides the file's name")
    add("list", cmd_list, "sweeps, newest first").add_argument("--limit", type=int, default=50)
    add("show", cmd_show, "a sweep's groups, ranked").add_argument("id", type=int)
    helps = ("stop every member of a sweep", "delete a finished sweep and its experiments")
    add_stop_and_delete(add, "sweep", RolloutClient.stop_sweep, RolloutClient.delete_sweep, helps)
