"""The HTTP API of ``distprove serve`` (Starlette): the routes, the bearer-token check and the
body limit. The routes call :class:`~distprove.service.service.ProvingService` in Starlette's
thread pool; every error is JSON ``{"error": "<one line>"}`` with its status.

The API is described by :data:`distprove.service.openapi.OPENAPI` at ``/openapi.json``.
"""

from __future__ import annotations

import asyncio
import hmac

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from distprove.service.openapi import OPENAPI
from distprove.service.service import ProvingService, RequestError

OPEN_PATHS = ("/healthz",)
"""Paths answered without the token."""


def error(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    """A JSON error response: one line."""
    return JSONResponse({"error": message.splitlines()[0] if message else ""}, status_code=status, headers=headers)


class BearerAuth:
    """ASGI middleware: every HTTP request but :data:`OPEN_PATHS` needs ``Authorization: Bearer
    <token>``, compared in constant time (:func:`hmac.compare_digest`); else 401."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app, self.token = app, token.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] not in OPEN_PATHS:
            given = b""
            for name, value in scope.get("headers", ()):
                if name == b"authorization":
                    given = value
            scheme, _, token = given.partition(b" ")
            if scheme.lower() != b"bearer" or not hmac.compare_digest(token.strip(), self.token):
                response = error(401, "missing or wrong bearer token (Authorization: Bearer <token>)",
                                 {"WWW-Authenticate": "Bearer"})
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


async def _body(request: Request, limit: int) -> bytes:
    """The request body, at most ``limit`` bytes (RequestError 413 past it, without reading on)."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise RequestError(413, f"body of {declared} bytes is over the limit of {limit} bytes (distprove.serve.max-body-bytes)")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise RequestError(413, f"body is over the limit of {limit} bytes (distprove.serve.max-body-bytes)")
        chunks.append(chunk)
    return b"".join(chunks)


def build_app(service: ProvingService, token: str | None = None) -> ASGIApp:
    """The ASGI application of ``service`` (with ``token``: the bearer-token check)."""
    settings = service.settings

    async def submit(request: Request) -> Response:
        name = request.path_params["name"]
        service.key(name)  # 404 before reading a body for nothing
        body = await _body(request, settings.max_body_bytes)
        rid, new = await run_in_threadpool(
            service.accept, name, body, request.headers.get("content-type", ""), request.headers.get("idempotency-key"),
        )
        return JSONResponse({"id": rid}, status_code=202 if new else 200, headers={"Location": f"/v1/proofs/{rid}"})

    async def proof(request: Request) -> Response:
        rid = request.path_params["id"]
        wait = request.query_params.get("wait")
        try:
            seconds = min(float(wait), settings.max_wait) if wait is not None else 0.0
        except ValueError:
            raise RequestError(400, f"wait must be a number of seconds, not {wait!r}") from None
        if seconds > 0:
            await _wait_for(service, rid, seconds)
        return JSONResponse(await run_in_threadpool(service.result, rid))

    async def keys(request: Request) -> Response:
        return JSONResponse({"keys": [
            {"name": k.name, "n_vars": k.info.n_vars, "n_public": k.info.n_public, "domain_size": k.info.domain_size,
             "inputs": bool(k.generator), "queue_depth": service.dispatcher.depth(k.name)}
            for k in service.keys.values()
        ]})

    async def verification_key(request: Request) -> Response:
        return JSONResponse(service.key(request.path_params["name"]).info.vk)

    async def healthz(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def metrics(request: Request) -> Response:
        return Response(service.metrics.render(), media_type="text/plain; version=0.0.4")

    async def openapi(request: Request) -> Response:
        return JSONResponse(OPENAPI)

    async def refused(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, RequestError)
        if exc.status in (404, 413, 415):
            service.metrics.rejected(str(exc.status))
        headers = {"Retry-After": str(exc.retry_after)} if exc.retry_after is not None else None
        return error(exc.status, exc.message, headers)

    async def http_error(request: Request, exc: Exception) -> Response:
        status = getattr(exc, "status_code", 500)
        return error(status, str(getattr(exc, "detail", "")) or "error")

    app = Starlette(
        routes=[
            Route("/v1/keys/{name}/proofs", submit, methods=["POST"]),
            Route("/v1/proofs/{id}", proof, methods=["GET"]),
            Route("/v1/keys", keys, methods=["GET"]),
            Route("/v1/keys/{name}/verification_key", verification_key, methods=["GET"]),
            Route("/healthz", healthz, methods=["GET"]),
            Route("/metrics", metrics, methods=["GET"]),
            Route("/openapi.json", openapi, methods=["GET"]),
        ],
        exception_handlers={RequestError: refused, 404: http_error, 405: http_error},
    )
    return BearerAuth(app, token) if token else app


async def _wait_for(service: ProvingService, rid: str, seconds: float) -> None:
    """Return when request ``rid`` finishes or after ``seconds``."""
    loop = asyncio.get_running_loop()
    event = asyncio.Event()

    def wake() -> None:
        loop.call_soon_threadsafe(event.set)

    service.watch(rid, wake)
    try:
        await asyncio.wait_for(event.wait(), seconds)
    except TimeoutError:
        pass
    finally:
        service.unwatch(rid, wake)
