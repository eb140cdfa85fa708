"""HTTP endpoint of the references domain."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query

from app.core.auth import require_api_token
from app.references import service
from app.references.schemas import ReferenceList

router = APIRouter(
    prefix="/references", tags=["references"], dependencies=[Depends(require_api_token)]
)


@router.get("", response_model=ReferenceList)
def list_references(
    env_id: Annotated[
        str | None,
        Query(min_length=1, max_length=200, description="Only this env id (exact match)."),
    ] = None,
) -> ReferenceList:
    """Peer learning curves shipped with Rollout (mean and min/max over seeds, against env
    steps and wall time); `items` is empty when there is none for the env id."""
    return ReferenceList(items=service.list_references(env_id))
