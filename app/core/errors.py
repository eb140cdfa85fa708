"""Domain errors and the one handler that maps them to HTTP.

    RolloutError                      500  base; carries code, message, optional fields
    ├── NotFound                      404  unknown experiment / checkpoint
    ├── Conflict                      409  the resource is in the wrong state
    │   └── IllegalTransition         409  a lifecycle transition the state machine forbids
    ├── InvalidInput                  422  a request that parses but is wrong (e.g. a bad config)
    ├── Unauthorized                  401  missing or wrong token
    ├── Forbidden                     403  a valid token used outside its scope
    └── Unavailable                   503  a dependency (e.g. Ray) is not there

The database being unreachable (a restart, a failover, SQLite's write lock held past the busy
timeout) is a 503 too, with `Retry-After`: clients and jobs retry it.

Services raise these; routers never build HTTP errors themselves. Every error reaches the client
as `{"error": {"code", "message", "fields"?}}`, `fields` being `[{"field", "message"}]`: domain
errors, request validation errors, the framework's own (unknown route, wrong method, 413 from
app/core/body_limit.py) and, should one happen, an unexpected exception (a 500 whose details go
to the log only).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, ClassVar

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError
from starlette.exceptions import HTTPException as StarletteHTTPException

DATABASE_RETRY_AFTER_S = 5
log = logging.getLogger(__name__)


class RolloutError(Exception):
    status_code: ClassVar[int] = 500
    code: ClassVar[str] = "internal_error"

    def __init__(self, message: str, fields: list[dict[str, str]] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.fields = fields

    def body(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.fields is not None:
            error["fields"] = self.fields
        return {"error": error}


class NotFound(RolloutError):
    status_code = 404
    code = "not_found"


class Conflict(RolloutError):
    status_code = 409
    code = "conflict"


class IllegalTransition(Conflict):
    code = "illegal_transition"


class InvalidInput(RolloutError):
    status_code = 422
    code = "invalid_input"


class Unauthorized(RolloutError):
    status_code = 401
    code = "unauthorized"


class Forbidden(RolloutError):
    status_code = 403
    code = "forbidden"


class Unavailable(RolloutError):
    status_code = 503
    code = "unavailable"


# Codes of the errors Starlette / FastAPI raise themselves (unknown route, wrong method, ...).
HTTP_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    413: "payload_too_large",
    415: "unsupported_media_type",
}


def field_errors(
    errors: list[Any], prefix: str = "", message: Callable[[Any], str] | None = None
) -> list[dict[str, str]]:
    """pydantic error dicts -> [{"field": "config.lr", "message": ...}]; a validator's message
    without pydantic's "Value error, " in front, or what `message(error)` says."""
    out = []
    for err in errors:
        loc = [str(part) for part in err.get("loc", ()) if part not in ("body",)]
        path = ".".join([prefix, *loc] if prefix else loc) or prefix or "body"
        if message is not None:
            text = message(err)
        else:
            text = str(err.get("msg", "invalid value")).removeprefix("Value error, ")
        out.append({"field": path, "message": text})
    return out


def install_error_handlers(app: FastAPI) -> None:
    """Map domain errors, request validation errors and plain HTTP errors to one JSON shape."""

    async def on_domain_error(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RolloutError)
        headers = {"WWW-Authenticate": "Bearer"} if isinstance(exc, Unauthorized) else None
        return JSONResponse(exc.body(), status_code=exc.status_code, headers=headers)

    async def on_validation_error(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        err = InvalidInput("the request is invalid", fields=field_errors(list(exc.errors())))
        return JSONResponse(err.body(), status_code=422)

    async def on_http_error(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        code = HTTP_CODES.get(exc.status_code, "http_error")
        body = {"error": {"code": code, "message": str(exc.detail)}}
        return JSONResponse(body, status_code=exc.status_code, headers=exc.headers)

    async def on_database_unavailable(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, OperationalError | InterfaceError)
        cause = type(exc.orig).__name__ if exc.orig is not None else type(exc).__name__
        err = Unavailable(f"the database is unavailable ({cause}); retry shortly")
        headers = {"Retry-After": str(DATABASE_RETRY_AFTER_S)}
        return JSONResponse(err.body(), status_code=err.status_code, headers=headers)

    async def on_unexpected_error(request: Request, exc: Exception) -> JSONResponse:
        log.error("%s %s failed", request.method, request.url.path, exc_info=exc)
        if isinstance(exc, DBAPIError) and (
            exc.connection_invalidated or isinstance(exc, OperationalError)
        ):
            # The database is down, restarting or (SQLite) busy: a 503 tells clients, the job
            # reporter included, to retry rather than give the request up.
            body = Unavailable("the database is unavailable; retry later").body()
            headers = {"Retry-After": str(DATABASE_RETRY_AFTER_S)}
            return JSONResponse(body, status_code=503, headers=headers)
        body = {"error": {"code": "internal_error", "message": "internal server error"}}
        return JSONResponse(body, status_code=500)

    app.add_exception_handler(RolloutError, on_domain_error)
    app.add_exception_handler(OperationalError, on_database_unavailable)
    app.add_exception_handler(InterfaceError, on_database_unavailable)
    app.add_exception_handler(RequestValidationError, on_validation_error)
    app.add_exception_handler(StarletteHTTPException, on_http_error)
    # Starlette runs this one outermost (ServerErrorMiddleware) and re-raises afterwards, so
    # the server still logs the traceback; the client gets the envelope instead of plain text.
    app.add_exception_handler(Exception, on_unexpected_error)
