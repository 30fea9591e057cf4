"""Every flag of every command says what it does (issue 27 item 6)."""

from __future__ import annotations

import argparse

import pytest

from decider.app.cli import build_parser


def _subparsers(parser: argparse.ArgumentParser, prefix: str = "decider"):
    yield prefix, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _subparsers(sub, f"{prefix} {name}")


def _commands():
    return list(_subparsers(build_parser()))


@pytest.mark.parametrize("command,parser", _commands(), ids=[name for name, _ in _commands()])
def test_every_flag_has_help(command, parser):
    missing = [
        "/".join(a.option_strings) for a in parser._actions
        if a.option_strings and not isinstance(a, argparse._HelpAction) and not (a.help or "").strip()
    ]
    assert missing == [], f"{command}: flags without help: {missing}"


def test_ask_sampling_flags_say_they_leave_the_bars_alone_without_think():
    ask = dict(_commands())["decider ask"]
    flags = {a.option_strings[0]: a.help for a in ask._actions if a.option_strings}
    for flag in ("--temperature", "--top-k", "--top-p", "--min-p", "--repetition-penalty",
                 "--frequency-penalty", "--presence-penalty", "--seed"):
        assert "without --think the bars do not change" in flags[flag], flag
    # a raw completion has no bars: its sampling flags do not speak of them
    complete = dict(_commands())["decider complete"]
    help_text = {a.option_strings[0]: a.help for a in complete._actions if a.option_strings}["--temperature"]
    assert "without --think" not in help_text
