"""Job-side routes every kind of job shares (experiments, evaluations), added to each kind's
job router so both answer alike."""

# No `from __future__ import annotations`: FastAPI reads the route's signature, whose path
# parameter is built from this function's arguments.
from collections.abc import Callable
from typing import Annotated, Any

from fastapi import APIRouter, Path
from pydantic import BaseModel

from app.core.auth import JobTokenDep, JobTokens
from app.core.deps import SessionDep
from app.core.params import MAX_ID
from trainer.wire import JobTokenGrant


def add_claim_route(router: APIRouter, tokens: JobTokens, id_name: str, issuer: str) -> None:
    """`POST /{<id_name>}/token`: the job exchanges its one-time claim (the bearer, which
    `issuer` put in its runtime_env) for its job token."""
    description = f"{tokens.what.capitalize()} id."

    @router.post(f"/{{{id_name}}}/token", response_model=JobTokenGrant)
    def job_redeem_claim(
        row_id: Annotated[int, Path(alias=id_name, ge=1, le=MAX_ID, description=description)],
        claim: JobTokenDep,
        session: SessionDep,
    ) -> JobTokenGrant:
        token = tokens.redeem(session, row_id, claim)
        session.commit()
        return JobTokenGrant(token=token)

    job_redeem_claim.__doc__ = (
        f"Exchange the {issuer}'s one-time claim (the bearer) for the job token."
    )


def add_spec_route(
    router: APIRouter,
    tokens: JobTokens,
    id_name: str,
    model: type[BaseModel],
    spec_of: Callable[[Any], BaseModel],
    doc: str,
) -> None:
    """`GET /{<id_name>}`: what the job runs, `spec_of` the row its token opens (a typed
    contract of trainer/wire.py)."""
    description = f"{tokens.what.capitalize()} id."

    @router.get(f"/{{{id_name}}}", response_model=model, name=f"job_get_{tokens.what}")
    def job_get_spec(
        row_id: Annotated[int, Path(alias=id_name, ge=1, le=MAX_ID, description=description)],
        token: JobTokenDep,
        session: SessionDep,
    ) -> BaseModel:
        return spec_of(tokens.authorize(session, row_id, token))

    job_get_spec.__doc__ = doc
