"""The API server's lifecycle: uvicorn on a background thread, started and stopped by the desktop app
(the "Serve local API" toggle) or by `decider serve`.

Stack: uvicorn (h11) runs the Starlette routes on one event loop; engine work runs in worker threads,
one request at a time through the FIFO queue. Loopback by default; a non-loopback bind needs an API key.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import signal
import socket
import threading
import time
from collections.abc import Callable

import uvicorn

from decider.engine.core.errors import DeciderError, SettingsError

from .connection import Limits, protocol_class, quiet_uvicorn
from .policy import Policy, machine_names
from .routes import build_app
from .state import (
    DEFAULT_BODY_TIMEOUT,
    DEFAULT_HEADER_TIMEOUT,
    DEFAULT_MAX_BODY,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_QUEUE,
    DEFAULT_TIMEOUT,
    ApiState,
    ChatHook,
    DecisionHook,
    EngineQueue,
)
from .transport import Guard

log = logging.getLogger("decider.api")

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
START_TIMEOUT = 10.0
STOP_TIMEOUT = 5.0


# ----- binding rules -----


def is_loopback(host: str) -> bool:
    if host in ("localhost", "localhost.", "ip6-localhost"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None)
    except OSError:
        return False
    return bool(infos) and all(ipaddress.ip_address(str(info[4][0]).split("%")[0]).is_loopback for info in infos)


def check_bind(host: str, api_key: str | None) -> None:
    """Refuse to listen beyond this machine without a key: anyone on the network could drive the model."""
    if not is_loopback(host) and not api_key:
        raise SettingsError(
            f"refusing to listen on {host or 'all interfaces'} without an API key: pass --api-key KEY "
            "(or set DECIDER_API_KEY), or listen on 127.0.0.1"
        )


# ----- the server -----


class ApiServer:
    """The HTTP API around an EngineService; start() serves it on a background thread."""

    def __init__(
        self,
        service,
        host: str = DEFAULT_HOST,
        port: int = DEFAULT_PORT,
        api_key: str | None = None,
        *,
        max_queue: int = DEFAULT_MAX_QUEUE,
        max_body: int = DEFAULT_MAX_BODY,
        timeout: float = DEFAULT_TIMEOUT,
        header_timeout: float = DEFAULT_HEADER_TIMEOUT,
        body_timeout: float = DEFAULT_BODY_TIMEOUT,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        allow_origins: tuple[str, ...] = (),
        on_decision: DecisionHook | None = None,
        on_chat_completion: ChatHook | None = None,
    ):
        host = host.strip("[]")  # "[::1]" as written in a URL
        check_bind(host, api_key)
        if not isinstance(port, int) or isinstance(port, bool) or not 0 <= port <= 65535:
            raise SettingsError(f"port must be in 0..65535 (got {port!r})")
        if not isinstance(max_body, int) or isinstance(max_body, bool) or max_body < 1:
            raise SettingsError(f"max_body must be a positive integer (got {max_body!r})")
        if not isinstance(max_connections, int) or isinstance(max_connections, bool) or max_connections < 1:
            raise SettingsError(f"max_connections must be a positive integer (got {max_connections!r})")
        self.host = host
        self.requested_port = port
        self.timeout = timeout
        self.limits = Limits(max_connections=max_connections, header_timeout=header_timeout)
        # Beyond loopback, LAN clients reach the server by this machine's names (looked up once, here).
        own_names = frozenset() if is_loopback(host) else machine_names()
        self.policy = Policy(host, api_key or None, tuple(allow_origins), own_names)
        self.state = ApiState(
            service=service, api_key=api_key or None, max_body=max_body, queue=EngineQueue(max_queue),
            body_timeout=body_timeout, on_decision=on_decision, on_chat_completion=on_chat_completion,
        )
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._sock: socket.socket | None = None
        self._port: int | None = None

    # what the app and the tests read
    service = property(lambda self: self.state.service)
    api_key = property(lambda self: self.state.api_key)
    queue = property(lambda self: self.state.queue)
    stats = property(lambda self: self.state.stats)

    @property
    def port(self) -> int | None:
        return self._port

    @property
    def url(self) -> str | None:
        if self._port is None:
            return None
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self._port}/v1"

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> int:
        """Bind (OSError when the address is taken), serve on a background thread; returns the port."""
        if self._server is not None:
            raise SettingsError("the API server is already running")
        _ = self.state.token_chars  # the vocabulary scan, here: not in the first request's time
        sock = self._bind()
        self.state.stopping = False
        self.state.queue = EngineQueue(self.state.queue.max_waiting)  # a stopped queue stays closed
        quiet_uvicorn()
        config = uvicorn.Config(
            Guard(build_app(self.state), self.policy),
            http=protocol_class(self.limits), loop="asyncio", ws="none", lifespan="off", interface="asgi3",
            log_config=None, access_log=False, server_header=False, proxy_headers=False,
            timeout_keep_alive=int(self.timeout), timeout_graceful_shutdown=int(STOP_TIMEOUT),
        )
        server = uvicorn.Server(config)
        thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="decider-api", daemon=True)
        self._server, self._thread, self._sock, self._port = server, thread, sock, sock.getsockname()[1]
        thread.start()
        deadline = time.monotonic() + START_TIMEOUT
        while not server.started and thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.005)
        if not server.started:
            self.stop()
            raise DeciderError("the API server did not start")
        log.info("Decider API on %s, model %r", self.url, self.service.model_name)
        return self._port

    def _bind(self) -> socket.socket:
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            if os.name != "nt":  # on Windows SO_REUSEADDR would let two servers share a port
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((self.host, self.requested_port))
            sock.listen(128)  # bursts of connections while the loop is busy
        except OSError:
            sock.close()
            raise
        return sock

    def stop(self) -> None:
        """Stop accepting, cancel running generations and queued requests, close connections."""
        server, thread = self._server, self._thread
        if server is None:
            return
        self.state.stopping = True  # engine threads see it at their next step
        server.should_exit = True
        self._close_queue(server)
        if thread is not None:
            thread.join(STOP_TIMEOUT + 2)
            if thread.is_alive():
                server.force_exit = True
                thread.join(STOP_TIMEOUT)
        if self._sock is not None:
            self._sock.close()
        self._server, self._thread, self._sock, self._port = None, None, None, None

    def _close_queue(self, server: uvicorn.Server) -> None:
        """Wake the requests waiting in the queue (on the server's loop, where the queue lives)."""
        servers = getattr(server, "servers", None) or []
        for asyncio_server in servers:
            loop = asyncio_server.get_loop()
            loop.call_soon_threadsafe(self.state.queue.close)
            return


def serve(make_service: Callable[[], object], host: str, port: int, api_key: str | None,
          allow_origins: tuple[str, ...] = ()) -> int:
    """`decider serve`: check the address, load the model, serve until Ctrl+C."""
    check_bind(host, api_key)  # before the (slow) model load
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    server = ApiServer(make_service(), host=host, port=port, api_key=api_key, allow_origins=allow_origins)
    try:
        server.start()
    except OSError as exc:
        raise DeciderError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    log.info("Ctrl+C stops the server%s", "" if server.api_key else "; no API key: loopback clients only")
    if threading.current_thread() is threading.main_thread():
        # A process started in the background of a script inherits SIGINT ignored, and Python then never raises
        # KeyboardInterrupt: Ctrl+C (or a supervisor's SIGINT) would not stop the server.
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        while server.running:
            time.sleep(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0
