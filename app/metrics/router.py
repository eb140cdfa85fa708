"""HTTP endpoints of the metrics domain: job-side ingest and user-side queries."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Response

from app.core.auth import JobTokenDep, require_api_token
from app.core.deps import SessionDep
from app.core.errors import InvalidInput
from app.core.params import MAX_ID, ExperimentId, StepQuery
from app.core.text import NoNulStr
from app.experiments import service as experiments
from app.metrics import service
from app.metrics.schemas import IngestResult, MetricNames, MetricSummaries, SeriesResponse
from trainer.wire import MetricsIngest

router = APIRouter(
    prefix="/experiments", tags=["metrics"], dependencies=[Depends(require_api_token)]
)
job_router = APIRouter(prefix="/jobs/experiments", tags=["jobs"])
summary_router = APIRouter(
    prefix="/metric-summaries", tags=["metrics"], dependencies=[Depends(require_api_token)]
)


@router.get("/{experiment_id}/metrics", response_model=SeriesResponse)
def get_metrics(
    experiment_id: ExperimentId,
    session: SessionDep,
    names: Annotated[NoNulStr | None, Query(description="Comma-separated; default: all.")] = None,
    max_points: Annotated[int | None, Query(ge=2, le=100_000)] = None,
    step_min: StepQuery = None,
    step_max: StepQuery = None,
) -> Response:
    """Series keyed by env steps; longer than max_points -> min and max point per bucket.

    Bounded without max_points too (MAX_POINTS_PER_SERIES per series, MAX_POINTS_PER_REQUEST
    in all); reads run in a read-only transaction, so a long query never delays ingest."""
    experiments.require(session, experiment_id)
    given = list(dict.fromkeys(n for n in names.split(",") if n)) if names else None
    wanted = given if given is not None else service.names(session, experiment_id)
    if len(wanted) > service.MAX_NAMES_PER_REQUEST:
        raise InvalidInput(
            "too many series in one query",
            fields=[{"field": "names", "message": f"at most {service.MAX_NAMES_PER_REQUEST}"}],
        )
    found = service.series_many(
        session,
        experiment_id,
        wanted,
        every_name=given is None,
        max_points=service.point_budget(max_points, len(wanted)),
        step_min=step_min,
        step_max=step_max,
    )
    out = SeriesResponse.model_construct(  # built from stored ints and floats: nothing to check
        series={name: series for name, (series, _) in found.items()},
        downsampled={name: reduced for name, (_, reduced) in found.items()},
    )
    # Serialized once, in pydantic's Rust core: returned as the model, FastAPI would validate
    # it again and then encode it (half the CPU of a long query).
    return Response(out.model_dump_json(), media_type="application/json")


@router.get("/{experiment_id}/metrics/names", response_model=MetricNames)
def get_metric_names(experiment_id: ExperimentId, session: SessionDep) -> MetricNames:
    experiments.require(session, experiment_id)
    return MetricNames(names=service.names(session, experiment_id))


@job_router.post("/{experiment_id}/metrics", response_model=IngestResult)
def ingest_metrics(
    experiment_id: ExperimentId, body: MetricsIngest, token: JobTokenDep, session: SessionDep
) -> IngestResult:
    """Idempotent upsert keyed by (experiment, step, name); pushed live after commit."""
    exp = experiments.authorize_job(session, experiment_id, token, lock=True)
    result = service.ingest(session, exp, body.rows)
    session.commit()
    return result


def _comma_list(raw: str, field: str, limit: int) -> list[str]:
    items = list(dict.fromkeys(item.strip() for item in raw.split(",") if item.strip()))
    if len(items) > limit:
        raise InvalidInput(
            f"too many {field} in one query",
            fields=[{"field": field, "message": f"at most {limit}"}],
        )
    return items


@summary_router.get("", response_model=MetricSummaries)
def get_metric_summaries(
    session: SessionDep,
    ids: Annotated[NoNulStr, Query(description="Comma-separated experiment ids.")],
    names: Annotated[NoNulStr, Query(description="Comma-separated metric names.")],
) -> MetricSummaries:
    """Last, min and max of some metrics of some experiments: the runs table's metric columns.
    Unknown ids and names are simply absent from the answer."""
    raw_ids = _comma_list(ids, "ids", service.MAX_SUMMARY_EXPERIMENTS)
    if not all(i.isascii() and i.isdigit() and 1 <= int(i) <= MAX_ID for i in raw_ids):
        raise InvalidInput(
            "ids must be experiment ids",
            fields=[{"field": "ids", "message": f"comma-separated integers 1-{MAX_ID}"}],
        )
    wanted = _comma_list(names, "names", service.MAX_SUMMARY_NAMES)
    return MetricSummaries(summaries=service.summaries(session, [int(i) for i in raw_ids], wanted))
