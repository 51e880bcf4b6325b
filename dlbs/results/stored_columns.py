"""A results database read as columns (columns.py), fast: two BLOBs per attempt.

One query reads every attempt's `report_row` (status, attempt, when, the batch-time
statistics) and `param_codes` (its view as integer codes: view_codes.py); numpy turns them
into arrays. Everything else is read only when a report asks for it: the values of a key it
shows (table `param_values`), the per-batch times of the pairs a comparison tests, a text
column, the JSON summary for a value that has no column of its own, whole attempts for a page
or a chart. Such reads use the same read-only connection, kept open while the part lives, and
find attempts by rowid: what they read never changes once an attempt has ended.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from dlbs.errors import ResultsError
from dlbs.results import schema, stats
from dlbs.results.columns import MISSING, Column, Record, finite_numbers
from dlbs.results.store import STARTED, open_store, store_name
from dlbs.results.view_codes import ABSENT, FIRST_VALUE, KEY_SHIFT, NULL, VALUE_MASK
from dlbs.util import exact_json

_FIELD = {name: index for index, name in enumerate(schema.REPORT_FIELDS)}
# Keys of an attempt's own columns, as a flat experiment names them.
_OWN_TEXT = {"results.log_file": "log_path", "results.status_msg": "status_msg"}
_TIMES = {"results.start_time": "started_at", "results.end_time": "ended_at"}
# Keys with at most this many stored values are decoded together, at the first decode.
_PRELOAD_VALUES = 1024


class StorePart:
    """The attempts of one results database (a `columns.Part`), in rowid order."""

    def __init__(self, location: str) -> None:
        # For messages and as the attempts' source: the path, or the URL without a password.
        self.path = path = store_name(location)
        self._store = store = open_store(location, read_only=True)
        weakref.finalize(self, store.close)
        try:
            rows = store.report_columns()
            self._key_names = store.view_keys()
            stored_bases = store.view_bases()
        except BaseException:
            store.close()
            raise
        self.size = len(rows)
        try:
            self._read_rows(rows, stored_bases)
        except (TypeError, ValueError, KeyError) as error:
            # Rows that dlbs did not write (SQL by hand, a damaged file): one clear error.
            raise ResultsError(
                f"results database {path}: cannot read the report columns of its attempts "
                f"({type(error).__name__}: {error})",
                hint="the rows were changed by something else than dlbs; `dlbs parse` reads "
                     "the raw columns") from error
        self._key_ids = {name: key_id for key_id, name in self._key_names.items()}
        self._decoded: dict[int, tuple[list[Any], list[str | None]]] = {}
        self._preloaded = False
        self._largest: dict[int, int] = {}    # key id -> the largest value number used
        self._summary_columns: dict[str, Column] = {}
        self._columns: dict[str, Column] = {}

    def _read_rows(self, rows: list[tuple[int, bytes, bytes]],
                   stored_bases: dict[int, bytes]) -> None:
        """Arrays of the report rows and codes (see the module); raises on damaged rows."""
        width = len(schema.REPORT_FIELDS)
        self._rowids = np.array([row[0] for row in rows], dtype=np.int64)
        report_rows = [row[1] for row in rows]
        if (np.fromiter(map(len, report_rows), dtype=np.intp, count=self.size) != width * 8
                ).any():
            raise ValueError("a report row of the wrong size")
        self._report = np.frombuffer(b"".join(report_rows), dtype="<f8").reshape(
            self.size, width)
        codes = [row[2] for row in rows]
        recency = self._field("recency")
        self.recency = np.where(np.isnan(recency), 0.0, recency)
        # The differences, grouped by key (a stable counting sort keeps each key's rows in
        # order): key id -> where its entries start and end in _entry_rows/_entry_numbers.
        sizes = np.fromiter(map(len, codes), dtype=np.intp, count=self.size)
        if (sizes % 8).any():
            raise ValueError("parameter codes of the wrong size")
        flat = np.frombuffer(b"".join(codes), dtype="<i8")
        keys = flat >> KEY_SHIFT
        order = np.argsort(keys.astype(np.int16 if len(self._key_names) < 1 << 15
                                       else np.int64), kind="stable")
        self._entry_rows = np.repeat(np.arange(self.size), sizes // 8)[order]
        self._entry_numbers = (flat[order] & VALUE_MASK).astype(np.intp)
        counts = np.bincount(keys, minlength=max(self._key_names, default=0) + 1)
        ends = np.cumsum(counts)
        self._delta = {key_id: (int(ends[key_id] - counts[key_id]), int(ends[key_id]))
                       for key_id in np.flatnonzero(counts).tolist()}
        base_ids, base_of_row = np.unique(self._field("param_base").astype(np.int64),
                                          return_inverse=True)
        self._base_of_row = base_of_row.reshape(-1)
        self._bases = [_base_numbers(stored_bases[int(base_id)])
                       for base_id in base_ids.tolist()]

    # -- columns.Part ---------------------------------------------------------------------

    def sources(self) -> tuple[np.ndarray, list[str]]:
        return np.zeros(self.size, dtype=np.intp), [self.path]

    def keys(self) -> list[str]:
        return list(self._key_ids)

    def column(self, key: str) -> Column:
        column = self._columns.get(key)
        if column is None:
            column = self._columns[key] = self._read_column(key)
        return column

    def _read_column(self, key: str) -> Column:
        if key == "results.status":
            status = self._field("status").astype(np.intp)
            return Column(np.where(status < 0, len(schema.STATUS_CODES) + 1, status + 1), None,
                          [None, *schema.STATUS_CODES, STARTED])
        if key == "results.attempt":
            return Column.of(self._field("attempt").astype(np.int64).tolist())
        if key in _OWN_TEXT:
            return self._own_text(key)
        if key == stats.WARNINGS_KEY:
            return self._warnings()
        if key in _TIMES:
            return self._with_default(self._summary_column(key), _TIMES[key])
        if key.startswith("results."):
            return self._summary_column(key)
        return self._view_column(key)

    def numbers(self, key: str) -> np.ndarray:
        if key in _FIELD and key.startswith("results."):
            return self._field(key)
        return finite_numbers(self.column(key))

    def samples(self, rows: np.ndarray) -> list[np.ndarray | None]:
        wanted = self._rowids[rows].tolist()
        found = self._store.samples_of(wanted)
        return [found.get(rowid) for rowid in wanted]

    def records(self, rows: np.ndarray) -> list[Record]:
        wanted = self._rowids[rows].tolist()
        stored = {item.rowid: item for item in self._store.summaries(with_samples=True,
                                                                     rowids=wanted)}
        position = dict(zip(self._rowids.tolist(), range(self.size)))
        found = []
        for rowid in wanted:
            item = stored[rowid]
            found.append(Record(item.experiment, self.path,
                                float(self.recency[position[rowid]]), item.environment,
                                item.samples))
        return found

    # -- what a report reads besides codes ------------------------------------------------

    def has_value(self, key: str) -> np.ndarray:
        """Which attempts have a value (not None) of `key`, without decoding it if possible."""
        if key in _FIELD and key.startswith("results."):
            found = ~np.isnan(self._field(key))
            odd = (self._field("flags").astype(np.intp) & schema.FLAG_ODD_SUMMARY) != 0
            if odd.any():
                found |= odd & (self._summary_column(key).codes != 0)
            return found
        return self.column(key).codes != 0

    def latest_rows(self) -> np.ndarray:
        """The newest attempt (highest number) of each experiment, as the `experiments` view."""
        ids = self.column("exp.id").codes
        attempts = self._field("attempt")
        order = np.lexsort((attempts, ids))
        last = np.ones(len(order), dtype=bool)
        last[:-1] = ids[order][1:] != ids[order][:-1]
        return np.sort(order[last])

    def _warnings(self) -> Column:
        """`results.stats_warnings` (its own column, read only when some attempt has it)."""
        flagged = (self._field("flags").astype(np.intp) & schema.FLAG_WARNINGS) != 0
        if not flagged.any():
            return Column(np.zeros(self.size, dtype=np.intp), None, [None])
        return self._rows_of("stats_warnings", exact_json.loads)

    # -- helpers --------------------------------------------------------------------------

    def _field(self, name: str) -> np.ndarray:
        return self._report[:, _FIELD[name]]

    def decoded(self, key: str) -> list[Any]:
        key_id = self._key_ids.get(key)
        if key.startswith("results.") or key_id is None:
            return self.column(key).values
        return self._decode(key_id)[0]

    def uniform(self, key: str) -> tuple[int, bool] | None:
        """(code, present) when every attempt has the same value of a view key, else None."""
        if key.startswith("results."):
            return None
        key_id = self._key_ids.get(key)
        if key_id is None:
            return 0, False
        if key_id in self._delta or not self._bases:
            return None
        numbers = {base.get(key_id, ABSENT) for base in self._bases}
        if len(numbers) != 1:
            return None
        number = numbers.pop()
        return (0 if number in (ABSENT, NULL) else number), number != ABSENT

    def _view_column(self, key: str) -> Column:
        key_id = self._key_ids.get(key)
        if key_id is None:
            return Column(np.zeros(self.size, dtype=np.intp),
                          np.zeros(self.size, dtype=bool), [None])
        per_base = np.array([base.get(key_id, ABSENT) for base in self._bases], dtype=np.intp)
        numbers = per_base[self._base_of_row] if len(per_base) else \
            np.zeros(self.size, dtype=np.intp)
        if key_id in self._delta:
            start, stop = self._delta[key_id]
            numbers[self._entry_rows[start:stop]] = self._entry_numbers[start:stop]
        present = numbers != ABSENT
        codes = np.where(numbers == NULL, 0, numbers)
        return Column(codes, None if present.all() else present,
                      decode=lambda: self._decode(key_id)[0],
                      texts=lambda: self._decode(key_id)[1],
                      find=lambda text: self._find(key_id, text))

    def _decode(self, key_id: int) -> tuple[list[Any], list[str | None]]:
        """Values and texts of a key by value number (checked to hold every number used)."""
        if not self._preloaded:
            self._preload()
        found = self._decoded.get(key_id)
        if found is None:
            found = self._decoded[key_id] = self._checked(key_id,
                                                          self._store.view_values(key_id))
        return found

    def _checked(self, key_id: int,
                 stored: list[tuple[int, str]]) -> tuple[list[Any], list[str | None]]:
        try:
            values, texts = _decoded(stored)
        except (ValueError, TypeError, IndexError):   # not JSON, not a number
            values, texts = [], []
        # Values are numbered 2, 3, ... without gaps: all there up to the largest one used.
        if len(stored) != len(texts) - FIRST_VALUE or self._largest.get(key_id, 0) >= len(texts):
            raise ResultsError(
                f"results database {self.path}: table param_values lacks values of "
                f"{self._key_names.get(key_id)!r}",
                hint="the database was changed by something else than dlbs")
        return values, texts

    def _preload(self) -> None:
        """The values of every key with few of them, in one query (most keys of a sweep)."""
        self._preloaded = True
        largest = self._largest = {}
        for base in self._bases:
            for key_id, number in base.items():
                largest[key_id] = max(largest.get(key_id, 0), number)
        for key_id, (start, stop) in self._delta.items():
            largest[key_id] = max(largest.get(key_id, 0),
                                  int(self._entry_numbers[start:stop].max(initial=0)))
        small = [key_id for key_id, number in largest.items()
                 if number <= _PRELOAD_VALUES and key_id not in self._decoded]
        stored: dict[int, list[tuple[int, str]]] = {key_id: [] for key_id in small}
        for key_id, number, text in self._store.view_values_of(small):
            stored[key_id].append((number, text))
        for key_id, values in stored.items():
            self._decoded[key_id] = self._checked(key_id, values)

    def _find(self, key_id: int, text: str) -> int | None:
        if key_id in self._decoded:
            texts = self._decoded[key_id][1]
            return texts.index(text) if text in texts else None
        return self._store.view_value_number(key_id, text)

    def _summary_column(self, key: str) -> Column:
        """A key of the JSON summaries (a result without a column of its own)."""
        column = self._summary_columns.get(key)
        if column is None:
            values: list[Any] = [MISSING] * self.size
            picked = self._store.summary_values(key)
            if picked is not None:   # SQLite picked each value out: parse only those
                decoded: dict[str, Any] = {}
                for position, text in self._positions(picked):
                    if text not in decoded:
                        decoded[text] = exact_json.loads(text)
                    values[position] = decoded[text]
            else:
                needle = exact_json.dumps(key)   # the key as the JSON text holds it
                for position, text in self._positions(self._store.summary_texts(needle)):
                    try:
                        summary = exact_json.loads(text)
                    except ValueError as error:
                        raise ResultsError(f"results database {self.path}: an attempt's "
                                           f"summary is not JSON ({error})") from error
                    if isinstance(summary, dict):
                        values[position] = summary.get(key, MISSING)
            column = self._summary_columns[key] = Column.of(values)
        return column

    def _own_text(self, key: str) -> Column:
        own = self._rows_of(_OWN_TEXT[key], lambda value: value)
        if key == "results.status_msg":
            return own
        return self._fill(own, self._summary_column(key))

    def _with_default(self, column: Column, name: str) -> Column:
        return self._fill(column, self._rows_of(name, lambda value: value))

    def _fill(self, first: Column, then: Column) -> Column:
        """`first` where it has the key, else `then`."""
        values = [MISSING] * self.size
        first_has, then_has = first.has(), then.has()
        for source, has in ((then, then_has), (first, first_has)):
            decoded = source.values
            for row in np.flatnonzero(has).tolist():
                values[row] = decoded[source.codes[row]]
        return Column.of(values)

    def _rows_of(self, name: str, convert: Callable[[Any], Any]) -> Column:
        stored = self._store.text_column(name)
        values: list[Any] = [MISSING] * self.size
        for position, value in self._positions(stored):
            values[position] = convert(value)
        return Column.of(values)

    def _positions(self, stored: list[tuple[int, Any]]) -> list[tuple[int, Any]]:
        """(row, value) of (rowid, value) pairs; rows added since the first read are left out."""
        if not stored:
            return []
        rowids = np.array([rowid for rowid, _ in stored], dtype=np.int64)
        positions = np.searchsorted(self._rowids, rowids)
        positions[positions >= self.size] = 0
        known = (self._rowids[positions] == rowids) if self.size else \
            np.zeros(len(rowids), dtype=bool)
        return [(position, value) for position, ok, (_, value) in
                zip(positions.tolist(), known.tolist(), stored) if ok]


def _decoded(stored: list[tuple[int, str]]) -> tuple[list[Any], list[str | None]]:
    """(values, texts) by value number of one key's stored values."""
    size = max([number for number, _ in stored], default=NULL) + 1
    values: list[Any] = [None] * size
    texts: list[str | None] = [None] * size
    texts[NULL] = "null"
    for number, text in stored:
        values[number] = exact_json.loads(text)
        texts[number] = text
    return values, texts


def _base_numbers(blob: bytes) -> dict[int, int]:
    """{key id: value number} of a stored base."""
    codes = np.frombuffer(blob, dtype="<i8")
    return dict(zip((codes >> KEY_SHIFT).tolist(), (codes & VALUE_MASK).tolist()))
