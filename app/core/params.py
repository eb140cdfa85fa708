"""Bounded integer parameters shared by the routers (as `Annotated` aliases).

Every id and step the API accepts fits the SQL column it is compared with: ids are INTEGER
(32-bit on PostgreSQL), steps BIGINT (64-bit; SQLite holds no more either). A bigger Python int
reaching the driver fails inside it (a 500); declaring the bound on the parameter turns such
input into a 422 naming it, and puts the bound in the OpenAPI schema.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Path, Query

MAX_INT64 = 2**63 - 1
MIN_INT64 = -(2**63)
MAX_INT32 = 2**31 - 1  # INTEGER columns on PostgreSQL (iterations, episode indices)
# Ids come from SQL sequences of INTEGER columns: positive, within 32 bits on PostgreSQL.
MAX_ID = MAX_INT32

ExperimentId = Annotated[int, Path(ge=1, le=MAX_ID, description="Experiment id.")]
EvaluationId = Annotated[int, Path(ge=1, le=MAX_ID, description="Evaluation id.")]
SweepId = Annotated[int, Path(ge=1, le=MAX_ID, description="Sweep id.")]
StudyId = Annotated[int, Path(ge=1, le=MAX_ID, description="Study id.")]
StepQuery = Annotated[
    int | None, Query(ge=MIN_INT64, le=MAX_INT64, description="Env steps (inclusive).")
]


def streamed_body(description: str, *media_types: str) -> dict[str, Any]:
    """OpenAPI for a route that reads its raw body as a stream (FastAPI cannot infer it)."""
    schema = {"type": "string", "format": "binary"}
    content = {media_type: {"schema": schema} for media_type in media_types}
    return {"requestBody": {"required": True, "description": description, "content": content}}
