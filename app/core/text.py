"""Text the service stores: no NUL characters.

PostgreSQL's text types cannot hold U+0000 (psycopg refuses the parameter: a 500), while SQLite
stores it silently; refusing it at the edge gives both backends the same clear 422. Emoji,
right-to-left text and every other character are fine.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator

NUL_MESSAGE = "must not contain NUL (\\u0000) characters"


def reject_nul(value: str) -> str:
    if "\x00" in value:
        raise ValueError(NUL_MESSAGE)
    return value


def reject_nul_in_all(values: list[str]) -> list[str]:
    for value in values:
        reject_nul(value)
    return values


NoNulStr = Annotated[str, AfterValidator(reject_nul)]
