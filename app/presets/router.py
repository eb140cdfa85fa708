"""HTTP endpoints of the presets domain: the tables, and what a partial config resolves to."""

from __future__ import annotations

from fastapi import APIRouter, Depends

from app.core.auth import require_api_token
from app.presets import service
from app.presets.schemas import PresetList, ResolvedConfig, ResolveRequest

router = APIRouter(prefix="/presets", tags=["presets"], dependencies=[Depends(require_api_token)])


@router.get("", response_model=PresetList)
def list_presets() -> PresetList:
    """Every preset: the env family it serves, its source, and the fields it sets."""
    return PresetList(items=service.list_presets())


@router.post("/resolve", response_model=ResolvedConfig)
def resolve(body: ResolveRequest) -> ResolvedConfig:
    """The config an experiment with this partial config would get (nothing is stored), with
    the preset applied and the fields it set."""
    return service.resolved_public(body.config)
