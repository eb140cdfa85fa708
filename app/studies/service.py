"""Studies: create, query, stop, delete, and carry each one on (`advance`, one transaction).

Trials are ordinary experiments created through the experiments service: they wait in the
reconciler's one FIFO queue and launch like any run. `advance` is the study's whole loop, run by
the reconciler for every unfinished study: settle the trials whose runs ended (their objective
from the reported metrics), ask the pruner about running trials that passed a new interval
(a pruned run is stopped like a user's stop: its job saves a final checkpoint), and suggest
trials until `max_parallel` are active or `n_trials` exist. Functions take a session (the caller
owns the transaction) and raise domain errors.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from pydantic import ValidationError
from sqlalchemy import delete as sql_delete
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.db import get_row, utcnow
from app.core.errors import Conflict, NotFound
from app.core.from_row import from_row
from app.experiments import service as experiments
from app.experiments.lifecycle import ExperimentStatus
from app.experiments.models import Experiment
from app.experiments.schemas import ExperimentCreate
from app.studies import objective, search, space
from app.studies.models import Study, StudyTrial
from app.studies.schemas import (
    Objective,
    StudyBest,
    StudyCreate,
    StudyDetail,
    StudyPublic,
    TrialOf,
    TrialPublic,
)
from trainer.field_names import config_error_message

S = ExperimentStatus
ACTIVE = ("running", "pruning")


@dataclass
class Advance:
    """What one `advance` did that the caller acts on after the commit."""

    stopping: list[int] = field(default_factory=list)  # experiments whose jobs to stop
    created: int = 0  # new trials (pending experiments: wake the queue)


def get(session: Session, study_id: int, *, lock: bool = False) -> Study:
    return get_row(session, Study, study_id, "study", lock=lock)


def trials_of(session: Session, study_id: int) -> list[StudyTrial]:
    stmt = select(StudyTrial).where(StudyTrial.study_id == study_id).order_by(StudyTrial.number)
    return list(session.scalars(stmt))


def create(session: Session, data: StudyCreate) -> Study:
    """Store the study (no trial yet: the reconciler suggests them); InvalidInput, nothing
    stored, when its space, config, objective or pruner is bad."""
    checked = space.check(data)
    # Every field of the request is a column, stored as given (nested models as JSON).
    study = Study(**data.model_dump(), interval_env_steps=checked.interval_env_steps)
    session.add(study)
    session.flush()
    return study


def unfinished_ids(session: Session) -> list[int]:
    return list(session.scalars(select(Study.id).where(Study.finished_at.is_(None))))


# --- the study's loop ---------------------------------------------------------------------------


def advance(session: Session, study_id: int) -> Advance:
    """Settle ended trials, prune, suggest (see the module docstring)."""
    study = get(session, study_id, lock=True)
    trials = trials_of(session, study.id)
    runs = _experiments(session, trials)
    goal = Objective.model_validate(study.objective)
    out = Advance()
    changed = False
    grown: list[StudyTrial] = []
    for trial in trials:
        if trial.state in ACTIVE:
            moved, grew = _follow(session, study, goal, trial, runs.get(trial.experiment_id or 0))
            changed |= moved
            if grew and trial.state == "running":
                grown.append(trial)
    for trial in grown:  # the pruner's turn: each once per new intermediate value
        prune, attrs = search.should_prune(study, trials, trial)
        trial.system_attrs = attrs
        if prune:
            _prune(session, study, trials, trial, out)
    if study.stopped_at is None:
        active = sum(t.state in ACTIVE for t in trials)
        while len(trials) < study.n_trials and active < study.max_parallel:
            trials.append(_suggest(session, study, trials))
            if trials[-1].experiment_id is not None:
                active += 1
                out.created += 1
            changed = True
    if all(t.state not in ACTIVE for t in trials) and (
        study.stopped_at is not None or len(trials) >= study.n_trials
    ):
        study.finished_at = utcnow()
        changed = True
    if changed:
        study.updated_at = utcnow()
    return out


def _experiments(session: Session, trials: list[StudyTrial]) -> dict[int, Experiment]:
    ids = [t.experiment_id for t in trials if t.experiment_id is not None and t.state in ACTIVE]
    if not ids:
        return {}
    return {e.id: e for e in session.scalars(select(Experiment).where(Experiment.id.in_(ids)))}


def _follow(
    session: Session, study: Study, goal: Objective, trial: StudyTrial, run: Experiment | None
) -> tuple[bool, bool]:
    """Bring an active trial up to date with its run: (anything changed, it has a new
    intermediate value while its run goes on)."""
    if run is None:
        _finish(trial, "failed", "its experiment was deleted")
        return True, False
    if run.status in (S.pending, S.queued):
        return False, False
    reached_mark = (run.env_steps or 0) // study.interval_env_steps * study.interval_env_steps
    last_mark = max((int(k) for k in trial.intermediate or {}), default=0)
    if not run.status.is_finished and last_mark and reached_mark <= last_mark:
        return False, False  # no new interval since the last tick: nothing to read
    series = objective.points(session, run.id, goal.metric)
    reached = objective.intermediate(series, goal, study.interval_env_steps, run.env_steps or 0)
    stored = {str(k): v for k, v in reached.items()}
    grew = len(stored) > len(trial.intermediate or {})
    if stored != (trial.intermediate or {}):
        trial.intermediate = stored
    if not run.status.is_finished:
        return grew, grew
    value = objective.reduce(series, goal)
    if run.status == S.succeeded:  # a pruned run may have met its budget before its stop
        if value is None:
            _finish(trial, "failed", f"its run logged no finite {goal.metric}")
        else:
            trial.value = value
            _finish(trial, "complete", trial.note if trial.state == "pruning" else None)
    elif run.status == S.stopped and trial.state == "pruning":
        _finish(trial, "pruned", trial.note)
    elif run.status == S.stopped:
        _finish(trial, "stopped", trial.note or "its run was stopped")
    else:
        first = (run.error or "").strip().splitlines()[:1]
        _finish(trial, "failed", f"its run failed: {first[0][:300]}" if first else "its run failed")
    return True, False


def _finish(trial: StudyTrial, state: str, note: str | None) -> None:
    trial.state = state
    trial.note = note
    trial.finished_at = utcnow()


def _prune(
    session: Session, study: Study, trials: list[StudyTrial], trial: StudyTrial, out: Advance
) -> None:
    why = search.why_pruned(study, trials, trial)
    trial.state = "pruning"
    trial.note = why
    reason = f"pruned by study {study.id}: {why}"
    assert trial.experiment_id is not None
    run = experiments.request_stop(session, trial.experiment_id, reason=reason)
    if run.status == S.stopping:
        out.stopping.append(run.id)


def _suggest(session: Session, study: Study, trials: list[StudyTrial]) -> StudyTrial:
    """The next trial: a pending experiment of the suggested params; or, when the params make
    no valid config together (creation checks each range's ends, not every point between:
    `sde_sample_freq` 0 between -1 and 1), a failed trial that says why, so the sampler steers
    away from it and the study goes on."""
    number = len(trials)
    params = search.suggest(study, trials)
    trial = StudyTrial(
        study_id=study.id,
        number=number,
        params=params,
        state="running",
        intermediate={},
        system_attrs={},
    )
    try:
        config = space.trial_config(study.config, params)
    except ValidationError as exc:
        why = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'config'}: {config_error_message(e)}"
            for e in exc.errors()[:3]
        )
        _finish(trial, "failed", f"its params make no valid config ({why})")
    else:
        body = ExperimentCreate(
            name=f"{study.name} #{number}"[:200],
            config=config,
            evaluation_every=study.evaluation_every,
        )
        run = experiments.create(session, body, reason=f"trial {number} of study {study.id}")
        trial.experiment_id = run.id
    session.add(trial)
    session.flush()
    return trial


# --- queries --------------------------------------------------------------------------------


def status(study: Study) -> str:
    if study.finished_at is None:
        return "running" if study.stopped_at is None else "stopping"
    return "succeeded" if study.stopped_at is None else "stopped"


def best_trial(study: Study, trials: list[StudyTrial]) -> StudyTrial | None:
    done = [t for t in trials if t.state == "complete" and t.value is not None]
    if not done:
        return None
    sign = 1.0 if study.objective.get("direction", "maximize") == "maximize" else -1.0
    return max(done, key=lambda t: (sign * (t.value or 0.0), -t.number))


def to_public(study: Study, trials: list[StudyTrial]) -> StudyPublic:
    best = best_trial(study, trials)
    return from_row(
        StudyPublic,
        study,
        status=status(study),
        counts=dict(Counter(t.state for t in trials)),
        best_value=best.value if best else None,
        best_trial=best.number if best else None,
    )


def trial_public(trial: StudyTrial, run: Experiment | None) -> TrialPublic:
    steps = sorted(trial.intermediate or {}, key=int)
    return from_row(
        TrialPublic,
        trial,
        experiment_status=run.status if run else None,
        latest=trial.intermediate[steps[-1]] if steps else None,
        env_steps=run.env_steps if run else None,
        intermediate=trial.intermediate or {},
    )


def _runs(session: Session, trials: list[StudyTrial]) -> dict[int, Experiment]:
    ids = [t.experiment_id for t in trials if t.experiment_id is not None]
    if not ids:
        return {}
    return {e.id: e for e in session.scalars(select(Experiment).where(Experiment.id.in_(ids)))}


def detail(session: Session, study: Study) -> StudyDetail:
    trials = trials_of(session, study.id)
    runs = _runs(session, trials)
    return StudyDetail(
        **to_public(study, trials).model_dump(),
        trials=[trial_public(t, runs.get(t.experiment_id or 0)) for t in trials],
        importances=search.importances(study, trials),
    )


def list_studies(session: Session, limit: int = 100) -> list[StudyPublic]:
    """Newest first."""
    studies = list(session.scalars(select(Study).order_by(Study.id.desc()).limit(limit)))
    by_study: dict[int, list[StudyTrial]] = {s.id: [] for s in studies}
    if studies:
        stmt = select(StudyTrial).where(StudyTrial.study_id.in_(list(by_study)))
        for trial in session.scalars(stmt.order_by(StudyTrial.number)):
            by_study[trial.study_id].append(trial)
    return [to_public(s, by_study[s.id]) for s in studies]


def best(session: Session, study_id: int) -> StudyBest:
    study = get(session, study_id)
    trial = best_trial(study, trials_of(session, study_id))
    if trial is None:
        raise NotFound(f"study {study_id} has no complete trial yet")
    run = session.get(Experiment, trial.experiment_id) if trial.experiment_id else None
    return StudyBest(
        study_id=study_id,
        trial=trial_public(trial, run),
        config=run.config.to_json_dict() if run else space.trial_config(study.config, trial.params),
    )


# --- stop and delete ------------------------------------------------------------------------


def stop(session: Session, study_id: int) -> list[int]:
    """Suggest nothing more and stop every active trial's run (waiting ones end at once);
    returns the runs now `stopping`, whose jobs the caller stops after the commit."""
    study = get(session, study_id, lock=True)
    if study.stopped_at is None and study.finished_at is None:
        study.stopped_at = utcnow()
        study.updated_at = study.stopped_at
    stopping = []
    for trial in trials_of(session, study_id):
        if trial.state not in ACTIVE or trial.experiment_id is None:
            continue
        run = experiments.get(session, trial.experiment_id)
        if run.status.is_finished:
            continue
        if trial.state == "running":
            trial.note = f"stopped with study {study_id}"
        run = experiments.request_stop(session, run.id, reason=f"stopped with study {study_id}")
        if run.status == S.stopping:
            stopping.append(run.id)
    return stopping


def delete(session: Session, study_id: int) -> list[int]:
    """Delete a study whose trials have all ended, its trials and their runs (as deleting
    each run would); returns the runs' ids, whose files the caller removes after commit."""
    study = get(session, study_id, lock=True)
    trials = trials_of(session, study_id)
    runs = _runs(session, trials)
    unfinished = [r.id for r in runs.values() if not r.status.is_finished]
    if unfinished:
        ids = ", ".join(str(i) for i in unfinished[:10])
        raise Conflict(
            f"study {study_id} still has {len(unfinished)} unfinished trials (runs {ids}); "
            "stop the study before deleting it"
        )
    session.execute(sql_delete(StudyTrial).where(StudyTrial.study_id == study_id))
    for run_id in runs:
        experiments.delete_experiment(session, run_id)
    session.flush()
    session.delete(study)
    return list(runs)


def trial_of(session: Session, experiment_id: int) -> TrialOf | None:
    """The trial `experiment_id` runs, or None (most experiments are no study's)."""
    experiments.require(session, experiment_id)
    row = session.execute(
        select(StudyTrial, Study.name)
        .join(Study, Study.id == StudyTrial.study_id)
        .where(StudyTrial.experiment_id == experiment_id)
    ).one_or_none()
    if row is None:
        return None
    trial, name = row
    return TrialOf(
        study_id=trial.study_id,
        study_name=name,
        number=trial.number,
        state=trial.state,
        note=trial.note,
    )
