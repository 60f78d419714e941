"""The web app's server: one page (static/), a JSON API (api.py) and the limits that keep one
browser from tying it up.

- a request body over `max_body_bytes` is refused (413) before it is read in full;
- the library runs in at most `max_workers` threads; when `max_pending` requests already wait
  or run, a new one is answered 503 at once instead of queueing;
- bad input is a 400 with the library's one-line message and the field it names; anything else
  is a 500 with a one-line message (the traceback goes to the server's log, never the page).
"""
from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from ..errors import MemboundError
from . import DEFAULT_PORT, api

STATIC = Path(__file__).resolve().parent / "static"
log = logging.getLogger("membound.app")


class TooLarge(Exception):
    pass


async def _json_body(request: Request, limit: int) -> dict[str, Any]:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise TooLarge
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise TooLarge
        chunks.append(chunk)
    try:
        body = json.loads(b"".join(chunks) or b"{}")
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise api.BadRequest(f"the request body is not JSON: {e}") from None
    if not isinstance(body, dict):
        raise api.BadRequest("the request body must be a JSON object of fields")
    return body


class _Gate:
    """At most `workers` library calls at once and `pending` requests waiting or running."""

    def __init__(self, workers: int, pending: int):
        self.limiter = anyio.CapacityLimiter(workers)
        self.pending, self.inflight = pending, 0

    async def run(self, fn: Callable[[dict], dict], body: dict) -> dict:
        if self.inflight >= self.pending:
            raise _Busy
        self.inflight += 1
        try:
            return await anyio.to_thread.run_sync(fn, body, limiter=self.limiter)
        finally:
            self.inflight -= 1


class _Busy(Exception):
    pass


def _endpoint(fn: Callable[[dict], dict], gate: _Gate, limit: int) -> Callable[[Request], Awaitable[Response]]:
    async def handler(request: Request) -> Response:
        try:
            body = await _json_body(request, limit) if request.method == "POST" else dict(request.query_params)
            return JSONResponse(await gate.run(fn, body))
        except TooLarge:
            return JSONResponse({"error": f"the request is over {limit:,} bytes", "field": None, "index": None},
                                status_code=413)
        except _Busy:
            return JSONResponse({"error": "the server is busy with other requests; try again in a moment",
                                 "field": None, "index": None}, status_code=503)
        except (api.BadRequest, MemboundError) as err:
            return JSONResponse(api.error_payload(err), status_code=400)
        except Exception as err:   # a bug: one line for the page, the traceback for the log
            log.exception("internal error in %s", request.url.path)
            return JSONResponse({"error": f"internal error ({type(err).__name__}); see the server log",
                                 "field": None, "index": None}, status_code=500)
    return handler


def create_app(*, max_body_bytes: int = 256_000, max_workers: int = 2, max_pending: int = 8) -> Starlette:
    """The Starlette application (serve it with any ASGI server; `run` uses uvicorn)."""
    gate = _Gate(max_workers, max_pending)
    cached: dict[str, dict] = {}

    def options(_body: dict) -> dict:
        if "options" not in cached:
            cached["options"] = api.options()
        return cached["options"]

    async def index(_request: Request) -> Response:
        return FileResponse(STATIC / "index.html", headers={"Cache-Control": "no-cache"})

    routes: list[BaseRoute] = [Route("/", index),
              Route("/api/options", _endpoint(options, gate, max_body_bytes), methods=["GET"])]
    for name in ("compare", "explain", "serve", "plan"):
        fn = getattr(api, name, None)
        if fn is not None:
            routes.append(Route(f"/api/{name}", _endpoint(fn, gate, max_body_bytes), methods=["POST"]))
    routes.append(Mount("/static", StaticFiles(directory=STATIC), name="static"))
    return Starlette(routes=routes)


def run(host: str = "127.0.0.1", port: int = DEFAULT_PORT) -> None:
    """Serve the app until interrupted (uvicorn; at most 64 open connections)."""
    import uvicorn
    print(f"membound app: http://{host}:{port}/  (Ctrl-C stops it)", flush=True)
    uvicorn.run(create_app(), host=host, port=port, limit_concurrency=64, timeout_keep_alive=5,
                log_level="warning")
