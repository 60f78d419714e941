"""`membound app`: a local web page over the library (the `app` extra: starlette and uvicorn).

    pip install "membound[app]" && membound app        # http://127.0.0.1:8321/

`server.create_app()` is the ASGI application, `server.run(host, port)` serves it with uvicorn;
`api` holds the JSON endpoints as plain functions (the page draws what they return).
"""
from __future__ import annotations

from typing import Any

DEFAULT_PORT = 8321
"""`membound app`'s port: none of the inference servers' a user runs beside it (vLLM and TGI's
8000, SGLang's 30000, llama.cpp's 8080, Ollama's 11434, LM Studio's 1234) nor Jupyter's 8888."""


def __getattr__(name: str) -> Any:        # starlette is imported only when the server is wanted
    if name in ("create_app", "run"):
        from . import server   # starlette: the app extra (server imports it)
        return getattr(server, name)
    raise AttributeError(name)
