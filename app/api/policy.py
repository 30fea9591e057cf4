"""Who may use the API: the checks every request passes before routing (threat model: docs/api.md).

- Host: a browser page can make its own name resolve to 127.0.0.1 (DNS rebinding) and then read our
  replies as "same-origin". Its requests still carry its own name in `Host`, so only loopback names,
  the bound address and IP literals (which cannot be rebound) are accepted; when the server listens
  beyond loopback, also this machine's own names (a LAN client types those), never a foreign one.
- Origin: browsers add it to cross-site requests; any page may POST to 127.0.0.1. A request with an
  `Origin` is refused unless the user allowed that origin; an allowed one gets CORS headers and a
  preflight answer, so a web page the user trusts can call the API.
- Content-Type: a page can send a "simple" cross-site POST (text/plain, forms) without a preflight;
  requiring application/json closes that path for pages whose Origin a browser omits.
- The API key, when set, is compared in constant time.
"""

from __future__ import annotations

import hmac
import ipaddress
import socket

from starlette.types import Scope

from decider.engine.core.errors import SettingsError

from ..origins import ANY_ORIGIN, parse_origin
from .errors import ApiError

LOOPBACK_NAMES = frozenset({"localhost", "ip6-localhost", "ip6-loopback"})
WILDCARD_HOSTS = frozenset({"", "0.0.0.0", "::"})
CORS_METHODS = "GET, POST, OPTIONS"
CORS_HEADERS = "Authorization, Content-Type"
CORS_MAX_AGE = "600"


def header(scope: Scope, name: bytes) -> bytes | None:
    for key, value in scope["headers"]:
        if key == name:
            return value
    return None


def _host_name(value: str) -> str | None:
    """'name:port', '[v6]:port' or 'name' → the name, lower case; None when malformed."""
    value = value.strip().lower()
    if value.startswith("["):
        end = value.find("]")
        if end < 0 or (value[end + 1:] and not value[end + 1:].startswith(":")):
            return None
        return value[1:end]
    name, _, port = value.partition(":")
    if port and not port.isdigit():
        return None
    return name.rstrip(".")


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
        return True
    except ValueError:
        return False


def machine_names() -> frozenset[str]:
    """This machine's own names as a LAN client may type them: the host name, its first label, its
    fully qualified name and the mDNS name (`NAME.local`). Loopback names are handled apart."""
    names = set()
    for name in (socket.gethostname(), socket.getfqdn()):
        name = name.strip().lower().rstrip(".")
        if name and name not in LOOPBACK_NAMES and not name.endswith(".localhost"):
            names.add(name)
            short = name.split(".")[0]
            names.update({short, f"{short}.local"})
    return frozenset(names)


def _canonical_origin(origin: str) -> str | None:
    """A request's Origin in the spelling the allow-list keeps (parse_origin), or None when it is no web
    origin at all ("null", a bad port…): such a page is never on the list."""
    try:
        return parse_origin(origin)
    except SettingsError:
        return None


def check_content_type(scope: Scope) -> None:
    """A JSON body must say so (checked where a body is read, after the method and the size)."""
    content_type = (header(scope, b"content-type") or b"").split(b";")[0].strip().lower()
    if content_type != b"application/json":
        raise ApiError("unsupported_media_type", "a POST body must be JSON with 'Content-Type: application/json'",
                       param="Content-Type")


class Policy:
    def __init__(self, bound_host: str, api_key: str | None, allowed_origins: tuple[str, ...] = (),
                 own_names: frozenset[str] = frozenset()):
        """own_names: the machine's names to accept as Host (machine_names(), for a server beyond loopback)."""
        self.api_key = api_key
        self.bound = bound_host.lower()
        self.own_names = frozenset(n.lower().rstrip(".") for n in own_names)
        self.any_origin = ANY_ORIGIN in allowed_origins
        # SettingsError for a value that is no origin: `--allow-origin localhost:3000` would never match.
        self.origins = frozenset(parse_origin(o) for o in allowed_origins if o != ANY_ORIGIN)

    # ----- the checks -----

    def host_allowed(self, value: bytes | None) -> bool:
        if value is None:
            return True  # HTTP/1.0 without Host: no browser sends that
        try:
            name = _host_name(value.decode("ascii"))
        except UnicodeDecodeError:
            return False
        if not name:
            return False
        if name in LOOPBACK_NAMES or name.endswith(".localhost") or _is_ip(name) or name in self.own_names:
            return True
        return name == self.bound and self.bound not in WILDCARD_HOSTS

    def origin_allowed(self, origin: str) -> bool:
        return self.any_origin or _canonical_origin(origin) in self.origins

    def check_host(self, scope: Scope) -> None:
        if scope.get("http_version") not in ("1.0", "1.1"):
            raise ApiError("bad_request", f"HTTP/{scope.get('http_version')} is not spoken here: use HTTP/1.1")
        for name in (b"host", b"origin"):
            if sum(1 for key, _ in scope["headers"] if key == name) > 1:
                raise ApiError("bad_request", f"more than one {name.decode().title()} header", param=name.decode().title())
        host = header(scope, b"host")
        if not self.host_allowed(host):
            shown = host.decode("latin-1") if host is not None else ""
            names = ", ".join(["127.0.0.1", "localhost", *sorted(self.own_names)][:6])
            raise ApiError("forbidden", f"Host {shown!r:.80} is not this server: use {names} or an IP address "
                                        "(other names are refused against DNS rebinding)", param="Host")

    def check_origin(self, scope: Scope) -> str | None:
        """Refuse a browser origin the user did not allow; returns the allowed one (None: no Origin)."""
        return self._origin(scope)

    def _origin(self, scope: Scope) -> str | None:
        raw = header(scope, b"origin")
        if raw is None:
            return None
        origin = raw.decode("latin-1")
        if not self.origin_allowed(origin):
            raise ApiError("forbidden", f"requests from the web page {origin!r:.80} are not allowed: allow it with "
                                        "`decider serve --allow-origin ORIGIN` or, in the app, Local API → Allowed web pages",
                                        param="Origin")
        return origin

    def check_auth(self, scope: Scope) -> None:
        if not self.api_key:
            return
        value = header(scope, b"authorization")
        if value is None:
            raise ApiError("invalid_api_key", "missing API key: send the header 'Authorization: Bearer KEY'")
        scheme, _, given = value.partition(b" ")
        # compare_digest: the time taken does not tell how much of a guessed key was right
        if scheme.lower() != b"bearer" or not hmac.compare_digest(given.strip(), self.api_key.encode()):
            raise ApiError("invalid_api_key", "incorrect API key provided")

    # ----- CORS -----

    def is_preflight(self, scope: Scope) -> bool:
        return (scope["method"] == "OPTIONS" and header(scope, b"origin") is not None
                and header(scope, b"access-control-request-method") is not None)

    def preflight_headers(self, origin: str | None) -> dict[str, str]:
        return {**self.cors_headers(origin), "Access-Control-Allow-Methods": CORS_METHODS,
                "Access-Control-Allow-Headers": CORS_HEADERS, "Access-Control-Max-Age": CORS_MAX_AGE}

    def cors_headers(self, origin: str | None) -> dict[str, str]:
        if origin is None:
            return {}
        return {"Access-Control-Allow-Origin": origin, "Vary": "Origin"}
