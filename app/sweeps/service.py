"""Sweeps: create (one transaction: the sweep and all its members, or nothing), query, stop,
delete, and the per-group metrics.

Members are ordinary experiments created through the experiments service, so they are queued,
launched and stopped like any other (the reconciler's one FIFO queue; `max_parallel` caps how
many of one sweep run at once, see app.jobs.reconciler). Functions take a session (the caller
owns the transaction) and raise domain errors.
"""

from __future__ import annotations

from collections import Counter, defaultdict

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.db import get_row, utcnow
from app.core.errors import Conflict, InvalidInput
from app.core.from_row import from_row
from app.core.stored_config import top_level_int
from app.experiments import service as experiments
from app.experiments.lifecycle import ExperimentStatus
from app.experiments.models import Experiment
from app.experiments.progress import to_public as experiment_public
from app.experiments.schemas import ExperimentCreate
from app.sweeps import aggregate, grid
from app.sweeps.metrics import GroupRef, MemberRef, group_metrics
from app.sweeps.models import Sweep
from app.sweeps.schemas import SweepCreate, SweepDetail, SweepGroup, SweepMetrics, SweepPublic

S = ExperimentStatus
MAX_NAMES = 8


def get(session: Session, sweep_id: int, *, lock: bool = False) -> Sweep:
    return get_row(session, Sweep, sweep_id, "sweep", lock=lock)


def members(session: Session, sweep_id: int) -> list[Experiment]:
    stmt = select(Experiment).where(Experiment.sweep_id == sweep_id).order_by(Experiment.id)
    return list(session.scalars(stmt))


def member_name(sweep_name: str, point_label: str, seed: int) -> str:
    inner = f"{point_label}, seed={seed}" if point_label else f"seed={seed}"
    return f"{sweep_name} [{inner}]"[:200]


def create(session: Session, data: SweepCreate) -> Sweep:
    """The sweep and one pending experiment per grid point x seed; InvalidInput (nothing
    stored) when any key, value or member config is bad."""
    plan = grid.plan(data)
    sweep = Sweep(**data.model_dump())  # every field of the request is a column
    session.add(sweep)
    session.flush()
    for member in plan.members:
        body = ExperimentCreate(
            name=member_name(data.name, grid.label(member.point), member.seed),
            config=member.config.to_json_dict(),
            evaluation_every=data.evaluation_every,
        )
        experiments.create(
            session,
            body,
            reason=f"created by sweep {sweep.id}",
            sweep_id=sweep.id,
            sweep_group=member.group,
            sweep_point=member.point,
        )
    return sweep


def list_sweeps(session: Session, limit: int = 100) -> list[tuple[Sweep, Counter[str]]]:
    """Newest first, each with its members' status counts."""
    sweeps = list(session.scalars(select(Sweep).order_by(Sweep.id.desc()).limit(limit)))
    counts: dict[int, Counter[str]] = defaultdict(Counter)
    if sweeps:
        rows = session.execute(
            select(Experiment.sweep_id, Experiment.status).where(
                Experiment.sweep_id.in_([s.id for s in sweeps])
            )
        )
        for sweep_id, status in rows:
            counts[sweep_id][status.value] += 1
    return [(s, counts[s.id]) for s in sweeps]


def sweep_status(counts: Counter[str]) -> str:
    """The sweep's status from its members' (see SweepPublic.status)."""
    for status in (S.running, S.stopping):
        if counts[status.value]:
            return status.value
    if counts[S.pending.value] or counts[S.queued.value]:
        return S.queued.value
    if counts[S.stopped.value]:
        return S.stopped.value
    if counts[S.failed.value]:
        return S.failed.value
    return S.succeeded.value


def to_public(sweep: Sweep, counts: Counter[str]) -> SweepPublic:
    return from_row(
        SweepPublic,
        sweep,
        status=sweep_status(counts),
        counts=dict(counts),
        size=sum(counts.values()),
    )


def _groups(sweep: Sweep, rows: list[Experiment]) -> list[GroupRef]:
    by_group: dict[int, list[Experiment]] = defaultdict(list)
    for exp in rows:
        by_group[exp.sweep_group or 0].append(exp)
    return [
        GroupRef(
            index=index,
            point=dict(exps[0].sweep_point or {}),
            members=[MemberRef(e.id, index, top_level_int(e.config, "seed")) for e in exps],
        )
        for index, exps in sorted(by_group.items())
    ]


def detail(session: Session, sweep: Sweep) -> SweepDetail:
    rows = members(session, sweep.id)
    counts = Counter(e.status.value for e in rows)
    groups = [
        SweepGroup(
            index=g.index,
            point=g.point,
            label=grid.label(g.point),
            member_ids=[m.id for m in g.members],
        )
        for g in _groups(sweep, rows)
    ]
    return SweepDetail(
        **to_public(sweep, counts).model_dump(),
        groups=groups,
        members=[experiment_public(e) for e in rows],
    )


def stop(session: Session, sweep_id: int) -> list[int]:
    """Stop every unfinished member (waiting ones end at once and never start); returns the
    ids now `stopping`, whose jobs the caller stops after the commit."""
    sweep = get(session, sweep_id, lock=True)
    stopping = []
    for exp in members(session, sweep.id):
        if exp.status.is_finished:
            continue
        exp = experiments.request_stop(session, exp.id)
        if exp.status == S.stopping:
            stopping.append(exp.id)
    sweep.updated_at = utcnow()
    return stopping


def delete(session: Session, sweep_id: int) -> list[int]:
    """Delete a sweep whose members have all ended, and its members (like deleting each one);
    returns their ids, whose files the caller removes after the commit."""
    sweep = get(session, sweep_id, lock=True)
    rows = members(session, sweep.id)
    unfinished = [e for e in rows if not e.status.is_finished]
    if unfinished:
        ids = ", ".join(str(e.id) for e in unfinished[:10])
        raise Conflict(
            f"sweep {sweep_id} still has {len(unfinished)} unfinished members ({ids}); "
            "stop the sweep before deleting it"
        )
    for exp in rows:
        experiments.delete_experiment(session, exp.id)
    session.flush()
    session.delete(sweep)
    return [e.id for e in rows]


def parse_names(names: str | None) -> list[str]:
    wanted = [n.strip() for n in (names or "episode_return_mean").split(",") if n.strip()]
    if not wanted or len(wanted) > MAX_NAMES:
        raise InvalidInput(
            "names must list 1 to 8 metric names",
            fields=[{"field": "names", "message": f"1 to {MAX_NAMES} comma-separated names"}],
        )
    return wanted


def metrics(session: Session, sweep: Sweep, names: list[str], points: int) -> SweepMetrics:
    groups = _groups(sweep, members(session, sweep.id))
    connection = session.connection()
    return SweepMetrics(
        sweep_id=sweep.id,
        grid_keys=list(sweep.grid),
        confidence=aggregate.CONFIDENCE,
        bootstrap_resamples=aggregate.BOOTSTRAP_RESAMPLES,
        bootstrap_seed=aggregate.BOOTSTRAP_SEED,
        metrics={name: group_metrics(connection, groups, name, points) for name in names},
    )
