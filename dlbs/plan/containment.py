"""Where an experiment may write: its id, its log folder and its files (docs/security.md).

Checked for every experiment when the plan is made (and when a plan file is read), so that
no value can steer a run's files outside the folder the user chose:
- `exp.id` is a plain word (`dlbs.config.names.EXPERIMENT_ID`), whether computed or set;
- `exp.log_dir`, when the experiment has one, is not empty (an empty folder would put the
  results database and the lock in `/`);
- every file a run writes (`WRITTEN`: the log, the trace, the results database) is
  normalised (`logs/./a//b.log` -> `logs/a/b.log`), its parts fit a file system's limits,
  and a `..` in it may not lead out of `exp.log_dir`. A file elsewhere is allowed only as an
  absolute path without `..`: written so on purpose, not assembled from a value such as
  `exp.model: ../../x`. (Two experiments writing one file: `checks.RunChecks`.)
"""

from __future__ import annotations

import os
import posixpath
import re
from collections.abc import Callable
from typing import Any

from dlbs.config.limits import MAX_FILE_NAME_BYTES, MAX_PATH_BYTES
from dlbs.config.names import EXPERIMENT_ID_RULE, is_experiment_id
from dlbs.errors import PlanError
from dlbs.util.credentials import is_database_url, without_password

ID = "exp.id"
LOG_DIR = "exp.log_dir"
LOG_FILE = "exp.log_file"
TRACE_FILE = "exp.trace_file"
RESULTS_DB = "runtime.results_db"
#: A URL's scheme: a results database on a server, not a file to contain.
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")
#: The files a run writes, by parameter, and what each is called in messages; an empty
#: value means none (an experiment that is not traced has no trace file), except the log.
WRITTEN = {LOG_FILE: "log file", TRACE_FILE: "trace file", RESULTS_DB: "results database"}


def contain(experiment: dict[str, Any], label: str | Callable[[], str],
            passed: dict[str, tuple[str, Any, str]] | None = None) -> None:
    """Check (and normalise, in place) the experiment's id and files; see the module doc.

    `label` (or what it returns, asked only when a check fails) says which experiment it is
    in the error message. `passed`: per parameter, the last path that passed with its folder
    and its normal form, kept by the caller from one experiment to the next; the experiments
    of a plan share their log folder and results database, and a check reads nothing else.
    """
    try:
        _contain(experiment, {} if passed is None else passed)
    except PlanError as error:
        text = label() if callable(label) else label
        where = f" (experiment: {text})" if text else ""
        raise PlanError(error.message + where, hint=error.hint) from None


def _contain(experiment: dict[str, Any], passed: dict[str, tuple[str, Any, str]]) -> None:
    """`contain` but for the label, which its caller adds to each message's end."""
    identity = experiment.get(ID)
    if type(identity) is int:  # a spec without the default declarations may say `exp.id: 7`
        identity = str(identity)
    if identity is not None and not is_experiment_id(identity):
        raise PlanError(f"{ID} {_shown(identity)} is not a valid experiment id",
                        hint=EXPERIMENT_ID_RULE)
    folder = experiment.get(LOG_DIR, ...)
    if folder is not ...:
        if not isinstance(folder, str) or not folder.strip():
            raise PlanError(f"{LOG_DIR} is empty",
                            hint="name the folder of the logs and the results database "
                                 "(default: logs)")
        last = passed.get(LOG_DIR)
        if last is None or last[0] != folder:
            _check_lengths(LOG_DIR, folder)
            passed[LOG_DIR] = (folder, None, folder)
    for name in WRITTEN:
        path = experiment.get(name)
        last = passed.get(name)
        if last is not None and last[0] == path and last[1] == folder and type(path) is str:
            experiment[name] = last[2]  # as it passed with the experiment before
            continue
        _contain_file(experiment, name, folder)
        if type(path) is str:
            passed[name] = (path, folder, experiment[name])


def _contain_file(experiment: dict[str, Any], name: str, folder: Any) -> None:
    """The rules of the module doc for the file `name` names (normalised in place)."""
    path = experiment.get(name)
    if path is None or (path == "" and name != LOG_FILE):
        return
    if name == RESULTS_DB and isinstance(path, str) and _URL.match(path):
        if is_database_url(path):
            return  # a database server's URL (postgresql://...), no file: the store checks it
        # Any other URL would be taken as a path: folders named after it, its password in
        # the plan, the logs and the store. Refused, without the password.
        raise PlanError(f"{name} {_shown(without_password(path))} is a URL of no results "
                        "store dlbs opens",
                        hint="a results store is an SQLite file (a path) or a postgresql:// "
                             "URL (its scheme in any case)")
    if not isinstance(path, str) or not path.strip():
        raise PlanError(f"{name} is empty")
    if path.endswith("/"):
        raise PlanError(f"{name} {_shown(path)} names a folder, not a file")
    _check_lengths(name, path)
    normal = _normal(path)
    if ".." in path and ".." in path.split("/") and not _inside(normal, folder):
        target = f"{LOG_DIR} {_shown(folder)}" if isinstance(folder, str) else "its folder"
        raise PlanError(f"{name} {_shown(path)} leads out of {target} through '..'",
                        hint="a value such as exp.id or exp.model must not hold '..' or '/'; "
                             f"a {WRITTEN[name]} elsewhere is an absolute path without '..'")
    if normal != path:
        experiment[name] = normal


def _normal(path: str) -> str:
    """`posixpath.normpath(path)` of a non-empty path, at once when it is normal already.

    No empty part (`//`), no part that starts with a dot (`.`, `..`, or a hidden name: the
    check is short) and no trailing `/`: a path normpath leaves as it is, as most are.
    """
    if "//" in path or "/." in path or path.startswith(".") or path.endswith("/"):
        return posixpath.normpath(path)
    return path


def _inside(path: str, folder: Any) -> bool:
    """Whether the normalised `path` is in `folder` (a relative path: in the working folder)."""
    if not isinstance(folder, str):
        return not path.startswith("../") and path != ".." and not os.path.isabs(path)
    base = posixpath.normpath(folder)
    if os.path.isabs(path) != os.path.isabs(base):
        base, path = os.path.abspath(base), os.path.abspath(path)
    return base == "." and not path.startswith("../") and path != ".." or \
        path.startswith(base.rstrip("/") + "/")


def _check_lengths(name: str, path: str) -> None:
    encoded = path.encode("utf-8", "surrogateescape")
    if len(encoded) <= MAX_FILE_NAME_BYTES:
        return  # no part is longer than the whole (and a name's limit is below a path's)
    for part in encoded.split(b"/"):
        if len(part) > MAX_FILE_NAME_BYTES:
            raise PlanError(f"{name} has a file name of {len(part):,} bytes, more than the "
                            f"{MAX_FILE_NAME_BYTES} a file system allows",
                            hint="shorten the values that make up the name "
                                 "(exp.model, exp.id, ...)")
    if len(encoded) > MAX_PATH_BYTES:
        raise PlanError(f"{name} is {len(encoded):,} bytes long, more than the {MAX_PATH_BYTES:,}"
                        f" a path may have",
                        hint="shorten the values that make up the path")


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
