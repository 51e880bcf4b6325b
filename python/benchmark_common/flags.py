"""The command-line pieces every backend shares: yes/no words, dtype names, trace levels.

Standard library only (Python 3.8 and newer: the dummy backend runs under a bare `python3`).
A backend builds its parser as a `FlagParser`, which raises `FlagError` instead of printing
usage and exiting, so that a bad flag is still reported through the log protocol
(docs/backends/protocol.md section 5).

Three lists here are repeated on dlbs's side of the boundary and kept equal by
tests/unit/test_backend_boundary.py: the yes/no words (dlbs/util/booleans.py), the dtype names
(`exp.dtype`'s choices) and the trace levels (`exp.trace_level`'s choices).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

#: The words read as true and as false, in any case (a bare boolean flag also means true).
TRUE_WORDS = ("true", "yes", "on", "1", "t", "y")
FALSE_WORDS = ("false", "no", "off", "0", "f", "n")
#: `--dtype` values -> the canonical name (`float` is float32, as in DLBS).
DTYPES = {"float": "float32", "float32": "float32", "float16": "float16",
          "bfloat16": "bfloat16"}
#: `--trace_level` values, each recording what the one before records and more.
TRACE_LEVELS = ("none", "step", "layer", "operator", "kernel", "full")

_BOOLEAN_WORDS = "/".join(word for pair in zip(TRUE_WORDS, FALSE_WORDS) for word in pair)


@dataclass(frozen=True)
class ProtocolOptions:
    """The flags every backend takes (docs/backends/protocol.md section 1), parsed and checked.

    A backend's own options dataclass adds its flags to these.
    """

    model: str
    forward_only: bool
    batch_size: int
    num_batches: int
    num_warmup_batches: int
    num_gpus: int
    device: str
    dtype: str
    data_dir: str


class FlagError(ValueError):
    """A bad command line: the message names the flag and what is accepted."""


class FlagParser(argparse.ArgumentParser):
    """An ArgumentParser that raises FlagError instead of printing usage and exiting."""

    def error(self, message: str):  # type: ignore[override]
        raise FlagError(message)


def parse_bool(text: str) -> bool:
    """A yes/no word of TRUE_WORDS or FALSE_WORDS (any case); anything else is an error."""
    value = text.strip().lower()
    if value in TRUE_WORDS:
        return True
    if value in FALSE_WORDS:
        return False
    raise argparse.ArgumentTypeError(f"expected a boolean ({_BOOLEAN_WORDS}), got {text!r}")


def parse_auto_bool(text: str):
    """``auto`` (any case), or a boolean as parse_bool reads it."""
    return "auto" if text.strip().lower() == "auto" else parse_bool(text)


def parse_dtype(text: str) -> str:
    """A name of DTYPES (any case) -> its canonical name (`float` -> `float32`)."""
    try:
        return DTYPES[text.strip().lower()]
    except KeyError:
        raise argparse.ArgumentTypeError(
            f"unsupported dtype {text!r}; choose one of {', '.join(DTYPES)}") from None


def add_bool_flag(parser, name: str, default: bool, help_text: str, *,
                  show_default: bool = False) -> None:
    """A boolean flag `--name`: '--x', '--x true', '--x=off' ... (a bare flag means true)."""
    if show_default:
        help_text = f"{help_text} (default: {str(default).lower()})"
    parser.add_argument(f"--{name}", type=parse_bool, nargs="?", const=True, default=default,
                        help=help_text)


def _class_count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of classes, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a number of classes >= 1 (0: the "
                                         f"model's own), got {text!r}")
    return value


def add_num_classes_flag(parser, help_text: str = "the model's number of classes, its last "
                         "layer (0: the model's own); for trained weights of another class "
                         "count") -> None:
    """`--num_classes`: the model's class count (0, the default: the model's own)."""
    parser.add_argument("--num_classes", type=_class_count, default=0, help=help_text)


def take_flags(namespace: argparse.Namespace, names) -> dict:
    """The values of `names` that a parsed namespace has, deleted from it.

    A group of flags parsed into an options object of its own (the evaluation's, the
    generation's) leaves the namespace to the backend's other options.
    """
    values = {name: getattr(namespace, name) for name in names if hasattr(namespace, name)}
    for name in values:
        delattr(namespace, name)
    return values


def traces_at_least(level: str, wanted: str) -> bool:
    """Whether a trace of `level` records what a trace of `wanted` records."""
    return TRACE_LEVELS.index(level) >= TRACE_LEVELS.index(wanted)


def check_trace_flags(level: str, batches: int, trace_file: str, device: str) -> None:
    """The trace flags' combinations that no backend can trace; raises FlagError."""
    if level == "none":
        return
    if batches < 1:
        raise FlagError(f"--trace_batches must be >= 1, got {batches}")
    if not trace_file:
        raise FlagError(f"--trace_level {level} needs --trace_file")
    if level == "kernel" and device != "gpu":
        raise FlagError("--trace_level kernel traces GPU kernels: it needs --device gpu")
