"""An attempt row's shape, checked in one place before any reader uses it.

A row of a results store is data written by whoever could write to that store (every writer
of a shared PostgreSQL, anyone whose SQLite file was brought in with `results copy`;
docs/security.md, "Trust boundaries"). The schema keeps the types of a few columns; the rest
holds what a writer put there: `params` that is a JSON string or a list, `results` that is
JSON null, an attempt number that is text. Every reader of whole rows or summaries (`parse`,
`results copy`, reports and their charts, `history`, `dlbs serve`, `trace`, resuming) reads
them through `checked_row`, which refuses a malformed row with one error that names it
(its store, experiment and attempt), never a traceback further on.

The rules, per column:
- `exp_id`: a non-empty string; `attempt`: an integer of at least 1;
- `status`: NULL (an attempt that has not ended) or one of STATUSES;
- `started_at`: a string; `ended_at`, `status_msg`, `log_path`, `job_id`, `run_tag`,
  `run_host`, `run_folder`: NULL or a string;
- `params`: a JSON object; `results`, `environment`, `summary`: NULL (read as `{}`) or a
  JSON object. JSON `null`, a list, a string or a number is no object, nor is text that is
  not JSON.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dlbs.errors import ResultsError
from dlbs.results.protocol import STATUSES
from dlbs.util import exact_json

#: Columns holding a JSON object; True where SQL NULL is allowed (and read as {}).
OBJECT_COLUMNS = {"params": False, "results": True, "environment": True, "summary": True}
#: Columns holding text; True where SQL NULL is allowed.
TEXT_COLUMNS = {"started_at": False, "ended_at": True, "status_msg": True, "log_path": True,
                "job_id": True, "run_tag": True, "run_host": True, "run_folder": True}
HINT = ("the row was written by something other than dlbs (docs/security.md, \"Trust "
        "boundaries\"): fix or delete it, or read the store with `dlbs parse` to see it")


class MalformedRow(ResultsError):
    """A row of a results store that is not shaped as dlbs writes rows."""


def checked_row(location: str, row: Mapping[str, Any]) -> dict[str, Any]:
    """`row` (column name -> stored value) checked (see the module), JSON columns parsed.

    Only the columns `row` holds are checked; the JSON ones come back as dicts.
    """
    exp_id = row.get("exp_id")
    attempt = row.get("attempt")

    def refuse(what: str) -> MalformedRow:
        shown_id = exp_id if isinstance(exp_id, str) else repr(exp_id)
        shown_attempt = attempt if type(attempt) is int else repr(attempt)
        return MalformedRow(f"results database {location}: the row of experiment {shown_id}, "
                            f"attempt {shown_attempt}: {what}", hint=HINT)

    if "exp_id" in row and (not isinstance(exp_id, str) or not exp_id):
        raise refuse(f"its exp_id is {_kind(exp_id)}, not an experiment id")
    if "attempt" in row and (type(attempt) is not int or attempt < 1):
        raise refuse(f"its attempt number is {_kind(attempt)}, not a whole number of at "
                     "least 1")
    if "status" in row and row["status"] is not None and row["status"] not in STATUSES:
        raise refuse(f"its status is {_kind(row['status'])}, not one of {', '.join(STATUSES)}")
    for name, nullable in TEXT_COLUMNS.items():
        if name in row and not (isinstance(row[name], str) or
                                (nullable and row[name] is None)):
            raise refuse(f"its {name} is {_kind(row[name])}, not text")
    checked = dict(row)
    for name, nullable in OBJECT_COLUMNS.items():
        if name in row:
            checked[name] = _object(row[name], nullable, name, refuse)
    return checked


def _object(text: Any, nullable: bool, name: str, refuse: Any) -> dict[str, Any]:
    if text is None:
        if nullable:
            return {}
        raise refuse(f"its {name} is NULL, not a JSON object")
    if not isinstance(text, str):
        raise refuse(f"its {name} is {_kind(text)}, not a JSON object")
    try:
        value = exact_json.loads(text)
    except (ValueError, RecursionError):
        raise refuse(f"its {name} is not JSON") from None
    if not isinstance(value, dict):
        raise refuse(f"its {name} is {_kind(value)} in JSON, not an object")
    return value


def _kind(value: Any) -> str:
    """What a stored value is, in words, for a message (never its whole text)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return f"the number {value!r}"[:60]
    if isinstance(value, str):
        return "an empty string" if not value else "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, bytes | memoryview):
        return "bytes"
    return f"a {type(value).__name__}"
