"""`rollout study submit | list | show | best | stop | delete`: hyperparameter studies (Optuna
search with pruning) on the service.

A study file (YAML or JSON) holds what POST /api/v1/studies takes (docs/examples/study.yaml):

    name: cartpole ppo search
    config: {env_id: CartPole-v1, stop: {env_steps: 50000}}
    space:
      lr: {type: float, low: 0.0001, high: 0.003, log: true}
      model.hidden_sizes: {type: categorical, choices: [[64, 64], [128, 128]]}
    n_trials: 16
    max_parallel: 2
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from app.client import APIError, RolloutClient
from app.commands.common import command_group, fmt
from app.commands.groups import add_stop_and_delete, counts_text, read_group_file
from app.studies.schemas import StudyCreate, StudyDetail, TrialPublic
from trainer.inputs import CliError

STUDY_FIELDS = frozenset(StudyCreate.model_fields)
NO_TRIALS = "no trials"


def _value(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return json.dumps(value, separators=(", ", ": "))


def _params(params: dict[str, Any]) -> str:
    return ", ".join(f"{key}={_value(value)}" for key, value in params.items()) or "-"


def cmd_submit(args: argparse.Namespace, client: RolloutClient) -> int:
    hint = "PPO fields go under `config`, searched ones under `space`"
    body = read_group_file(args.file, STUDY_FIELDS, "study", hint, args.name)
    study = client.create_study(body)
    print(f"study {study.id}: {study.n_trials} trials, at most {study.max_parallel} at a time")
    print(f"watch it: {client.url}/#/studies/{study.id} or `rollout study show {study.id}`")
    return 0


def cmd_list(args: argparse.Namespace, client: RolloutClient) -> int:
    print(f"{'ID':>5}  {'STATUS':<10} {'TRIALS':>7}  {'BEST':>10}  {'CREATED':<19}  NAME")
    for study in client.studies(limit=args.limit).items:
        created = study.created_at.isoformat(timespec="seconds")[:19]
        trials = f"{sum(study.counts.values())}/{study.n_trials}"
        print(
            f"{study.id:>5}  {study.status:<10} {trials:>7}  {fmt(study.best_value, 2):>10}  "
            f"{created:<19}  {study.name}"
        )
    return 0


def _trial_row(trial: TrialPublic) -> list[str]:
    run = "-" if trial.experiment_id is None else str(trial.experiment_id)
    row = [
        f"{trial.number:>4}  {trial.state:<8}  {fmt(trial.value, 2):>8}  "
        f"{fmt(trial.latest, 2):>8}  {trial.env_steps or 0:>10}  {run:>5}  "
        f"{_params(trial.params)}"
    ]
    if trial.note:
        row.append(f"{'':>6}note: {trial.note}")
    return row


def _header(study: StudyDetail) -> list[str]:
    goal = study.objective
    reduce = f"mean of the last {goal.k}" if goal.reduce == "last_k" else "final"
    return [
        f"study {study.id} {study.name!r}: {study.status} ({counts_text(study.counts, NO_TRIALS)}; "
        f"{len(study.trials)}/{study.n_trials} trials, at most {study.max_parallel} at a time)",
        f"objective   {goal.direction} {goal.metric} ({reduce})",
        f"search      {study.sampler.kind} sampler, {study.pruner.kind} pruner, "
        f"an intermediate value every {study.interval_env_steps} env steps",
    ]


def cmd_show(args: argparse.Namespace, client: RolloutClient) -> int:
    study = client.study(args.id)
    lines = _header(study)
    best = next((t for t in study.trials if t.number == study.best_trial), None)
    if best is None:
        lines.append("best        - (no complete trial yet)")
    else:
        lines.append(
            f"best        trial {best.number}: {fmt(best.value, 2)} (run {best.experiment_id}; "
            f"{_params(best.params)})"
        )
    if study.importances:
        ranked = sorted(study.importances.items(), key=lambda kv: -kv[1])
        lines.append("importances " + ", ".join(f"{k} {v:.2f}" for k, v in ranked))
    else:
        lines.append("importances - (too few complete trials yet)")
    print("\n".join(lines))
    print(
        f"\n{'#':>4}  {'STATE':<8}  {'VALUE':>8}  {'LATEST':>8}  {'STEPS':>10}  {'RUN':>5}  PARAMS"
    )
    for trial in study.trials:
        print("\n".join(_trial_row(trial)))
    return 0


def cmd_best(args: argparse.Namespace, client: RolloutClient) -> int:
    """Exit 1, saying where the study stands, while no trial is complete."""
    try:
        best = client.best_trial(args.id)
    except APIError as exc:
        if exc.status != 404:
            raise
        study = client.study(args.id)  # a study that does not exist: its own 404
        raise CliError(
            f"study {study.id} has no complete trial yet "
            f"({study.status}: {counts_text(study.counts, NO_TRIALS)}); "
            f"see `rollout study show {study.id}`",
            code=1,
        ) from None
    if args.json:
        print(best.model_dump_json(indent=2))
        return 0
    trial = best.trial
    print(f"study {best.study_id}, best trial {trial.number}: {fmt(trial.value, 4)}")
    print(f"run         {trial.experiment_id if trial.experiment_id is not None else '-'}")
    print(f"params      {_params(trial.params)}")
    print("config")
    print(json.dumps(best.config, indent=2))
    return 0


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    add = command_group(
        sub, common, "study", "hyperparameter studies (submit, list, show, best, stop, delete)"
    )

    submit = add("submit", cmd_submit, "submit a study file")
    submit.add_argument(
        "file", help="a study file (.yaml, .json): name, config, space, n_trials, ..."
    )
    submit.add_argument("--name", help="overrides the file's name")
    add("list", cmd_list, "studies, newest first").add_argument("--limit", type=int, default=50)
    add("show", cmd_show, "a study's trials, best trial and importances").add_argument(
        "id", type=int
    )
    best = add("best", cmd_best, "the best complete trial and its config (exit 1 if none)")
    best.add_argument("id", type=int)
    best.add_argument("--json", action="store_true", help="the best trial and config as JSON")
    helps = (
        "suggest no more trials and stop the running ones",
        "delete a finished study, its trials and their runs",
    )
    stop, delete = RolloutClient.stop_study, RolloutClient.delete_study
    add_stop_and_delete(add, "study", stop, delete, helps, NO_TRIALS)
