"""The one JSON error shape of the service (OpenAI's: ``{"error": {"type", "code", "message", "param"}}``).

Every error a route raises is an :class:`APIError`; the handlers installed by :func:`install_error_handlers` turn
request validation errors, unreadable bodies, unknown routes and unexpected exceptions into the same shape, so a
client reads one shape. An unexpected exception never reaches the client: it is logged with a fresh error id
(:func:`error_id`) and the body names only that id (``internal_error``), which the server log resolves.
"""

from __future__ import annotations

import logging
import secrets
from typing import Any, Dict, Mapping, Optional

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException as StarletteHTTPException

from llama_index_convrag.errors import ConfigurationError, RecordNotFoundError

logger = logging.getLogger(__name__)

#: status -> OpenAI error ``type``
ERROR_TYPES: Dict[int, str] = {
    400: "invalid_request_error", 401: "authentication_error", 403: "permission_error", 404: "not_found_error",
    405: "invalid_request_error", 409: "conflict_error", 413: "invalid_request_error", 415: "invalid_request_error",
    422: "invalid_request_error", 429: "rate_limit_error", 500: "server_error", 503: "server_error",
}
#: FastAPI's text for a body it could not decode (not UTF-8, or not JSON at all)
UNREADABLE_BODY = "There was an error parsing the body"


class ErrorDetail(BaseModel):
    type: str = Field(description="OpenAI's error type: invalid_request_error, authentication_error, ...")
    code: str = Field(description="What went wrong, one word (docs/SERVE.md lists them).")
    message: str = Field(description="For people: names the bad value and the accepted ones; never internals.")
    param: Optional[str] = Field(default=None, description="The request field at fault, when one is.")


class ErrorBody(BaseModel):
    """Every error answer (4xx and 5xx)."""

    error: ErrorDetail


class APIError(Exception):
    """An error answered as ``status`` with the one JSON shape (``type`` overrides the status's OpenAI type, as
    OpenAI does for ``model_not_found``; ``headers``: e.g. ``Retry-After``)."""

    def __init__(self, status: int, code: str, message: str, param: Optional[str] = None, *,
                 type: Optional[str] = None, headers: Optional[Mapping[str, str]] = None) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.param = status, code, message, param
        self.type, self.headers = type, dict(headers) if headers is not None else None

    def body(self) -> Dict[str, Any]:
        out = error_body(self.status, self.code, self.message, self.param)
        if self.type is not None:
            out["error"]["type"] = self.type
        return out

    def response(self) -> JSONResponse:
        return JSONResponse(self.body(), status_code=self.status, headers=self.headers)


def error_body(status: int, code: str, message: str, param: Optional[str] = None) -> Dict[str, Any]:
    return {"error": {"type": ERROR_TYPES.get(status, "invalid_request_error" if status < 500 else "server_error"),
                      "code": code, "message": message, "param": param}}


def error_id() -> str:
    """A fresh id for an unexpected error: the body names it, the server log holds the details under it."""
    return "err_" + secrets.token_hex(6)


def internal_error(what: str, exc: BaseException) -> APIError:
    """500 ``internal_error`` naming only a fresh error id; the exception and its trace go to the server log."""
    ident = error_id()
    logger.error("%s failed (error id %s)", what, ident, exc_info=exc)
    return APIError(500, "internal_error", f"{what} failed on the server (error id {ident}; the server log has the "
                                           "details)")


def not_found(kind: str, ident: str) -> APIError:
    """404 for an unknown id and for another user's id alike (nothing tells them apart)."""
    return APIError(404, "not_found", f"no {kind} with id {ident!r}")


def forbidden(code: str, message: str) -> APIError:
    """403: the caller may see the object but not do this to it (``insufficient_scope``, ``insufficient_role``)."""
    return APIError(403, code, message)


def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
    errors = exc.errors()
    first = errors[0] if errors else {}
    if first.get("type") == "json_invalid":
        return APIError(400, "invalid_json", "the request body is not valid JSON "
                                             f"({first.get('ctx', {}).get('error', 'cannot parse')})").response()
    loc = [str(p) for p in first.get("loc", ()) if p not in ("body", "query", "path")]
    param = ".".join(loc) if loc else None
    message = "; ".join(f"{'.'.join(str(p) for p in e.get('loc', ()))}: {e.get('msg', '')}" for e in errors[:5])
    return APIError(400, "validation_error", message or "invalid request", param).response()


def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
    if exc.status_code == 400 and exc.detail == UNREADABLE_BODY:
        return APIError(400, "invalid_body", "the request body could not be read: send UTF-8 encoded JSON with "
                                             "Content-Type: application/json").response()
    code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
    detail = exc.detail if isinstance(exc.detail, str) else str(exc.detail)
    if exc.status_code == 404:
        detail = f"no route {request.method} {request.url.path}"
    elif exc.status_code == 405:
        detail = f"{request.method} is not allowed on {request.url.path}"
    return JSONResponse(error_body(exc.status_code, code, detail), status_code=exc.status_code,
                        headers=getattr(exc, "headers", None))


def _api(request: Request, exc: APIError) -> JSONResponse:
    return exc.response()


def _record(request: Request, exc: RecordNotFoundError) -> JSONResponse:
    return APIError(404, "not_found", str(exc).strip("'\"")).response()


def _config(request: Request, exc: ConfigurationError) -> JSONResponse:
    return APIError(400, "invalid_value", str(exc)).response()


def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    return internal_error(f"{request.method} {request.url.path}", exc).response()


def install_error_handlers(app: FastAPI) -> None:
    """Route every error the app can produce through the one shape."""
    app.add_exception_handler(RequestValidationError, _validation)  # type: ignore[arg-type]
    app.add_exception_handler(StarletteHTTPException, _http)  # type: ignore[arg-type]
    app.add_exception_handler(APIError, _api)  # type: ignore[arg-type]
    app.add_exception_handler(RecordNotFoundError, _record)  # type: ignore[arg-type]
    app.add_exception_handler(ConfigurationError, _config)  # type: ignore[arg-type]
    app.add_exception_handler(Exception, _unexpected)
