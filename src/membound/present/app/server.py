"""The web app's server: one page (static/), a JSON API (api.py) and the limits that keep one
browser from tying it up, or another site from using it.

- the `Host` header must name the address it serves (starlette's TrustedHostMiddleware: 400
  otherwise), so a DNS-rebinding page cannot reach it under its own name;
- a POST must say `Content-Type: application/json` (415 otherwise): a cross-site form or a
  text/plain fetch is not a CORS "simple" request then, and a browser sends none without
  asking; a POST whose `Origin` is another site is refused (403);
- it listens on loopback unless `run(..., allow_remote=True)` (`membound app --allow-remote`),
  which warns loudly: the page has no login;
- a request body over `max_body_bytes` is refused (413) before it is read in full;
- the library runs in at most `max_workers` threads; when `max_pending` requests already wait
  or run, a new one is answered 503 at once instead of queueing;
- bad input is a 400 with the library's one-line message and the field it names; anything else
  is a 500 with a one-line message (the traceback goes to the server's log, never the page).
"""
from __future__ import annotations

import errno
import ipaddress
import logging
import socket
import sys
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anyio
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from ...errors import InvalidInputError, MemboundError
from . import DEFAULT_PORT, api

STATIC = Path(__file__).resolve().parent / "static"
log = logging.getLogger("membound.app")
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")     # Host names a loopback-bound app answers to


class TooLarge(Exception):
    pass


class _Refused(Exception):
    """A request refused before its body is read: `status` and the one-line reason."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


def _check_headers(request: Request) -> None:
    """A POST is JSON (415 otherwise) from this app's own page or from no page: an `Origin`
    other than the host and port the request was sent to is refused (403)."""
    media, _, params = request.headers.get("content-type", "").partition(";")
    charset = params.partition("charset=")[2].strip().strip('"').lower()
    if media.strip().lower() != "application/json" or charset not in ("", "utf-8"):
        raise _Refused(415, "the request body must be JSON, sent with Content-Type: application/json")
    origin = request.headers.get("origin")
    if origin is not None and _origin_netloc(origin) != request.headers.get("host", "").lower():
        raise _Refused(403, "a request from another site's page is refused (its Origin is not this app)")


def _origin_netloc(origin: str) -> str | None:
    """host[:port] of an `Origin` header, or None ("null", not http(s), malformed)."""
    try:
        parts = urlsplit(origin)
    except ValueError:
        return None
    ok = parts.scheme in ("http", "https") and parts.netloc and "@" not in parts.netloc and not parts.path.strip("/")
    return parts.netloc.lower() if ok else None


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
    body = api.parse_json(b"".join(chunks) or b"{}", "the request body", None, api.MAX_BODY_DEPTH)
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
            if request.method == "POST":
                _check_headers(request)
            body = await _json_body(request, limit) if request.method == "POST" else {}
            return JSONResponse(await gate.run(fn, body))
        except _Refused as err:
            return JSONResponse({"error": str(err), "field": None, "index": None}, status_code=err.status)
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


def create_app(*, allowed_hosts: Sequence[str] = LOOPBACK_NAMES, max_body_bytes: int = 256_000, max_workers: int = 2,
               max_pending: int = 8) -> Starlette:
    """The Starlette application (serve it with any ASGI server; `run` uses uvicorn). It answers
    only requests whose `Host` is one of `allowed_hosts` (names or IP literals, IPv6 in
    brackets; the port is not compared)."""
    allowed = tuple(h.lower() for h in allowed_hosts)
    if not allowed or any("*" in h for h in allowed):
        raise InvalidInputError("allowed_hosts", allowed_hosts, "host names or addresses, without wildcards")
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
    return Starlette(routes=routes,
                     middleware=[Middleware(TrustedHostMiddleware, allowed_hosts=list(allowed), www_redirect=False)])


def is_loopback(host: str) -> bool:
    """Whether `host` is this machine only: 'localhost' or a loopback address (127.0.0.0/8, ::1)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def host_names(host: str, trusted_hosts: Sequence[str] = ()) -> tuple[str, ...]:
    """The `Host` names an app bound to `host` answers to: the loopback names, the bind address
    itself (IPv6 in brackets) unless it is a wildcard (0.0.0.0, ::), and `trusted_hosts`."""
    bare = host.strip("[]")
    own = () if bare in ("0.0.0.0", "::") else (f"[{bare}]" if ":" in bare else bare,)
    return tuple(dict.fromkeys(h.lower() for h in (*LOOPBACK_NAMES, *own, *trusted_hosts)))


def listen(host: str, port: int) -> socket.socket:
    """A socket listening on host:port, or InvalidInputError naming the port or host and why
    (a port out of range, in use, not allowed to this user; a host that is not this machine's)."""
    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
        raise InvalidInputError("port", port, "a TCP port from 1 to 65535")
    try:
        family, kind, proto, _, addr = socket.getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM)[0]
    except (OSError, UnicodeError) as err:
        raise InvalidInputError("host", host, f"an address of this machine ({err})") from None
    sock = socket.socket(family, kind, proto)
    try:
        if sys.platform != "win32":      # a port in TIME_WAIT (on Windows the option would share a live one)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(addr)
        sock.listen(128)
    except OSError as err:
        sock.close()
        if err.errno == errno.EADDRNOTAVAIL:
            raise InvalidInputError("host", host, f"an address of this machine ({err.strerror})") from None
        raise InvalidInputError("port", port, f"a port this user may listen on at {host} "
                                f"({err.strerror or err})") from None
    return sock


def run(host: str = "127.0.0.1", port: int = DEFAULT_PORT, *, allow_remote: bool = False,
        trusted_hosts: Sequence[str] = ()) -> None:
    """Serve the app until interrupted (uvicorn; at most 64 open connections). `host` must be a
    loopback address unless `allow_remote`; the banner prints once the port is bound."""
    import uvicorn   # uvicorn: the app extra
    if not is_loopback(host) and not allow_remote:
        raise InvalidInputError("host", host, "a loopback address (127.0.0.1, ::1 or localhost): the page has no "
                                "login, so serving other machines takes --allow-remote")
    allowed = host_names(host, trusted_hosts)
    app = create_app(allowed_hosts=allowed)
    sock = listen(host, port)
    shown = f"[{host.strip('[]')}]" if ":" in host else host
    if not is_loopback(host):
        print(f"membound app: WARNING: listening on {shown}:{port}, beyond this machine. The page has no login "
              f"and no TLS: anyone who can reach this port can run it. It answers to the Host names "
              f"{', '.join(allowed)} (add others with --trusted-host NAME).", file=sys.stderr, flush=True)
    print(f"membound app: http://{shown}:{port}/  (Ctrl-C stops it)", flush=True)
    server = uvicorn.Server(uvicorn.Config(app, limit_concurrency=64, timeout_keep_alive=5, log_level="warning"))
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
