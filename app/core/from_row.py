"""Typed values built from rows: each field read off the row by its own name.

Every domain turns its ORM rows (or a query's result rows) into public models, job specs and
the reconciler's snapshots. Written out, each of those builders lists every field twice
(`id=row.id, name=row.name, ...`) and grows with every column; here a builder names only the
fields that differ from the row: computed ones, renamed ones, converted ones.
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

from pydantic import BaseModel

T = TypeVar("T")


def from_row(kind: type[T], row: object, **values: Any) -> T:
    """A `kind` (a pydantic model, validated, or a dataclass) from `values` and, for each other
    field, the row's attribute of that name (a field the row lacks takes its default, or fails
    as missing)."""
    data = dict(values)
    for name in _field_names(kind):
        if name not in data and hasattr(row, name):
            data[name] = getattr(row, name)
    if issubclass(kind, BaseModel):
        return kind.model_validate(data)  # type: ignore[return-value]
    return kind(**data)


def _field_names(kind: type) -> list[str]:
    if issubclass(kind, BaseModel):
        return list(kind.model_fields)
    return [f.name for f in dataclasses.fields(kind)]
