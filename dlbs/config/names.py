"""The rules for parameter names and experiment ids (docs/language.md sections 2 and 9).

A name travels everywhere an experiment goes: log headers (`__name__=json`, whose keys are
letters, digits, `_`, `.` and `-`: docs/backends/protocol.md), the results database,
environment variables and reports. So it is checked when the spec is loaded, not when a
run trips over it. An experiment id becomes part of file names, so it is a plain word.
"""

from __future__ import annotations

import re

from dlbs.config.limits import MAX_NAME_LENGTH
from dlbs.errors import ConfigError

#: ASCII letters, digits, `_` and `-`, in dot-separated parts; the first starts with a letter
#: or `_` (`exp.model`, `runtime.env.CUDA_CACHE_PATH`, `global_batch`, `x.2`).
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*(?:\.[A-Za-z0-9_-]+)*")
NAME_RULE = ("names are ASCII letters, digits, '_' and '-' in dot-separated parts, starting "
             f"with a letter or '_' (exp.model, my_var), at most {MAX_NAME_LENGTH} characters")

#: What `exp.id` may be, computed or set by the user: a word that is safe in a file name.
EXPERIMENT_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
EXPERIMENT_ID_RULE = ("an experiment id is 1 to 64 ASCII letters, digits, '.', '_' or '-', "
                      "starting with a letter or a digit")


#: The key of a backend's progress notes in a log (docs/backends/protocol.md section 3): a
#: parameter of that name would be read back from a log header as a note, not a value.
PROGRESS_KEY = "progress"


def is_name(name: str) -> bool:
    return len(name) <= MAX_NAME_LENGTH and NAME.fullmatch(name) is not None


def check_name(name: object, source: str) -> str:
    """`name` if it follows the rule, else a ConfigError naming where it was written."""
    if not isinstance(name, str) or not is_name(name):
        shown = repr(name) if len(repr(name)) <= 80 else repr(name)[:77] + "..."
        raise ConfigError(f"{source}: invalid parameter name {shown}", hint=NAME_RULE)
    if name == PROGRESS_KEY:
        raise ConfigError(f"{source}: {PROGRESS_KEY!r} cannot be a parameter name: it is the key "
                          "of a backend's progress notes in a log",
                          hint="choose another name (my.progress, progress_x)")
    return name


def is_experiment_id(value: object) -> bool:
    if not isinstance(value, str):
        return False
    if value.isascii() and value.isalnum() and len(value) <= 64:
        return True  # letters and digits, as every computed id: no pattern to run
    return EXPERIMENT_ID.fullmatch(value) is not None
