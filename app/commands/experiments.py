"""`rollout submit | list | show | logs | wait | watch | stop | resume | fork | delete |
download`: experiments on the service."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from app.client import (
    CheckpointMessage,
    LiveMessage,
    LogMessage,
    MetricsMessage,
    RolloutClient,
    ServiceUnreachable,
    StatusMessage,
    WaitTimeout,
)
from app.commands.common import adder, fmt
from app.experiments.lifecycle import ExperimentStatus
from app.experiments.schemas import ExperimentPublic
from trainer.inputs import (
    CliError,
    add_stop_flags,
    parse_assignments,
    read_config,
    read_submission,
    stop_overrides,
)
from trainer.resolve import deep_merge

WATCH_RECONNECTS = 5


def cmd_submit(args: argparse.Namespace, client: RolloutClient) -> int:
    """A bare config file or a `{name, tags, evaluation_every, config}` document (what the
    browser's form loads and saves); --name, --tag and --evaluation-every win over the
    document's."""
    doc = read_submission(args.config)
    name = args.name or doc.name or Path(args.config).stem
    tags = doc.tags if args.tag is None else args.tag
    every = doc.evaluation_every if args.evaluation_every is None else args.evaluation_every
    print(client.submit(doc.config, name=name, tags=tags, evaluation_every=every).id)
    return 0


def cmd_list(args: argparse.Namespace, client: RolloutClient) -> int:
    page = client.list_experiments(
        status=args.status,
        tag=args.tag,
        tag_contains=args.tag_contains,
        name=args.name,
        limit=args.limit,
    )
    print(f"{'ID':>5}  {'STATUS':<10} {'PROGRESS':>8}  {'STEPS':>10}  {'RETURN':>8}  NAME")
    for e in page.items:
        print(
            f"{e.id:>5}  {e.status.value:<10} {e.progress * 100:>7.0f}%  "
            f"{e.env_steps or 0:>10}  {fmt(e.episode_return_mean):>8}  {e.name}"
        )
    return 0


def _summary(e: ExperimentPublic) -> list[str]:
    lines = [
        f"experiment {e.id}: {e.name}" + (f"  [{', '.join(e.tags)}]" if e.tags else ""),
        f"status      {e.status.value}",
        f"progress    {e.progress * 100:.0f}%",
        f"env steps   {e.env_steps or 0}",
        f"return      {fmt(e.episode_return_mean, 2)} (best {fmt(e.best_return, 2)})",
        f"env         {e.config.get('env_id', '-')}",
        f"created     {e.created_at.isoformat(timespec='seconds')}",
    ]
    if e.parent_id is not None:
        lines.append(f"parent      {e.parent_id}")
    if e.error:
        lines.append(f"error       {e.error}")
    if e.notes:
        lines.append("notes")
        lines.extend(f"  {line}" for line in e.notes.splitlines())
    return lines


def cmd_show(args: argparse.Namespace, client: RolloutClient) -> int:
    exp = client.get(args.id)
    if args.json:
        print(exp.model_dump_json(indent=2))
        return 0
    print("\n".join(_summary(exp)))
    for event in exp.events:
        start = event.from_status.value if event.from_status else "-"
        when = event.at.isoformat(timespec="seconds")
        print(f"  {when}  {start} -> {event.to_status.value}: {event.reason}")
    return 0


def cmd_wait(args: argparse.Namespace, client: RolloutClient) -> int:
    """Block until the experiment ends; exit 0 only if it succeeded (3 on timeout)."""
    try:
        exp = client.wait(args.id, timeout=args.timeout)
    except WaitTimeout as exc:
        raise CliError(str(exc), code=3) from None
    print(_status_line(exp.status.value, exp.error))
    return 0 if exp.status.value == "succeeded" else 1


def cmd_stop(args: argparse.Namespace, client: RolloutClient) -> int:
    exp = client.stop(args.id)
    print(f"experiment {exp.id}: {exp.status.value}")
    return 0


def cmd_resume(args: argparse.Namespace, client: RolloutClient) -> int:
    """The stop flags replace the source's criteria for the new run (a run that met its
    env-step budget needs a larger one to train on)."""
    print(client.resume(args.id, stop=stop_overrides(args) or None).id)
    return 0


def cmd_fork(args: argparse.Namespace, client: RolloutClient) -> int:
    overrides: dict[str, Any] = read_config(args.config) if args.config else {}
    overrides = deep_merge(overrides, parse_assignments(args.set or []))
    fork = client.fork(
        args.id, overrides, name=args.name, tags=args.tag, evaluation_every=args.evaluation_every
    )
    print(fork.id)
    return 0


def cmd_edit(args: argparse.Namespace, client: RolloutClient) -> int:
    """Rename, retag (--tag replaces every tag; --no-tags drops them) or annotate."""
    if args.notes is not None and args.notes_file is not None:
        raise CliError("--notes and --notes-file exclude each other")
    notes = args.notes
    if args.notes_file is not None:
        try:
            notes = Path(args.notes_file).read_text()
        except OSError as exc:
            raise CliError(f"cannot read {args.notes_file}: {exc.strerror}") from None
    tags = [] if args.no_tags else args.tag
    if args.name is None and tags is None and notes is None:
        raise CliError("nothing to change: give --name, --tag, --no-tags, --notes or --notes-file")
    exp = client.update(args.id, name=args.name, tags=tags, notes=notes)
    print(f"experiment {exp.id}: {exp.name}" + (f"  [{', '.join(exp.tags)}]" if exp.tags else ""))
    return 0


def cmd_logs(args: argparse.Namespace, client: RolloutClient) -> int:
    for line in client.logs(args.id, tail=args.tail):
        print(line)
    return 0


def cmd_delete(args: argparse.Namespace, client: RolloutClient) -> int:
    client.delete(args.id)
    print(f"experiment {args.id}: deleted")
    return 0


def cmd_download(args: argparse.Namespace, client: RolloutClient) -> int:
    out = Path(args.output or f"experiment-{args.id}-{args.checkpoint}.tar.gz")
    print(client.download_checkpoint(args.id, args.checkpoint, out))
    return 0


def cmd_watch(args: argparse.Namespace, client: RolloutClient) -> int:
    """Follow an experiment live until it ends; exit 0 only if it succeeded.

    A dropped stream (service restart, a slow terminal) is resumed from the last step shown.
    """
    exp = client.get(args.id)
    if exp.status.is_finished:
        print(_status_line(exp.status.value, exp.error))
        return 0 if exp.status.value == "succeeded" else 1
    # Live progress only: skip the history older than the experiment's latest step.
    since = max(-1, (exp.env_steps or 0) - 1)
    total = (exp.config.get("stop") or {}).get("env_steps")
    problem = "the service closed the live stream"
    for attempt in range(WATCH_RECONNECTS + 1):
        if attempt:
            time.sleep(min(2.0**attempt, 10.0))
        try:
            for message in client.stream(args.id, since_step=since):
                if isinstance(message, MetricsMessage) and message.step:
                    since = max(since, message.step[-1])
                status = _show(message, total)
                if status is not None and status.is_finished:
                    return 0 if status.value == "succeeded" else 1
        except ServiceUnreachable as exc:
            problem = str(exc)
    raise CliError(problem, code=2)


def _status_line(status: str, error: str | None) -> str:
    return f"status: {status}" + (f"\n{error}" if error else "")


def _show(message: LiveMessage, total: int | None) -> ExperimentStatus | None:
    """Print one live message; returns the status of a status message."""
    if isinstance(message, MetricsMessage) and message.step:
        steps = f"{message.step[-1]}" + (f"/{total}" if total else "")
        ret = fmt(message.last("episode_return_mean"), 2)
        print(f"env_steps {steps}  episode_return_mean {ret}", flush=True)
    elif isinstance(message, StatusMessage):
        print(_status_line(message.status.value, message.error), flush=True)
        return message.status
    elif isinstance(message, CheckpointMessage):
        c = message.checkpoint
        print(f"checkpoint {c.id} (iteration {c.iteration})", flush=True)
    elif isinstance(message, LogMessage):
        for line in message.lines:
            print(f"| {line}", flush=True)
    return None


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    add = adder(sub, common)

    submit = add("submit", cmd_submit, "submit an experiment config")
    submit.add_argument(
        "config",
        help="a config file (.json, .yaml): PPO fields, or {name, tags, evaluation_every, config}",
    )
    submit.add_argument("--name")
    submit.add_argument("--tag", action="append")
    submit.add_argument(
        "--evaluation-every",
        type=int,
        metavar="N",
        help="watch it learn: a video of every N-th checkpoint as it trains (0: none)",
    )

    lst = add("list", cmd_list, "list experiments, newest first")
    lst.add_argument("--status")
    lst.add_argument("--tag", help="exactly this tag")
    lst.add_argument("--tag-contains", metavar="PART", help="a tag containing this (any case)")
    lst.add_argument("--name", metavar="PART", help="a name containing this (any case)")
    lst.add_argument("--limit", type=int, default=50)

    show = add("show", cmd_show, "an experiment's state and status timeline")
    show.add_argument("id", type=int)
    show.add_argument("--json", action="store_true", help="the full experiment as JSON")

    wait = add("wait", cmd_wait, "wait until an experiment ends (exit 0 iff it succeeded)")
    wait.add_argument("id", type=int)
    wait.add_argument("--timeout", type=float, help="seconds (exit 3 when it runs out)")

    watch = add("watch", cmd_watch, "follow an experiment live")
    watch.add_argument("id", type=int)

    edit = add("edit", cmd_edit, "rename, retag or annotate an experiment")
    edit.add_argument("id", type=int)
    edit.add_argument("--name")
    edit.add_argument("--tag", action="append", help="replaces every tag (repeat for more)")
    edit.add_argument("--no-tags", action="store_true", help="remove every tag")
    edit.add_argument("--notes", help='notes (markdown); "" clears them')
    edit.add_argument("--notes-file", help="notes from a file")

    logs = add("logs", cmd_logs, "the tail of an experiment's log")
    logs.add_argument("id", type=int)
    logs.add_argument("--tail", type=int, default=200, help="lines (at most 2000)")

    for name, handler, text in (
        ("stop", cmd_stop, "stop an experiment"),
        ("delete", cmd_delete, "delete a finished experiment and its files"),
    ):
        add(name, handler, text).add_argument("id", type=int)

    resume = add("resume", cmd_resume, "continue from the latest checkpoint (prints the new id)")
    resume.add_argument("id", type=int)
    add_stop_flags(resume)

    fork = add("fork", cmd_fork, "a new experiment from this one's config (prints the new id)")
    fork.add_argument("id", type=int)
    fork.add_argument("--set", action="append", metavar="FIELD=VALUE", help="e.g. lr=0.001")
    fork.add_argument("--config", help="a file of overrides (.json, .yaml)")
    fork.add_argument("--name")
    fork.add_argument("--tag", action="append")
    fork.add_argument(
        "--evaluation-every", type=int, metavar="N", help="replace the source's (0: no videos)"
    )

    download = add("download", cmd_download, "download a checkpoint")
    download.add_argument("id", type=int)
    download.add_argument("--checkpoint", default="best", help="best, latest or an id")
    download.add_argument("-o", "--output")
