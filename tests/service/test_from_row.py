"""from_row: a model or dataclass from a row's attributes of the same names, with the fields
that differ given; a field the row lacks and nobody gives fails as missing."""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

import pytest
from pydantic import BaseModel, ValidationError

from app.core.from_row import from_row


class Public(BaseModel):
    id: int
    name: str
    progress: float
    note: str | None = None


@dataclass(frozen=True)
class Snapshot:
    id: int
    status: str
    held: bool = False


def test_fields_come_from_the_row_unless_given() -> None:
    row = SimpleNamespace(id=3, name="cartpole", progress=0.1, secret="never read")
    assert from_row(Public, row, progress=0.5) == Public(id=3, name="cartpole", progress=0.5)
    assert from_row(Snapshot, SimpleNamespace(id=4, status="queued")) == Snapshot(4, "queued")
    assert from_row(Snapshot, SimpleNamespace(id=4, status="x"), held=True).held


def test_a_field_nobody_gives_is_missing() -> None:
    with pytest.raises(ValidationError, match="progress"):
        from_row(Public, SimpleNamespace(id=1, name="x"))
    with pytest.raises(TypeError, match="status"):
        from_row(Snapshot, SimpleNamespace(id=1))
