"""A global hotkey without extra dependencies, where the platform allows one.

- X11 (Qt platform "xcb"): XGrabKey on the root window through libX11 (ctypes; Qt's xcb plugin already
  links libX11, so it is there wherever this path runs), on a second display connection watched by a
  QSocketNotifier in the UI thread.
- Windows: RegisterHotKey (user32, ctypes) for the UI thread; WM_HOTKEY arrives through a Qt native
  event filter.
- Wayland, macOS, offscreen/minimal platforms: no global hotkey. `message` says why; the window keeps
  an in-app shortcut for the same key sequence.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys
import time

from PySide6.QtCore import QAbstractNativeEventFilter, QCoreApplication, QObject, QSocketNotifier, Qt, Signal
from PySide6.QtGui import QGuiApplication, QKeySequence


class HotkeyUnavailable(Exception):
    pass


def split_sequence(text: str) -> tuple[Qt.Key, Qt.KeyboardModifier]:
    """One key plus modifiers from a text such as "Ctrl+Shift+D"; HotkeyUnavailable when it is not one."""
    sequence = QKeySequence(text)
    if sequence.isEmpty() or sequence.count() != 1:
        raise HotkeyUnavailable(f"{text!r} is not a single key combination")
    combination = sequence[0]  # type: ignore[index]  # PySide6's stubs omit QKeySequence.__getitem__
    key = combination.key()
    if key in (Qt.Key.Key_unknown, Qt.Key.Key_Control, Qt.Key.Key_Shift, Qt.Key.Key_Alt, Qt.Key.Key_Meta):
        raise HotkeyUnavailable(f"{text!r} has no main key")
    return key, combination.keyboardModifiers()


def _key_name(key: Qt.Key) -> str:
    return QKeySequence(key).toString(QKeySequence.SequenceFormat.PortableText)


def platform_note() -> str | None:
    """Why no global hotkey can exist in this session, or None when a backend may work."""
    platform = QGuiApplication.platformName() if QGuiApplication.instance() else ""
    if platform in ("offscreen", "minimal", "minimalegl", "vnc", "linuxfb", "eglfs"):
        return f"global hotkeys need a desktop session (Qt platform '{platform}')"
    if platform.startswith("wayland"):
        return "global hotkeys are not available on Wayland (no portal support without extra dependencies)"
    if platform == "cocoa":
        return "global hotkeys are not available on macOS in this version"
    if platform == "xcb":
        return None
    if sys.platform == "win32" and platform == "windows":
        return None
    return f"global hotkeys are not supported on Qt platform '{platform or 'unknown'}'"


# ---------------------------------------------------------------- X11


class _XKeyEvent(ctypes.Structure):
    _fields_ = [
        ("type", ctypes.c_int), ("serial", ctypes.c_ulong), ("send_event", ctypes.c_int),
        ("display", ctypes.c_void_p), ("window", ctypes.c_ulong), ("root", ctypes.c_ulong),
        ("subwindow", ctypes.c_ulong), ("time", ctypes.c_ulong), ("x", ctypes.c_int), ("y", ctypes.c_int),
        ("x_root", ctypes.c_int), ("y_root", ctypes.c_int), ("state", ctypes.c_uint), ("keycode", ctypes.c_uint),
        ("same_screen", ctypes.c_int),
    ]


class _XEvent(ctypes.Union):
    _fields_ = [("type", ctypes.c_int), ("xkey", _XKeyEvent), ("pad", ctypes.c_long * 24)]


class _XErrorEvent(ctypes.Structure):
    _fields_ = [
        ("type", ctypes.c_int), ("display", ctypes.c_void_p), ("resourceid", ctypes.c_ulong),
        ("serial", ctypes.c_ulong), ("error_code", ctypes.c_ubyte), ("request_code", ctypes.c_ubyte),
        ("minor_code", ctypes.c_ubyte),
    ]


_X_ERROR_HANDLER = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(_XErrorEvent))
_KEY_PRESS = 2
_SHIFT, _LOCK, _CONTROL, _MOD1, _MOD2, _MOD4 = 1, 2, 4, 8, 16, 64
_BAD_ACCESS = 10


def _load_xlib():
    name = ctypes.util.find_library("X11") or "libX11.so.6"
    xlib = ctypes.CDLL(name)
    xlib.XOpenDisplay.argtypes = [ctypes.c_char_p]
    xlib.XOpenDisplay.restype = ctypes.c_void_p
    xlib.XCloseDisplay.argtypes = [ctypes.c_void_p]
    xlib.XDefaultRootWindow.argtypes = [ctypes.c_void_p]
    xlib.XDefaultRootWindow.restype = ctypes.c_ulong
    xlib.XConnectionNumber.argtypes = [ctypes.c_void_p]
    xlib.XStringToKeysym.argtypes = [ctypes.c_char_p]
    xlib.XStringToKeysym.restype = ctypes.c_ulong
    xlib.XKeysymToKeycode.argtypes = [ctypes.c_void_p, ctypes.c_ulong]
    xlib.XKeysymToKeycode.restype = ctypes.c_ubyte
    xlib.XGrabKey.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint, ctypes.c_ulong, ctypes.c_int, ctypes.c_int, ctypes.c_int]
    xlib.XUngrabKey.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint, ctypes.c_ulong]
    xlib.XSync.argtypes = [ctypes.c_void_p, ctypes.c_int]
    xlib.XFlush.argtypes = [ctypes.c_void_p]
    xlib.XPending.argtypes = [ctypes.c_void_p]
    xlib.XNextEvent.argtypes = [ctypes.c_void_p, ctypes.POINTER(_XEvent)]
    xlib.XSetErrorHandler.argtypes = [_X_ERROR_HANDLER]
    xlib.XSetErrorHandler.restype = ctypes.c_void_p
    return xlib


def _x_keysym_name(key: Qt.Key) -> str:
    if Qt.Key.Key_A <= key <= Qt.Key.Key_Z:
        return chr(ord("a") + int(key) - int(Qt.Key.Key_A))
    if Qt.Key.Key_0 <= key <= Qt.Key.Key_9:
        return chr(ord("0") + int(key) - int(Qt.Key.Key_0))
    if Qt.Key.Key_F1 <= key <= Qt.Key.Key_F35:
        return f"F{int(key) - int(Qt.Key.Key_F1) + 1}"
    names = {
        Qt.Key.Key_Space: "space", Qt.Key.Key_Return: "Return", Qt.Key.Key_Enter: "KP_Enter", Qt.Key.Key_Tab: "Tab",
        Qt.Key.Key_Escape: "Escape", Qt.Key.Key_Insert: "Insert", Qt.Key.Key_Delete: "Delete", Qt.Key.Key_Home: "Home",
        Qt.Key.Key_End: "End", Qt.Key.Key_PageUp: "Prior", Qt.Key.Key_PageDown: "Next", Qt.Key.Key_Pause: "Pause",
        Qt.Key.Key_Print: "Print", Qt.Key.Key_ScrollLock: "Scroll_Lock", Qt.Key.Key_Left: "Left", Qt.Key.Key_Right: "Right",
        Qt.Key.Key_Up: "Up", Qt.Key.Key_Down: "Down",
    }
    if key in names:
        return names[key]
    raise HotkeyUnavailable(f"the key {_key_name(key)!r} cannot be used as a global hotkey; use a letter, digit or F-key")


class _X11Backend:
    def __init__(self, on_trigger) -> None:
        self._on_trigger = on_trigger
        try:
            self.xlib = _load_xlib()
        except OSError as exc:
            raise HotkeyUnavailable(f"libX11 not found ({exc})") from None
        self.display = self.xlib.XOpenDisplay(None)
        if not self.display:
            raise HotkeyUnavailable(f"cannot open the X display {os.environ.get('DISPLAY', '')!r}")
        self.root = self.xlib.XDefaultRootWindow(self.display)
        self._grabs: list[tuple[int, int]] = []
        self._keycode = 0
        self._mods = 0
        self._notifier = QSocketNotifier(self.xlib.XConnectionNumber(self.display), QSocketNotifier.Type.Read)
        self._notifier.activated.connect(self._drain)

    def grab(self, key: Qt.Key, modifiers: Qt.KeyboardModifier) -> None:
        keysym = self.xlib.XStringToKeysym(_x_keysym_name(key).encode())
        keycode = self.xlib.XKeysymToKeycode(self.display, keysym) if keysym else 0
        if not keycode:
            raise HotkeyUnavailable(f"the key {_key_name(key)!r} is not on this keyboard layout")
        mods = 0
        if modifiers & Qt.KeyboardModifier.ShiftModifier:
            mods |= _SHIFT
        if modifiers & Qt.KeyboardModifier.ControlModifier:
            mods |= _CONTROL
        if modifiers & Qt.KeyboardModifier.AltModifier:
            mods |= _MOD1
        if modifiers & Qt.KeyboardModifier.MetaModifier:
            mods |= _MOD4
        errors: list[int] = []

        def on_error(_display, event) -> int:
            errors.append(event.contents.error_code)
            return 0

        handler = _X_ERROR_HANDLER(on_error)
        previous = self.xlib.XSetErrorHandler(handler)
        try:
            # The same combination with Caps Lock and Num Lock on, so they do not hide the hotkey.
            for extra in (0, _LOCK, _MOD2, _LOCK | _MOD2):
                self.xlib.XGrabKey(self.display, keycode, mods | extra, self.root, 0, 1, 1)  # GrabModeAsync
                self._grabs.append((keycode, mods | extra))
            self.xlib.XSync(self.display, 0)
        finally:
            self.xlib.XSetErrorHandler(ctypes.cast(previous, _X_ERROR_HANDLER) if previous else _X_ERROR_HANDLER())
        if errors:
            self.ungrab()
            if _BAD_ACCESS in errors:
                raise HotkeyUnavailable("another program already uses this key combination")
            raise HotkeyUnavailable(f"the X server refused the key grab (error {errors[0]})")
        self._keycode, self._mods = keycode, mods
        self._drain()

    def ungrab(self) -> None:
        if not self._grabs:
            return
        for keycode, mods in self._grabs:
            self.xlib.XUngrabKey(self.display, keycode, mods, self.root)
        self._grabs = []
        self.xlib.XFlush(self.display)

    def _drain(self, *args) -> None:
        event = _XEvent()
        while self.xlib.XPending(self.display):
            self.xlib.XNextEvent(self.display, ctypes.byref(event))
            if event.type == _KEY_PRESS and event.xkey.keycode == self._keycode:
                if event.xkey.state & ~(_LOCK | _MOD2) & 0xFF == self._mods:
                    self._on_trigger()

    def close(self) -> None:
        self.ungrab()
        self._notifier.setEnabled(False)
        self.xlib.XCloseDisplay(self.display)
        self.display = None


# ---------------------------------------------------------------- Windows


def _win_vk(key: Qt.Key) -> int:
    if Qt.Key.Key_A <= key <= Qt.Key.Key_Z or Qt.Key.Key_0 <= key <= Qt.Key.Key_9:
        return int(key)  # Qt uses the ASCII codes, like the virtual-key codes
    if Qt.Key.Key_F1 <= key <= Qt.Key.Key_F24:
        return 0x70 + int(key) - int(Qt.Key.Key_F1)
    codes = {
        Qt.Key.Key_Space: 0x20, Qt.Key.Key_Return: 0x0D, Qt.Key.Key_Tab: 0x09, Qt.Key.Key_Escape: 0x1B, Qt.Key.Key_Insert: 0x2D,
        Qt.Key.Key_Delete: 0x2E, Qt.Key.Key_Home: 0x24, Qt.Key.Key_End: 0x23, Qt.Key.Key_PageUp: 0x21, Qt.Key.Key_PageDown: 0x22,
        Qt.Key.Key_Pause: 0x13, Qt.Key.Key_Left: 0x25, Qt.Key.Key_Up: 0x26, Qt.Key.Key_Right: 0x27, Qt.Key.Key_Down: 0x28,
    }
    if key in codes:
        return codes[key]
    raise HotkeyUnavailable(f"the key {_key_name(key)!r} cannot be used as a global hotkey; use a letter, digit or F-key")


class _WindowsFilter(QAbstractNativeEventFilter):
    WM_HOTKEY = 0x0312

    def __init__(self, hotkey_id: int, on_trigger) -> None:
        super().__init__()
        self.hotkey_id = hotkey_id
        self.on_trigger = on_trigger

    def nativeEventFilter(self, event_type, message):  # noqa: N802
        if bytes(event_type) == b"windows_generic_MSG":
            from ctypes import wintypes

            msg = wintypes.MSG.from_address(int(message))
            if msg.message == self.WM_HOTKEY and msg.wParam == self.hotkey_id:
                self.on_trigger()
                return True, 0
        return False, 0


class _WindowsBackend:
    ID = 0xDEC1

    def __init__(self, on_trigger) -> None:
        self.user32 = ctypes.windll.user32  # type: ignore[attr-defined]
        self._filter = _WindowsFilter(self.ID, on_trigger)
        app = QCoreApplication.instance()
        assert app is not None, "a global hotkey needs the running application"
        app.installNativeEventFilter(self._filter)
        self._registered = False

    def grab(self, key: Qt.Key, modifiers: Qt.KeyboardModifier) -> None:
        mods = 0x4000  # MOD_NOREPEAT
        if modifiers & Qt.KeyboardModifier.AltModifier:
            mods |= 0x1
        if modifiers & Qt.KeyboardModifier.ControlModifier:
            mods |= 0x2
        if modifiers & Qt.KeyboardModifier.ShiftModifier:
            mods |= 0x4
        if modifiers & Qt.KeyboardModifier.MetaModifier:
            mods |= 0x8
        if not self.user32.RegisterHotKey(None, self.ID, mods, _win_vk(key)):
            raise HotkeyUnavailable("another program already uses this key combination")
        self._registered = True

    def ungrab(self) -> None:
        if self._registered:
            self.user32.UnregisterHotKey(None, self.ID)
            self._registered = False

    def close(self) -> None:
        self.ungrab()
        app = QCoreApplication.instance()
        if app is not None:
            app.removeNativeEventFilter(self._filter)


# ---------------------------------------------------------------- the object the window uses


class GlobalHotkey(QObject):
    """`triggered` fires when the registered combination is pressed anywhere on the desktop."""

    triggered = Signal()
    DEBOUNCE_S = 0.3

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._backend: _X11Backend | _WindowsBackend | None = None
        self._last = 0.0
        self.sequence = ""
        self.available = False
        self.message = "global hotkey not set"

    def register(self, sequence: str) -> bool:
        """(Re)register; returns whether the global hotkey works. `message` explains either way."""
        self.unregister()
        self.sequence = sequence
        note = platform_note()
        if note is not None:
            self.available, self.message = False, note
            return False
        try:
            key, modifiers = split_sequence(sequence)
            if self._backend is None:
                platform = QGuiApplication.platformName()
                self._backend = _X11Backend(self._fire) if platform == "xcb" else _WindowsBackend(self._fire)
            self._backend.grab(key, modifiers)
        except HotkeyUnavailable as exc:
            self.available, self.message = False, f"global hotkey {sequence} unavailable: {exc}"
            return False
        except Exception as exc:  # a platform surprise must never stop the app
            self.available, self.message = False, f"global hotkey {sequence} unavailable: {type(exc).__name__}: {exc}"
            return False
        self.available = True
        self.message = f"global hotkey {QKeySequence(sequence).toString(QKeySequence.SequenceFormat.NativeText)} active"
        if QGuiApplication.platformName() == "xcb" and os.environ.get("WAYLAND_DISPLAY"):
            self.message += " (XWayland: fires only while an X11 window has focus)"
        return True

    def unregister(self) -> None:
        if self._backend is not None:
            try:
                self._backend.ungrab()
            except Exception:
                pass
        self.available = False

    def close(self) -> None:
        if self._backend is not None:
            try:
                self._backend.close()
            except Exception:
                pass
            self._backend = None
        self.available = False

    def _fire(self) -> None:
        now = time.monotonic()
        if now - self._last < self.DEBOUNCE_S:
            return
        self._last = now
        self.triggered.emit()
