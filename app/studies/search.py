"""Optuna's samplers, pruners and importances over a study's stored trials.

The service's tables are the study's storage; Optuna runs on an in-memory study rebuilt from
them for each question (ask-and-tell), because:
- Optuna's RDB storage keeps its schema with its own Alembic history, in a version table of the
  same name as ours; its rows could not be migrated, backed up or deleted with the study's
  experiments in one transaction;
- a rebuilt study has nothing to lose on a restart: a trial's result is told by the rows its
  job reported, read again each time, never by a call that could be missed; and whichever API
  process holds the study's row lock asks next (trial numbers are unique per study).

Trials that still run are added as RUNNING, so TPE's constant liar treats them as bad results
and parallel suggestions spread out instead of collapsing onto one point. Each suggestion seeds
the sampler with (study seed, trial number): the same history gives the same suggestion.
Intermediate values go to Optuna keyed by interval number (1, 2, ...) rather than env steps, so
the pruners' warm-up and rungs count intervals.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import optuna
from optuna.distributions import (
    BaseDistribution,
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
)
from optuna.trial import FrozenTrial, TrialState, create_trial

from app.studies.models import Study, StudyTrial
from app.studies.schemas import (
    Categorical,
    FloatRange,
    IntRange,
    PrunerSpec,
    SamplerSpec,
    StudyCreate,
)

optuna.logging.set_verbosity(optuna.logging.WARNING)
warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)

OPTUNA_STATE = {
    "running": TrialState.RUNNING,
    "pruning": TrialState.PRUNED,  # decided; its job is being stopped
    "complete": TrialState.COMPLETE,
    "pruned": TrialState.PRUNED,
    "failed": TrialState.FAIL,
    "stopped": TrialState.FAIL,
}


def specs(study: Study) -> dict[str, FloatRange | IntRange | Categorical]:
    """The stored space as models (validated at creation)."""
    return StudyCreate.model_validate({"name": "-", "n_trials": 1, "space": study.space}).space


def distributions(study: Study) -> dict[str, BaseDistribution]:
    out: dict[str, BaseDistribution] = {}
    for key, spec in specs(study).items():
        if isinstance(spec, FloatRange):
            out[key] = FloatDistribution(spec.low, spec.high, log=spec.log, step=spec.step)
        elif isinstance(spec, IntRange):
            out[key] = IntDistribution(spec.low, spec.high, log=spec.log, step=spec.step)
        else:  # choices of any JSON value, as their JSON text
            out[key] = CategoricalDistribution([_choice(c) for c in spec.choices])
    return out


def _choice(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def _to_optuna(study: Study, params: dict[str, Any]) -> dict[str, Any]:
    spaces = specs(study)
    return {k: _choice(v) if isinstance(spaces[k], Categorical) else v for k, v in params.items()}


def _from_optuna(study: Study, params: dict[str, Any]) -> dict[str, Any]:
    spaces = specs(study)
    return {
        k: json.loads(v) if isinstance(spaces[k], Categorical) else v for k, v in params.items()
    }


def _frozen(study: Study, trial: StudyTrial, dists: dict[str, BaseDistribution]) -> FrozenTrial:
    state = OPTUNA_STATE[trial.state]
    interval = study.interval_env_steps
    return create_trial(
        state=state,
        value=trial.value if state == TrialState.COMPLETE else None,
        params=_to_optuna(study, trial.params),
        distributions=dists,
        intermediate_values={int(s) // interval: v for s, v in (trial.intermediate or {}).items()},
        system_attrs=dict(trial.system_attrs or {}),
    )


def rebuild(
    study: Study, trials: Sequence[StudyTrial], sampler: optuna.samplers.BaseSampler | None = None
) -> optuna.Study:
    """An in-memory Optuna study holding `trials` in number order (Optuna numbers them the
    same: 0, 1, ...)."""
    pruner = optuna.pruners.NopPruner()
    direction = study.objective.get("direction", "maximize")
    out = optuna.create_study(direction=direction, sampler=sampler, pruner=pruner)
    dists = distributions(study)
    for trial in sorted(trials, key=lambda t: t.number):
        out.add_trial(_frozen(study, trial, dists))
    return out


def suggestion_seed(study_seed: int, number: int) -> int:
    return int(np.random.SeedSequence([study_seed, number]).generate_state(1)[0])


def _sampler(spec: SamplerSpec, seed: int) -> optuna.samplers.BaseSampler:
    if spec.kind == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    return optuna.samplers.TPESampler(
        seed=seed,
        n_startup_trials=spec.n_startup_trials,
        multivariate=True,
        constant_liar=True,
    )


def suggest(study: Study, trials: Sequence[StudyTrial]) -> dict[str, Any]:
    """Params for trial number len(trials)."""
    number = len(trials)
    sampler = _sampler(
        SamplerSpec.model_validate(study.sampler), suggestion_seed(study.seed, number)
    )
    asked = rebuild(study, trials, sampler).ask(distributions(study))
    return _from_optuna(study, asked.params)


def _pruner(spec: PrunerSpec) -> optuna.pruners.BasePruner | None:
    if spec.kind == "median":
        return optuna.pruners.MedianPruner(
            n_startup_trials=spec.n_startup_trials, n_warmup_steps=spec.n_warmup_intervals
        )
    if spec.kind == "percentile":
        return optuna.pruners.PercentilePruner(
            spec.percentile,
            n_startup_trials=spec.n_startup_trials,
            n_warmup_steps=spec.n_warmup_intervals,
        )
    if spec.kind == "asha":
        return optuna.pruners.SuccessiveHalvingPruner(
            min_resource=spec.min_intervals, reduction_factor=spec.reduction_factor
        )
    return None


def should_prune(
    study: Study, trials: Sequence[StudyTrial], trial: StudyTrial
) -> tuple[bool, dict[str, Any]]:
    """The pruner's verdict on `trial` at its latest intermediate value, and the trial's
    system attributes after the call (successive halving records its rungs there)."""
    pruner = _pruner(PrunerSpec.model_validate(study.pruner))
    if pruner is None or not trial.intermediate:
        return False, dict(trial.system_attrs or {})
    optuna_study = rebuild(study, trials)
    frozen = optuna_study.get_trials(deepcopy=False)[trial.number]
    verdict = pruner.prune(optuna_study, frozen)
    after = optuna_study.get_trials(deepcopy=False)[trial.number].system_attrs
    return bool(verdict), dict(after)


def why_pruned(study: Study, trials: Sequence[StudyTrial], trial: StudyTrial) -> str:
    """The pruner's rule with the numbers it saw, for the trial's note and its run's events."""
    spec = PrunerSpec.model_validate(study.pruner)
    metric = study.objective.get("metric", "episode_return_mean")
    maximize = study.objective.get("direction", "maximize") == "maximize"
    step = max(int(s) for s in trial.intermediate)
    here = trial.intermediate[str(step)]
    if spec.kind in ("median", "percentile"):
        values = sorted(
            t.intermediate[str(step)]
            for t in trials
            if t.state == "complete" and str(step) in (t.intermediate or {})
        )
        best = (max if maximize else min)(trial.intermediate.values())
        kept = 50.0 if spec.kind == "median" else spec.percentile
        # Optuna's rule: the kept share's edge, counted from the better end.
        edge = float(np.percentile(values, 100 - kept if maximize else kept)) if values else None
        side = "below" if maximize else "above"
        bar = "the median" if spec.kind == "median" else f"the top {kept:g} % edge"
        return (
            f"{spec.kind} pruner: {metric} {best:.4g} (best so far) is {side} {bar} "
            f"{float('nan') if edge is None else edge:.4g} of {len(values)} finished trials at "
            f"{step:,} env steps"
        )
    rung = trial.system_attrs and max(
        (k for k in trial.system_attrs if k.startswith("completed_rung_")), default=None
    )
    return (
        f"asha pruner: {metric} {here:.4g} at {step:,} env steps ({rung or 'a rung'}) is not in "
        f"the top 1/{spec.reduction_factor} of the trials that reached that rung"
    )


def importances(study: Study, trials: Sequence[StudyTrial]) -> dict[str, float]:
    """PED-ANOVA importances over complete trials ({} while there are too few)."""
    complete = [t for t in trials if t.state == "complete" and t.value is not None]
    if len(complete) < 4 or not study.space:
        return {}
    try:
        found = optuna.importance.get_param_importances(
            rebuild(study, complete),
            evaluator=optuna.importance.PedAnovaImportanceEvaluator(),
        )
    except (RuntimeError, ValueError, ZeroDivisionError):
        return {}
    return {k: float(v) for k, v in found.items()}
