"""The stock openai client against a live `decider serve` on 127.0.0.1, for API tests on one model."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def openai_client(service) -> Iterator:
    """An ApiServer on a free port for `service`, and an openai.OpenAI pointed at it (no retries)."""
    import openai

    from decider.app.api.server import ApiServer

    server = ApiServer(service, "127.0.0.1", 0)
    server.start()
    try:
        yield openai.OpenAI(base_url=server.url, api_key="unused", max_retries=0, timeout=120)
    finally:
        server.stop()
