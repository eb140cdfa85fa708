"""The Optuna side of studies, without a database: parallel TPE suggestions spread out
(running trials count as bad results, the constant liar), and each suggestion is a function of
the study's seed, the trial number and the history."""

from __future__ import annotations

import math
import statistics
from typing import Any

from app.studies import search
from app.studies.models import Study, StudyTrial

HISTORY = [1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 3e-4, 3e-3]  # values peak at lr = 1e-3


def _study(seed: int) -> Study:
    return Study(
        id=1,
        name="lr",
        config={},
        space={"lr": {"type": "float", "low": 1e-5, "high": 1e-1, "log": True}},
        objective={"metric": "episode_return_mean", "direction": "maximize"},
        sampler={"kind": "tpe", "n_startup_trials": 5},
        pruner={"kind": "none"},
        n_trials=20,
        max_parallel=4,
        seed=seed,
        interval_env_steps=1000,
    )


def _trial(number: int, lr: float, state: str, value: float | None = None) -> StudyTrial:
    return StudyTrial(
        number=number,
        params={"lr": lr},
        state=state,
        value=value,
        intermediate={},
        system_attrs={},
    )


def _finished() -> list[StudyTrial]:
    return [_trial(n, lr, "complete", -((math.log10(lr) + 3) ** 2)) for n, lr in enumerate(HISTORY)]


def _spread(picks: list[dict[str, Any]]) -> float:
    """Standard deviation of the suggested lrs, in decades."""
    return statistics.pstdev(math.log10(p["lr"]) for p in picks)


def test_parallel_suggestions_do_not_collapse_onto_one_point() -> None:
    for seed in range(5):
        study, trials, picks = _study(seed), _finished(), []
        for _ in range(4):  # four trials asked while the earlier ones still run
            picks.append(search.suggest(study, trials))
            trials.append(_trial(len(trials), picks[-1]["lr"], "running"))
        # Blind to running trials (as if each were asked with only the finished ones known),
        # TPE puts all four within a fraction of a decade of the best point.
        blind = [
            search.suggest(
                study,
                _finished() + [_trial(len(HISTORY) + j, 1e-3, "failed") for j in range(k)],
            )
            for k in range(4)
        ]
        assert _spread(picks) > 0.5 > 0.2 > _spread(blind), (seed, picks, blind)


def test_a_suggestion_depends_on_the_seed_the_number_and_the_history_only() -> None:
    trials = _finished()
    assert search.suggest(_study(3), trials) == search.suggest(_study(3), list(trials))
    assert search.suggest(_study(3), trials) != search.suggest(_study(4), trials)
    shorter = trials[:-1]
    assert search.suggest(_study(3), shorter) != search.suggest(_study(3), trials)
