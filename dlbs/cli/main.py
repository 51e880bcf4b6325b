"""`dlbs` entry point: dispatches to one module per command.

Each command module defines `add_arguments(parser)` and `run(args) -> int`. Modules are
imported only when their command is used, so `dlbs plan` does not pay for the Docker SDK.
"""

from __future__ import annotations

import argparse
import errno
import importlib
import os
import sys
from collections.abc import Sequence
from typing import Any, TextIO

from dlbs.errors import DlbsError
from dlbs.util.credentials import mask_text
from dlbs.util.terminal import one_line

# command -> (module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("dlbs.cli.run", "run every experiment of a spec or plan, then summarise"),
    "plan": ("dlbs.cli.plan", "resolve a spec into its experiments and print or write the plan"),
    "validate": ("dlbs.cli.validate", "check a spec and its plan without running anything"),
    "print-config": ("dlbs.cli.print_config",
                     "print the merged spec (defaults, includes, file, CLI)"),
    "help": ("dlbs.cli.help", "show parameter documentation from the configs"),
    "list": ("dlbs.cli.list", "list models, frameworks or targets"),
    "parse": ("dlbs.cli.parse", "read experiment logs (DLBS's too) and print them as JSON or CSV"),
    "report": ("dlbs.cli.report",
               "regular, scaling or pivot tables (or an HTML page) from logs or DBs"),
    "compare": ("dlbs.cli.compare", "compare two sets of results; exit 1 when something "
                "got slower"),
    "plot": ("dlbs.cli.plot", "charts of results (PNG or SVG), with presets"),
    "trace": ("dlbs.cli.trace", "where a traced experiment's time went: layers, kernels, "
              "steps (from its trace, log or results DB)"),
    "predict": ("dlbs.cli.predict", "the top classes of image files, from a model and its "
                "weights"),
    "results": ("dlbs.cli.results", "copy results between stores (SQLite files, PostgreSQL "
                "URLs, log folders)"),
    "history": ("dlbs.cli.history", "each configuration's results over run tags; --check: "
                "exit 1 on a regression"),
    "serve": ("dlbs.cli.serve", "a read-only web application over a results store"),
}


class _Version(argparse.Action):
    """`--version`, reading the version only when asked (see dlbs/__init__.py)."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS,
                 default: str = argparse.SUPPRESS, help: str | None = None) -> None:
        super().__init__(option_strings, dest, nargs=0, default=default, help=help)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: object, option_string: str | None = None) -> None:
        from dlbs import __version__

        print(f"dlbs {__version__}")
        parser.exit()


def _terminal_columns() -> int:
    """`shutil.get_terminal_size().columns`, without importing shutil (see _HelpFormatter)."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns > 0:
        return columns
    try:
        columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
    except (AttributeError, ValueError, OSError):
        columns = 0  # stdout is None, closed, detached or not a terminal
    return columns or 80


class _HelpFormatter(argparse.HelpFormatter):
    """argparse's help formatter, finding the terminal's width as shutil would.

    argparse makes a formatter for each argument added (to check its metavar), and each asks
    shutil for the width: importing shutil, and with it bz2 and lzma, was about 6 million
    instructions of every command's start, for help that is seldom shown.
    """

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24,
                 width: int | None = None) -> None:
        super().__init__(prog, indent_increment, max_help_position,
                         _terminal_columns() - 2 if width is None else width)


class _Parser(argparse.ArgumentParser):
    """argparse that reports usage errors in the project's one-line format."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _HelpFormatter)
        super().__init__(*args, **kwargs)

    def _print_message(self, message: str, file: TextIO | None = None) -> None:
        # argparse drops an OSError here: `dlbs --help >/dev/full` would say nothing.
        if message:
            (file or sys.stderr).write(message)

    def error(self, message: str) -> None:  # type: ignore[override]
        print(f"dlbs: error: {_one_line(message)}", file=sys.stderr)
        print(f"hint: run '{self.prog} --help' for usage", file=sys.stderr)
        raise SystemExit(2)


def build_parser(command: str | None = None, alone: bool = False) -> argparse.ArgumentParser:
    """The parser; only `command`'s module is imported to add its arguments.

    `alone`: `command`'s is the only command parser. The others serve only the top-level help
    and the error for an unknown command, and each costs about a millisecond (argparse asks
    gettext for its texts and makes help formatters even when no help is shown).
    """
    parser = _Parser(prog="dlbs", description="Deep-learning benchmarking suite.")
    parser.add_argument("--version", action=_Version, help="show dlbs's version and exit")
    parser.add_argument("--debug", action="store_true", help="show tracebacks for errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name, (module_name, help_text) in COMMANDS.items():
        if alone and name != command:
            continue
        command_parser = sub.add_parser(name, help=help_text, description=help_text)
        command_parser.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                                    help="show tracebacks for errors")
        if name == command:
            importlib.import_module(module_name).add_arguments(command_parser)
    return parser


def _one_line(text: str) -> str:
    # A database URL quoted in a message keeps its password to itself (docs/security.md);
    # one line, whatever a file name or a value in it holds.
    return one_line(mask_text(text))


def _open_closed_streams() -> None:
    """`dlbs report >&-`: a closed stdout (or stderr) is a reader that left, as a broken pipe.

    Python starts with `sys.stdout` None then; what would go there goes nowhere instead, and
    a benchmark started by `dlbs run` gets the same nowhere as its descriptor.
    """
    for name in ("stdout", "stderr"):
        if getattr(sys, name) is None:
            setattr(sys, name, open(os.devnull, "w"))  # kept open for the whole process


#: Why a write fails that is no bug of ours: a full disk (or /dev/full), a quota, a file
#: too large, an I/O error, a read-only file system.
WRITE_ERRORS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO, errno.EROFS})


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command: its exit status, or one error line (docs/security.md)."""
    _open_closed_streams()
    try:
        try:
            return _dispatch(argv)
        finally:
            # What is still buffered fails here, where it can be said, not at the exit.
            sys.stdout.flush()
    except BrokenPipeError:
        # `dlbs plan | head`: the reader left; that is not an error of ours.
        _abandon(sys.stdout)
        sys.stderr.close()
        return 0
    except OSError as error:
        if error.errno not in WRITE_ERRORS:
            raise
        where = f"cannot write {_one_line(str(error.filename))}" if error.filename else \
            "cannot write the output"
        _abandon(sys.stdout)
        _say(f"dlbs: error: {where}: {_one_line(error.strerror or str(error))}")
        return 2


def _dispatch(argv: Sequence[str] | None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    command = next((token for token in argv if token in COMMANDS), None)
    # `dlbs [--debug] COMMAND ...` parses with COMMAND's parser alone; anything else before
    # the command (--help, --version, an unknown option) gets every command's, as `dlbs`
    # without a command does.
    alone = command is not None and all(
        token == "--debug" for token in argv[:argv.index(command)])
    parser = build_parser(command, alone)
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    module = importlib.import_module(COMMANDS[args.command][0])
    try:
        return module.run(args)
    except DlbsError as error:
        if args.debug:
            raise
        # One line each, whatever a file name or a value in them holds.
        _say(f"dlbs: error: {_one_line(error.message)}")
        if error.hint:
            _say(f"hint: {_one_line(error.hint)}")
        return error.exit_status
    except KeyboardInterrupt:
        _say("dlbs: interrupted")
        return 130


def _say(line: str) -> None:
    """A line on stderr, if stderr can still be written (it may be /dev/full too)."""
    try:
        print(line, file=sys.stderr, flush=True)
    except OSError:
        _abandon(sys.stderr)


def _abandon(stream: TextIO) -> None:
    """A standard stream that failed: from now on it goes to /dev/null.

    What it still buffers would fail again when Python flushes it at the exit, and say so
    in a traceback-like message; its descriptor is pointed at /dev/null instead.
    """
    try:
        descriptor = stream.fileno()
    except (OSError, ValueError, AttributeError):
        return  # not a file (a test's buffer)
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, descriptor)
    finally:
        os.close(null)


if __name__ == "__main__":
    sys.exit(main())
