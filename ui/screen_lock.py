"""Is the screen locked? Best effort, so watch mode grabs nothing while it is.

On Linux the desktop's screensaver is asked over the session D-Bus: `org.freedesktop.ScreenSaver.GetActive`
(KDE, Xfce, Cinnamon, MATE, light-locker) and `org.gnome.ScreenSaver.GetActive` (GNOME); true while the lock
(or blanking) screen is up. Without a session bus or either service (a bare X server, Xvfb, a tiling window
manager with a plain locker such as i3lock) the answer is "not known" and watch mode keeps grabbing: what such a
locker shows is the lock picture, which does not change, so it costs no decision either.
Other platforms: not detected (None).
"""

from __future__ import annotations

import sys
import time

CACHE_SECONDS = 2.0  # a D-Bus round trip per grab is not needed: the lock state changes rarely
SERVICES = (
    ("org.freedesktop.ScreenSaver", "/org/freedesktop/ScreenSaver", "org.freedesktop.ScreenSaver"),
    ("org.gnome.ScreenSaver", "/org/gnome/ScreenSaver", "org.gnome.ScreenSaver"),
)


def _ask_dbus() -> bool | None:
    try:
        from PySide6.QtDBus import QDBusConnection, QDBusInterface
    except ImportError:  # a PySide6 build without QtDBus
        return None
    bus = QDBusConnection.sessionBus()
    if not bus.isConnected():
        return None
    for service, path, interface in SERVICES:
        proxy = QDBusInterface(service, path, interface, bus)
        if not proxy.isValid():
            continue
        reply = proxy.call("GetActive")
        arguments = reply.arguments()
        if arguments and isinstance(arguments[0], bool):
            return arguments[0]
    return None


class LockWatch:
    """screen_locked(): True (locked), False (not locked) or None (cannot tell), asked at most every 2 s."""

    def __init__(self) -> None:
        self._asked_at = -CACHE_SECONDS
        self._answer: bool | None = None
        self.method = "the session D-Bus screensaver (freedesktop / GNOME)" if sys.platform.startswith("linux") else "none"

    def screen_locked(self) -> bool | None:
        if not sys.platform.startswith("linux"):
            return None
        now = time.monotonic()
        if now - self._asked_at >= CACHE_SECONDS:
            self._asked_at = now
            self._answer = _ask_dbus()
        return self._answer
