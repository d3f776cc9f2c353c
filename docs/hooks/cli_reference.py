"""MkDocs hook (not API): renders the argparse parsers' help into docs/cli.md.

A page line ``<!-- cli: fastcal -->`` or ``<!-- cli: tracking -->`` becomes the help of
that command and of each of its subcommands, formatted by argparse itself at build time,
so the CLI reference cannot drift from the parsers.
"""

import argparse
import contextlib
import importlib
import os
from pathlib import Path
import re
import sys

ROOT = Path(__file__).resolve().parents[2]
MARK = re.compile(r"^<!-- cli: (\w+) -->$", re.M)
# module and the function that builds its parser, per command
PARSERS = {"fastcal": ("fastcal.cli", "_parser"), "tracking": ("tracking.cli", "build_parser")}
# The longest line of a help block: what a code block of the site shows without scrolling
# (Material's content column holds about 80 characters of its code font at any window width;
# a little less than that, for fonts a little wider).
WIDTH = 78


def build_parser(command):
    """The top-level parser of ``command`` ("fastcal" or "tracking")."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    module, name = PARSERS[command]
    return getattr(importlib.import_module(module), name)()


def subcommands(parser):
    """(name, parser) of each subcommand, in the order they were added."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return list(action.choices.items())
    return []


@contextlib.contextmanager
def _columns():
    # argparse wraps help at $COLUMNS - 2; fix it so the page does not depend on the terminal
    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = str(WIDTH + 2)
    try:
        yield
    finally:
        if old is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = old


def render(command):
    """Markdown for one command: its help, then a section per subcommand."""
    with _columns():
        parser = build_parser(command)
        parts = [f"## `{command}`", "", "```text", parser.format_help().rstrip(), "```", ""]
        for name, sub in subcommands(parser):
            parts += [f"### `{command} {name}`", "", "```text", sub.format_help().rstrip(), "```", ""]
    return "\n".join(parts)


def on_page_markdown(markdown, page, config, files):
    return MARK.sub(lambda m: render(m.group(1)), markdown)
