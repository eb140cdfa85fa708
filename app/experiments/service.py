"""Experiments: create, query, lifecycle transitions, job tokens, logs, delete, resume, fork.

Every function takes a SQLAlchemy session (its caller owns the transaction) and raises domain
errors from app.core.errors. Status changes go through `transition`, which records an event
and publishes the change to live subscribers once the transaction commits.

The jobs domain plugs in through `JobsControl`: the API calls `on_created` after a create and
`request_stop` after a stop request. When jobs are disabled there is no JobsControl at all and
created experiments simply stay `pending`.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Protocol

from sqlalchemy import delete, exists, select
from sqlalchemy.orm import Session, lazyload

from app.core.auth import JobTokens
from app.core.db import get_row, publish_after_commit, rows_where, utcnow
from app.core.errors import Conflict, InvalidInput, NotFound
from app.core.lifecycle import Lifecycle
from app.core.params import MAX_ID
from app.core.stored_config import StaleConfig
from app.experiments.lifecycle import ALLOWED, ExperimentStatus
from app.experiments.models import Experiment, ExperimentEvent, ExperimentTag, LogLine
from app.experiments.progress import to_public
from app.experiments.schemas import (
    ExperimentCreate,
    ExperimentFork,
    ExperimentResume,
    ExperimentUpdate,
)
from app.live.messages import DeletedMessage, ExperimentMessage, LogMessage, StatusMessage
from app.live.topics import ALL_EXPERIMENTS, experiment_topic
from app.presets import service as presets
from trainer.config import PPOConfig
from trainer.resolve import deep_merge
from trainer.wire import ExperimentSpec

S = ExperimentStatus
log = logging.getLogger(__name__)
LOG_TAIL_MAX_LINES = 2000
DEFAULT_MAX_LOG_LINES = 10_000
LOG_LINE_MAX_CHARS = 10_000
PROGRESS_ANNOUNCE_S = 1.0
RESUMED_FROM = "resumed from checkpoint"  # how a resumed run's creation event begins


class JobsControl(Protocol):
    """What the experiments API asks of the jobs runtime (app.jobs.runtime.JobsRuntime)."""

    async def on_created(self, experiment_id: int) -> None:
        """A new pending experiment exists: queue / launch it."""

    async def request_stop(self, experiment_id: int) -> None:
        """The experiment is `stopping`: stop its Ray job (the job reports `stopped`)."""


# --- config -----------------------------------------------------------------------------------


def validate_config(raw: dict[str, Any]) -> PPOConfig:
    """The resolved config (PPOConfig defaults < the env family's preset < `raw`): what is
    stored and returned. Every bad field is named as `config.<path>` in the 422."""
    return presets.resolve(raw).config


# --- queries ----------------------------------------------------------------------------------


def get(
    session: Session, experiment_id: int, *, lock: bool = False, tags: bool = True
) -> Experiment:
    """The experiment; `tags=False` loads its tags only if something reads them (the job
    routes, a hot path, mostly do not)."""
    options = () if tags else (lazyload(Experiment.tags),)
    return get_row(session, Experiment, experiment_id, "experiment", lock=lock, options=options)


def require(session: Session, experiment_id: int) -> None:
    """NotFound unless the experiment exists: one indexed lookup, without loading the row and
    its tags (for routes that only read what belongs to it)."""
    if session.scalar(select(Experiment.id).where(Experiment.id == experiment_id)) is None:
        raise NotFound(f"experiment {experiment_id} does not exist")


def parse_statuses(values: list[str]) -> list[ExperimentStatus]:
    """`?status=a&status=b` or `?status=a,b` -> statuses; unknown names are a 422."""
    names = [n.strip() for value in values for n in value.split(",") if n.strip()]
    try:
        return [ExperimentStatus(n) for n in names]
    except ValueError:
        allowed = ", ".join(s.value for s in ExperimentStatus)
        raise InvalidInput(
            "unknown status", fields=[{"field": "status", "message": f"one of: {allowed}"}]
        ) from None


def list_experiments(
    session: Session,
    *,
    status: list[ExperimentStatus] | None = None,
    tag: str | None = None,
    tag_contains: str | None = None,
    name: str | None = None,
    limit: int = 50,
    cursor: str | None = None,
) -> tuple[list[Experiment], str | None]:
    """Newest first; the cursor is the id of the last item of the previous page. `tag` is an
    exact tag; `tag_contains` and `name` match a part, ignoring case."""
    stmt = select(Experiment).order_by(Experiment.id.desc()).limit(limit + 1)
    if status:
        stmt = stmt.where(Experiment.status.in_(status))
    if tag:
        stmt = stmt.where(
            exists().where(ExperimentTag.experiment_id == Experiment.id, ExperimentTag.tag == tag)
        )
    if tag_contains:
        part = _like_pattern(tag_contains)
        stmt = stmt.where(
            exists().where(
                ExperimentTag.experiment_id == Experiment.id,
                ExperimentTag.tag.ilike(part, escape="\\"),
            )
        )
    if name:
        stmt = stmt.where(Experiment.name.ilike(_like_pattern(name), escape="\\"))
    if cursor:
        stmt = stmt.where(Experiment.id < _parse_cursor(cursor))
    rows = list(session.scalars(stmt))
    next_cursor = str(rows[limit - 1].id) if len(rows) > limit else None
    return rows[:limit], next_cursor


def _like_pattern(part: str) -> str:
    """`%part%` with LIKE's own characters escaped (backslash as the escape)."""
    escaped = part.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def _parse_cursor(cursor: str) -> int:
    """A cursor is an experiment id (as a string): within the id range, or a 422."""
    try:
        before = int(cursor)
    except ValueError:
        before = None
    if before is None or not 1 <= before <= MAX_ID:
        raise InvalidInput(
            "invalid cursor",
            fields=[{"field": "cursor", "message": "not a cursor from next_cursor"}],
        )
    return before


def events(session: Session, experiment_id: int) -> list[ExperimentEvent]:
    require(session, experiment_id)
    where = ExperimentEvent.experiment_id == experiment_id
    return rows_where(session, ExperimentEvent, where, ExperimentEvent.id)


# --- create / lifecycle -------------------------------------------------------------------------


def create(
    session: Session,
    data: ExperimentCreate,
    *,
    parent_id: int | None = None,
    resume_from_checkpoint_id: int | None = None,
    reason: str = "created",
    sweep_id: int | None = None,
    sweep_group: int | None = None,
    sweep_point: dict[str, Any] | None = None,
) -> Experiment:
    config = validate_config(data.config)
    if data.parent_id is not None and parent_id is None:
        if session.get(Experiment, data.parent_id) is None:
            message = f"no experiment {data.parent_id} to fork from"
            raise InvalidInput(
                "invalid experiment", fields=[{"field": "parent_id", "message": message}]
            )
        parent_id = data.parent_id
        reason = f"forked from experiment {parent_id}"
    exp = Experiment(
        sweep_id=sweep_id,
        sweep_group=sweep_group,
        sweep_point=sweep_point,
        name=data.name,
        config=config,
        evaluation_every=data.evaluation_every,
        status=S.pending,
        parent_id=parent_id,
        resume_from_checkpoint_id=resume_from_checkpoint_id,
        tags=[ExperimentTag(tag=t) for t in data.tags],
    )
    session.add(exp)
    session.flush()
    _record(session, exp, None, reason)
    return exp


def children(session: Session, experiment_id: int) -> list[tuple[Experiment, bool]]:
    """Runs made from this one, oldest first, each with whether it resumed from one of its
    checkpoints (else it was forked). The creation event says which: a resumed run's
    checkpoint reference is released once that checkpoint goes."""
    stmt = select(Experiment).where(Experiment.parent_id == experiment_id)
    kids = list(session.scalars(stmt.order_by(Experiment.id)))
    if not kids:
        return []
    created = select(ExperimentEvent.experiment_id, ExperimentEvent.reason).where(
        ExperimentEvent.experiment_id.in_([k.id for k in kids]),
        ExperimentEvent.from_status.is_(None),
    )
    resumed = {i for i, reason in session.execute(created) if reason.startswith(RESUMED_FROM)}
    return [(k, k.id in resumed or k.resume_from_checkpoint_id is not None) for k in kids]


def _record(
    session: Session, exp: Experiment, previous: ExperimentStatus | None, reason: str
) -> None:
    """An experiment's move: its event row, a server log line and, after commit, its live
    message."""
    target = exp.status
    event = ExperimentEvent(
        experiment_id=exp.id,
        from_status=previous.value if previous else None,
        to_status=target.value,
        reason=reason,
        at=utcnow(),
    )
    session.add(event)
    session.flush()
    # The server log's application events, one line per transition (uvicorn's log shows
    # requests only): "experiment 12 failed: job exited with code 1 (ValueError: ...)".
    error = f" ({exp.error.splitlines()[0][:300]})" if target == S.failed and exp.error else ""
    log.info("experiment %d %s: %s%s", exp.id, target.value, reason, error)
    publish_after_commit(
        session,
        experiment_topic(exp.id),
        StatusMessage(
            experiment_id=exp.id,
            status=target,
            from_status=event.from_status,
            reason=reason,
            at=event.at,
            error=exp.error,
        ),
    )
    announce(session, exp)


LIFECYCLE = Lifecycle[Experiment](
    "experiment", ExperimentStatus, ALLOWED, lambda s, i: get(s, i, lock=True), _record
)
# Move an experiment to a status, record the event and publish it after commit (see Lifecycle).
transition = LIFECYCLE.transition


def announce(session: Session, exp: Experiment) -> None:
    """Tell list-page subscribers the experiment's current summary (after commit)."""
    publish_after_commit(
        session,
        ALL_EXPERIMENTS,
        ExperimentMessage(experiment=to_public(exp)),
    )


def announce_progress(session: Session, exp: Experiment) -> None:
    """`announce` for new metrics, at most once per PROGRESS_ANNOUNCE_S per experiment (per
    API process): a list page shows no more than that, and twenty runs at a few iterations a
    second would otherwise send every list page dozens of summaries a second. A skipped
    summary is not sent later: the list shows an iteration that came within a second of the
    one before it with the next announcement, or with the next status change (`transition`
    announces at once), and a page load reads the stored row."""
    announced: dict[int, float] | None = session.info.get("progress_announced")
    if announced is not None:
        now = time.monotonic()
        if now - announced.get(exp.id, -PROGRESS_ANNOUNCE_S) < PROGRESS_ANNOUNCE_S:
            return
        announced[exp.id] = now
    announce(session, exp)


def request_stop(session: Session, experiment_id: int, reason: str | None = None) -> Experiment:
    """Stop at once before start; a running experiment goes to `stopping` for its job.
    `reason` says who stops it when that is not the user (a study pruning its trial)."""
    exp = get(session, experiment_id, lock=True)
    if exp.status in (S.pending, S.queued):
        why = f"{reason}, before start" if reason else "stopped by user before start"
        return transition(session, experiment_id, S.stopped, why)
    if exp.status == S.running:
        return transition(session, experiment_id, S.stopping, reason or "stop requested by user")
    if exp.status == S.stopping:
        return exp
    raise Conflict(f"experiment {experiment_id} already ended ({exp.status.value})")


# --- job tokens ---------------------------------------------------------------------------------


def _job_row(session: Session, experiment_id: int, *, lock: bool = False) -> Experiment:
    return get(session, experiment_id, lock=lock, tags=False)


JOB_TOKENS = JobTokens("experiment", _job_row, lambda e: e.status in (S.running, S.stopping))
issue_job_token = JOB_TOKENS.issue
issue_job_claim = JOB_TOKENS.claim
redeem_job_claim = JOB_TOKENS.redeem
authorize_job = JOB_TOKENS.authorize


def job_spec(exp: Experiment) -> ExperimentSpec:
    """What the experiment's job runs, typed. Its config was validated when it was stored; one
    stored by an older version that no longer validates is a 409 naming its fields (the
    reconciler fails such an experiment before it launches)."""
    if isinstance(exp.config, StaleConfig):
        raise Conflict(
            "the experiment's stored config no longer validates", fields=exp.config.errors
        )
    return ExperimentSpec(
        experiment_id=exp.id,
        name=exp.name,
        config=exp.config,
        resume_from_checkpoint_id=exp.resume_from_checkpoint_id,
    )


# --- logs ---------------------------------------------------------------------------------------


def append_logs(
    session: Session, experiment_id: int, lines: list[str], *, keep: int | None = None
) -> int:
    """Store log lines, then drop all but the newest `keep` of the experiment (default: the
    service's `max_log_lines_per_experiment`, carried in the session's info)."""
    now = utcnow()
    lines = [_shorten_line(line) for line in lines]
    session.add_all(LogLine(experiment_id=experiment_id, at=now, line=line) for line in lines)
    if lines:
        session.flush()
        _prune_logs(session, experiment_id, keep or _log_limit(session))
        publish_after_commit(
            session,
            experiment_topic(experiment_id),
            LogMessage(experiment_id=experiment_id, lines=lines),
        )
    return len(lines)


def _log_limit(session: Session) -> int:
    settings = session.info.get("settings")
    return getattr(settings, "max_log_lines_per_experiment", DEFAULT_MAX_LOG_LINES)


def _shorten_line(line: str) -> str:
    if len(line) <= LOG_LINE_MAX_CHARS:
        return line
    return line[:LOG_LINE_MAX_CHARS] + " [truncated]"


def _prune_logs(session: Session, experiment_id: int, keep: int) -> None:
    """Delete the experiment's lines older than its newest `keep` (one index walk)."""
    oldest_kept = (
        select(LogLine.id)
        .where(LogLine.experiment_id == experiment_id)
        .order_by(LogLine.id.desc())
        .offset(keep - 1)
        .limit(1)
        .scalar_subquery()
    )
    session.execute(
        delete(LogLine).where(LogLine.experiment_id == experiment_id, LogLine.id < oldest_kept)
    )


def tail_logs(session: Session, experiment_id: int, tail: int) -> list[str]:
    require(session, experiment_id)
    stmt = (
        select(LogLine.line)
        .where(LogLine.experiment_id == experiment_id)
        .order_by(LogLine.id.desc())
        .limit(min(tail, LOG_TAIL_MAX_LINES))
    )
    return list(reversed(session.scalars(stmt).all()))


# --- delete / resume / fork ---------------------------------------------------------------------


def delete_experiment(session: Session, experiment_id: int) -> Experiment:
    """Delete a finished experiment's rows (its checkpoint and job files are the caller's
    to remove, after the commit).

    Refused while another, unfinished experiment will resume from one of its checkpoints;
    finished experiments that resumed from one keep `parent_id` and lose the reference.
    """
    from app.checkpoints.models import Checkpoint
    from app.checkpoints.service import pinned, release
    from app.metrics.models import MetricPoint, MetricRollup

    exp = get(session, experiment_id, lock=True)
    if not exp.status.is_finished:
        raise Conflict(
            f"experiment {experiment_id} is {exp.status.value}; stop it before deleting it"
        )
    checkpoint_ids = list(
        session.scalars(select(Checkpoint.id).where(Checkpoint.experiment_id == experiment_id))
    )
    pins = pinned(session, checkpoint_ids)
    if pins:
        checkpoint_id, resumer = next(iter(pins.items()))
        raise Conflict(
            f"experiment {resumer.id} ({resumer.status.value}) will resume from checkpoint "
            f"{checkpoint_id} of experiment {experiment_id}; stop or delete it first"
        )
    release(session, checkpoint_ids)
    for model in (MetricPoint, MetricRollup, LogLine, ExperimentEvent, Checkpoint, ExperimentTag):
        session.execute(delete(model).where(model.experiment_id == experiment_id))
    session.delete(exp)
    publish_after_commit(session, ALL_EXPERIMENTS, DeletedMessage(experiment_id=experiment_id))
    return exp


def resume(
    session: Session, experiment_id: int, request: ExperimentResume | None = None
) -> Experiment:
    """A new experiment that continues from the latest checkpoint of this one, under the
    request's stop criteria where it gives them."""
    from app.checkpoints.service import latest_checkpoint

    # Locked: a concurrent delete or retention of the source waits for this resume to commit
    # (and then sees the new reference), so it cannot remove the checkpoint under it.
    source = get(session, experiment_id, lock=True)
    checkpoint = latest_checkpoint(session, experiment_id)
    if checkpoint is None:
        raise Conflict(f"experiment {experiment_id} has no checkpoint to resume from")
    config = source.config.to_json_dict()
    if request is not None and request.stop:
        config = deep_merge(config, {"stop": request.stop})
    budget = validate_config(config).stop.env_steps  # a bad stop field is its own 422 first
    if budget is not None and checkpoint.env_steps >= budget:
        # The trainer would stop after one iteration: say why instead of starting it.
        message = (
            f"the latest checkpoint is at {checkpoint.env_steps:,} env steps, already at the "
            f"budget of {budget:,}: give a higher stop.env_steps to train on (`rollout resume "
            f"{experiment_id} --stop-steps N`)"
        )
        raise InvalidInput(
            "nothing to resume", fields=[{"field": "stop.env_steps", "message": message}]
        )
    data = ExperimentCreate(
        name=f"{source.name} (resumed)"[:200],
        config=config,
        tags=source.tag_names,
        evaluation_every=source.evaluation_every,
    )
    return create(
        session,
        data,
        parent_id=source.id,
        resume_from_checkpoint_id=checkpoint.id,
        reason=f"{RESUMED_FROM} {checkpoint.id} (iteration {checkpoint.iteration}) "
        f"of experiment {source.id}",
    )


def update(session: Session, experiment_id: int, request: ExperimentUpdate) -> Experiment:
    """Rename, retag or annotate an experiment (any status); list pages hear of it."""
    exp = get(session, experiment_id, lock=True)
    given = request.model_fields_set
    if "name" in given:
        if request.name is None:
            raise InvalidInput(
                "invalid experiment", fields=[{"field": "name", "message": "cannot be null"}]
            )
        exp.name = request.name
    if "tags" in given:
        wanted = request.tags or []
        exp.tags = [t for t in exp.tags if t.tag in wanted] + [
            ExperimentTag(tag=t) for t in wanted if t not in exp.tag_names
        ]
    if "notes" in given:
        exp.notes = request.notes or None
    exp.updated_at = utcnow()
    session.flush()
    session.refresh(exp, ["tags"])
    announce(session, exp)
    return exp


def fork(session: Session, experiment_id: int, request: ExperimentFork) -> Experiment:
    """A new experiment with the source's config and `overrides` merged in."""
    source = get(session, experiment_id)
    config = deep_merge(source.config.to_json_dict(), request.overrides)
    tags = source.tag_names if request.tags is None else request.tags
    every = (
        source.evaluation_every if request.evaluation_every is None else request.evaluation_every
    )
    data = ExperimentCreate(
        name=request.name or f"{source.name} (fork)"[:200],
        config=config,
        tags=tags,
        evaluation_every=source.evaluation_every if every is None else every,
    )
    return create(session, data, parent_id=source.id, reason=f"forked from {source.id}")
