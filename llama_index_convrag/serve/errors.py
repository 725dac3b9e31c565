"""The one JSON error shape of the service (OpenAI's: ``{"error": {"type", "code", "message", "param"}}``).

Every error a route raises is an :class:`APIError`; the handlers installed by :func:`install_error_handlers` turn
request validation errors, unknown routes and unexpected exceptions into the same shape, so a client reads one shape.
"""

from __future__ import annotations

import logging
from typing import Any, Dict, Optional

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from llama_index_convrag.errors import ConfigurationError, RecordNotFoundError

logger = logging.getLogger(__name__)

#: status -> OpenAI error ``type``
ERROR_TYPES: Dict[int, str] = {
    400: "invalid_request_error", 401: "authentication_error", 403: "permission_error", 404: "not_found_error",
    405: "invalid_request_error", 409: "conflict_error", 413: "invalid_request_error", 415: "invalid_request_error",
    422: "invalid_request_error", 500: "server_error", 503: "server_error",
}
#: The JSON schema of an error body (also in the OpenAPI document).
ERROR_SCHEMA: Dict[str, Any] = {
    "type": "object", "required": ["error"],
    "properties": {"error": {"type": "object", "required": ["type", "code", "message"], "properties": {
        "type": {"type": "string"}, "code": {"type": "string"}, "message": {"type": "string"},
        "param": {"type": ["string", "null"]}}}},
}


class APIError(Exception):
    """An error answered as ``status`` with the one JSON shape."""

    def __init__(self, status: int, code: str, message: str, param: Optional[str] = None) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.param = status, code, message, param

    def body(self) -> Dict[str, Any]:
        return error_body(self.status, self.code, self.message, self.param)

    def response(self) -> JSONResponse:
        return JSONResponse(self.body(), status_code=self.status)


def error_body(status: int, code: str, message: str, param: Optional[str] = None) -> Dict[str, Any]:
    return {"error": {"type": ERROR_TYPES.get(status, "invalid_request_error" if status < 500 else "server_error"),
                      "code": code, "message": message, "param": param}}


def not_found(kind: str, ident: str) -> APIError:
    """404 for an unknown id and for another user's id alike (nothing tells them apart)."""
    return APIError(404, "not_found", f"no {kind} with id {ident!r}")


def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
    errors = exc.errors()
    first = errors[0] if errors else {}
    loc = [str(p) for p in first.get("loc", ()) if p not in ("body", "query", "path")]
    param = ".".join(loc) if loc else None
    message = "; ".join(f"{'.'.join(str(p) for p in e.get('loc', ()))}: {e.get('msg', '')}" for e in errors[:5])
    return APIError(400, "validation_error", message or "invalid request", param).response()


def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
    code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
    detail = exc.detail if isinstance(exc.detail, str) else str(exc.detail)
    if exc.status_code == 404:
        detail = f"no route {request.method} {request.url.path}"
    return JSONResponse(error_body(exc.status_code, code, detail), status_code=exc.status_code,
                        headers=getattr(exc, "headers", None))


def _api(request: Request, exc: APIError) -> JSONResponse:
    return exc.response()


def _record(request: Request, exc: RecordNotFoundError) -> JSONResponse:
    return APIError(404, "not_found", str(exc).strip("'\"")).response()


def _config(request: Request, exc: ConfigurationError) -> JSONResponse:
    return APIError(400, "invalid_value", str(exc)).response()


def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    logger.exception("unhandled error on %s %s", request.method, request.url.path)
    return APIError(500, "internal_error", f"{type(exc).__name__}: {exc}").response()


def install_error_handlers(app: FastAPI) -> None:
    """Route every error the app can produce through the one shape."""
    app.add_exception_handler(RequestValidationError, _validation)  # type: ignore[arg-type]
    app.add_exception_handler(StarletteHTTPException, _http)  # type: ignore[arg-type]
    app.add_exception_handler(APIError, _api)  # type: ignore[arg-type]
    app.add_exception_handler(RecordNotFoundError, _record)  # type: ignore[arg-type]
    app.add_exception_handler(ConfigurationError, _config)  # type: ignore[arg-type]
    app.add_exception_handler(Exception, _unexpected)
