"""The remote engine's HTTP: JSON in and out over the stdlib client, every failure a one-line RemoteError."""

from __future__ import annotations

import json
import socket
import urllib.error
import urllib.request

from ..core.errors import DeciderError


class RemoteError(DeciderError):
    """The server could not be reached or answered something unusable."""


class RemoteHTTPError(RemoteError):
    """The server answered with an HTTP error status (kept, so probes can tell 'unsupported' from 'down')."""

    def __init__(self, message: str, status: int):
        super().__init__(message)
        self.status = status


class JsonClient:
    def __init__(self, root: str, api_key: str | None, timeout: float):
        self.root = root  # the server's address without a path, e.g. http://host:8000
        self.api_key = api_key
        self.timeout = timeout

    def call(self, method: str, path: str, body: dict | None = None) -> dict:
        url = f"{self.root}{path}"
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(url, data=data, method=method)
        request.add_header("Content-Type", "application/json")
        if self.api_key:
            request.add_header("Authorization", f"Bearer {self.api_key}")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                raw = response.read()
        except urllib.error.HTTPError as exc:
            message = error_message(exc.read())
            if exc.code == 401:
                raise RemoteHTTPError(f"{url}: 401 unauthorized — check the API key ({message})", 401) from None
            raise RemoteHTTPError(f"{url}: HTTP {exc.code}: {message}", exc.code) from None
        except (socket.timeout, TimeoutError):
            raise RemoteError(f"{url}: no answer within {self.timeout:g} s") from None
        except urllib.error.URLError as exc:
            if isinstance(exc.reason, (socket.timeout, TimeoutError)):
                raise RemoteError(f"{url}: no answer within {self.timeout:g} s") from None
            raise RemoteError(f"cannot reach {self.root}: {exc.reason}") from None
        except OSError as exc:
            raise RemoteError(f"cannot reach {self.root}: {exc}") from None
        try:
            parsed = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise RemoteError(f"{url}: the server did not answer JSON") from None
        if not isinstance(parsed, dict):
            raise RemoteError(f"{url}: the server answered {type(parsed).__name__}, not an object")
        return parsed


def error_message(raw: bytes) -> str:
    try:
        parsed = json.loads(raw)
        error = parsed.get("error")
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])
        if isinstance(error, str):
            return error
        if isinstance(parsed.get("detail"), (str, list)):  # FastAPI servers (vLLM, llama-cpp-python)
            return str(parsed["detail"])[:300]
    except (ValueError, AttributeError):
        pass
    return raw[:200].decode("utf-8", "replace").strip() or "no message"
