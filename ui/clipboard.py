"""Turn clipboard text into a decision: a situation, then one option per line.

The format (also shown in the app's help):

    The dragon is awake and guards the only bridge.     <- situation: one or more lines
    What should the party do?
                                                        <- optional blank line
    A. Fight the dragon                                 <- options: the last lines,
    B) Sneak past it                                       each one option, with or without
    - Go back to town                                      a marker: "A." "A)" "(A)" "1." "-" "*" "•"

How the options are found, first rule that applies:
1. a blank line splits the text: the last block holds the options, everything above is the situation
   (so options may be written without markers);
2. otherwise the trailing lines that carry a marker are the options;
3. otherwise the first line is the situation and every following line is an option.
There must be a situation and 2 to 10 options; otherwise the error says what is missing.
"""

from __future__ import annotations

import re

from decider.engine.decisions.types import LABELS
from decider.engine.core.errors import SettingsError

MAX_OPTIONS = len(LABELS)  # one per answer letter
_MARKER = re.compile(r"^\s*(?:\(?[A-Ja-j][.)]|\([A-Ja-j]\)|\d{1,2}[.)]|[-*•–])\s+")


def strip_marker(line: str) -> str:
    return _MARKER.sub("", line, count=1).strip()


def _has_marker(line: str) -> bool:
    return bool(_MARKER.match(line))


def parse_situation(text: str) -> tuple[str, list[str]]:
    """(situation, options) from clipboard text; SettingsError with a plain message when it does not fit."""
    if not isinstance(text, str) or not text.strip():
        raise SettingsError("the clipboard is empty: copy a situation followed by one option per line")
    lines = [line.rstrip() for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n")]
    while lines and not lines[-1].strip():
        lines.pop()
    while lines and not lines[0].strip():
        lines.pop(0)

    blocks: list[list[str]] = [[]]
    for line in lines:
        if line.strip():
            blocks[-1].append(line)
        elif blocks[-1]:
            blocks.append([])
    blocks = [b for b in blocks if b]

    if len(blocks) >= 2:
        option_lines = blocks[-1]
        situation_lines = [line for block in blocks[:-1] for line in block]
    else:
        only = blocks[0]
        trailing = 0
        for line in reversed(only):
            if not _has_marker(line):
                break
            trailing += 1
        if trailing >= 2 and trailing < len(only):
            situation_lines, option_lines = only[:-trailing], only[-trailing:]
        else:
            situation_lines, option_lines = only[:1], only[1:]

    situation = "\n".join(line.strip() for line in situation_lines).strip()
    options = [strip_marker(line) for line in option_lines]
    options = [o for o in options if o]
    if not situation:
        raise SettingsError("no situation: put the question or situation on the first line(s), then the options")
    if len(options) < 2:
        raise SettingsError(
            f"found {len(options)} option{'s' if len(options) != 1 else ''}: put 2 to {MAX_OPTIONS} options "
            "on the last lines, one per line"
        )
    if len(options) > MAX_OPTIONS:
        raise SettingsError(f"found {len(options)} options: at most {MAX_OPTIONS}")
    return situation, options
