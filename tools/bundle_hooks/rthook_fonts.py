# PyInstaller runtime hook: before Qt starts, point fontconfig at the bundle's fonts.conf, which reads the system's
# own configuration and adds the fonts shipped in the bundle, so the window has text even on a machine without fonts.
import os
import sys

_conf = os.path.join(getattr(sys, "_MEIPASS", ""), "fonts", "fonts.conf")
if os.path.isfile(_conf) and "FONTCONFIG_FILE" not in os.environ:
    os.environ["FONTCONFIG_FILE"] = _conf
