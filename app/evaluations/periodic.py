"""Watch it learn: the evaluations an experiment's `evaluation_every` asks for as it trains.

Every N-th periodic checkpoint (iteration a multiple of N * checkpoint_every) and the final one
get a one-episode, deterministic evaluation with a video. They are ordinary evaluations marked
`scheduled` (the experiment page's filmstrip shows them), created in the transaction that
records the checkpoint, so none is lost to an API restart. The scheduler runs them one at a
time per experiment, newest first, at low priority and only while a core is idle
(app/evaluations/scheduling.py, app/jobs/node_load.py), so they take only the CPU training
leaves idle; retention keeps their checkpoints until they end.
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.checkpoints.models import Checkpoint
from app.core.stored_config import top_level_int
from app.evaluations import service
from app.evaluations.models import Evaluation
from app.evaluations.schemas import EvaluationCreate
from app.experiments.models import Experiment

SCHEDULED = EvaluationCreate(episodes=1, seed=0, deterministic=True, record_video=True)


def is_due(every: int, checkpoint_every: int, iteration: int, *, final: bool) -> bool:
    """Whether the checkpoint at `iteration` gets a scheduled evaluation, for a run with
    `evaluation_every` = `every` and its config's `checkpoint_every`."""
    if every <= 0:
        return False
    if final:
        return True
    return checkpoint_every > 0 and iteration % (every * checkpoint_every) == 0


def on_checkpoint(
    session: Session, exp: Experiment, checkpoint: Checkpoint, *, final: bool
) -> Evaluation | None:
    """The scheduled evaluation of a just-recorded checkpoint, if it is due and has none yet
    (a re-upload of the same iteration keeps its checkpoint row, so it gets no second one)."""
    per = top_level_int(exp.config, "checkpoint_every")
    if not is_due(exp.evaluation_every, per, checkpoint.iteration, final=final):
        return None
    existing = session.scalar(
        select(Evaluation.id).where(
            Evaluation.checkpoint_id == checkpoint.id, Evaluation.scheduled.is_(True)
        )
    )
    if existing is not None:
        return None
    reason = "scheduled by evaluation_every" + (" (the final checkpoint)" if final else "")
    return service.add(
        session, checkpoint, SCHEDULED, ref=str(checkpoint.id), scheduled=True, reason=reason
    )
