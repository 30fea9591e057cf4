# PyInstaller runtime hook, run before Decider's own code.
import os
import sys

# Fonts: point fontconfig at the bundle's fonts.conf, which reads the system's own configuration and adds the fonts
# shipped in the bundle, so the window has text even on a machine without fonts.
_conf = os.path.join(getattr(sys, "_MEIPASS", ""), "fonts", "fonts.conf")
if os.path.isfile(_conf) and "FONTCONFIG_FILE" not in os.environ:
    os.environ["FONTCONFIG_FILE"] = _conf
# Locale: with no locale set at all (a bare `env -i`, some service managers) the python command coerces C to
# C.UTF-8 (PEP 538) before Qt starts; a frozen program does not, and Qt then prints a warning about it.
if not any(os.environ.get(name) for name in ("LC_ALL", "LC_CTYPE", "LANG")):
    os.environ["LC_CTYPE"] = "C.UTF-8"
# Qt's plugins (platforms, image formats) are the bundle's own, never another Qt's from the environment; set here
# because tools/bundle.py drops PyInstaller's PySide6 hook, which also imports Qt at every start.
os.environ["QT_PLUGIN_PATH"] = os.path.join(getattr(sys, "_MEIPASS", ""), "PySide6", "Qt", "plugins")
