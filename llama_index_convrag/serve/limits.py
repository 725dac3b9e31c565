"""The request body limit, enforced before a body is read (a 413 in the one error shape naming the limit); the
request's arrival time is stamped here too (the outermost of the API's own middleware: a turn's ``timings`` count
from it)."""

from __future__ import annotations

import re
import time
from typing import Any, Mapping

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from llama_index_convrag.serve.errors import APIError
from llama_index_convrag.serve.state import Limits


#: the upload route (``PUT /v1/knowledge-bases/{id}/documents/{name}``), whose body limit is ``max_upload_bytes``
UPLOAD_PATH = re.compile(r"/v1/knowledge-bases/[^/]+/documents/.")

ARRIVED = "convrag_arrived"
"""The key of ``scope["state"]`` holding the request's ``time.perf_counter()`` on arrival."""


def arrived_at(scope: Mapping[str, Any]) -> float:
    """When the request arrived (``time.perf_counter()``; now, for a scope that did not pass the middleware)."""
    return scope.get("state", {}).get(ARRIVED, time.perf_counter())


class BodyLimitMiddleware:
    """413 ``body_too_large`` once a body passes its limit (``max_upload_bytes`` for an upload (:data:`UPLOAD_PATH`),
    ``max_body_bytes`` for the rest), whether announced by Content-Length or streamed."""

    def __init__(self, app: ASGIApp, limits: Limits) -> None:
        self.app, self.limits = app, limits

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        scope.setdefault("state", {})[ARRIVED] = time.perf_counter()
        upload = scope["method"] == "PUT" and UPLOAD_PATH.match(scope["path"]) is not None
        limit, name = ((self.limits.max_upload_bytes, "max_upload_bytes") if upload
                       else (self.limits.max_body_bytes, "max_body_bytes"))
        headers = dict(scope.get("headers") or [])
        declared = headers.get(b"content-length")
        if declared is not None and declared.isdigit():
            if int(declared) > limit:
                await _refuse(send, limit, name)
            else:  # the server holds the body to its declared length: nothing to count (streams pass untouched)
                await self.app(scope, receive, send)
            return
        seen = 0
        started = False

        async def limited_receive() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    raise _TooLarge()
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, limited_receive, tracking_send)
        except _TooLarge:
            if not started:
                await _refuse(send, limit, name)


class _TooLarge(Exception):
    pass


async def _refuse(send: Any, limit: int, name: str) -> None:
    err = APIError(413, "body_too_large", f"the request body is larger than {limit} bytes ({name})", name)
    response = err.response()
    await send({"type": "http.response.start", "status": 413,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(response.body)).encode())]})
    await send({"type": "http.response.body", "body": response.body})
