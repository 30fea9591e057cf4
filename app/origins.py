"""Web-page origins the local API lets in: one spelling for the app's setting, `decider serve --allow-origin`
and the server's comparison with a request's `Origin` header."""

from __future__ import annotations

from urllib.parse import urlsplit

from decider.engine.core.errors import SettingsError

ANY_ORIGIN = "*"  # only from the command line, said out loud; the app's setting refuses it

_DEFAULT_PORTS = {"http": 80, "https": 443}
_HOST_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-.")


def parse_origin(text: str) -> str:
    """A web page's origin as browsers send it in `Origin` ("http://localhost:3000"), or SettingsError.

    Scheme, host and port only. Refused: "*" and "null" (either would let any web page, or any sandboxed
    or local file page, drive the local API: the hole an allow-list closes), paths, user names, other
    schemes. A default port is dropped and a non-ASCII host is IDNA-encoded, because that is what the
    browser sends and the server compares the strings.
    """
    given = text.strip() if isinstance(text, str) else text
    example = "(e.g. http://localhost:3000)"
    if not isinstance(given, str) or not given:
        raise SettingsError(f"an allowed origin must be a web page's origin {example}, got {text!r}")
    if given in ("*", "null"):
        who = "any web page" if given == "*" else "any sandboxed or local-file page"
        raise SettingsError(f"allowed origin {given!r} would let {who} use the local API: list each page's origin {example}")
    try:
        parts = urlsplit(given)
        port = parts.port
        host = parts.hostname
    except ValueError:
        raise SettingsError(f"allowed origin {given!r} has a bad port or address {example}") from None
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS or not parts.netloc:
        raise SettingsError(f"allowed origin {given!r} must start with http:// or https:// {example}")
    if parts.path not in ("", "/") or parts.query or parts.fragment or "?" in given or "#" in given:
        raise SettingsError(f"allowed origin {given!r} must not have a path: an origin is scheme, host and port {example}")
    if "@" in parts.netloc or not host:
        raise SettingsError(f"allowed origin {given!r} must name a host and no user {example}")
    if port == 0:
        raise SettingsError(f"allowed origin {given!r} has port 0 {example}")
    if ":" in host:  # an IPv6 literal, written in brackets
        shown = f"[{host}]"
    else:
        try:
            host = host.encode("idna").decode("ascii")
        except UnicodeError:
            raise SettingsError(f"allowed origin {given!r} has a host name that is not valid") from None
        if not set(host) <= _HOST_CHARS or host.startswith(("-", ".")) or ".." in host:
            raise SettingsError(f"allowed origin {given!r} has a host name that is not valid")
        shown = host
    if port is not None and port != _DEFAULT_PORTS[scheme]:
        return f"{scheme}://{shown}:{port}"
    return f"{scheme}://{shown}"
