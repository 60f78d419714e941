"""`membound app`: a local web page over the library (the `app` extra: starlette and uvicorn).

    pip install "membound[app]" && membound app        # http://127.0.0.1:8000/

`server.create_app()` is the ASGI application, `server.run(host, port)` serves it with uvicorn;
`api` holds the JSON endpoints as plain functions (the page draws what they return).
"""
from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:        # starlette is imported only when the server is wanted
    if name in ("create_app", "run"):
        from . import server
        return getattr(server, name)
    raise AttributeError(name)
