"""Attempts as columns: what reports and comparisons read, one array per key.

A report of 100,000 experiments must not build 100,000 dicts. `Attempts` holds a set of
attempts from one or more *parts* (the records of logs and parse output, or a results
database read column by column: stored_columns.py) and gives, per key, a `Column`: an
integer code per attempt and the value of each code. Codes are equal exactly when the
values' canonical JSON is (view_codes.canonical), and code 0 is None (the key is absent or
null), so grouping, matching and "does it vary" are numpy operations on integers, and values
are decoded only where they are shown. `numbers(key)` gives a key's finite numbers as
float64 (NaN for anything else), the way reports combine them.

The keys are those of a flat experiment (`exp.model`, `results.time`, a user's `trial`)
plus `env.<name>` for the environment the attempt ran in.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from dlbs.results.view_codes import ENV_PREFIX, canonical


@dataclass
class Record:
    """One attempt of an experiment, where it was read, and when it ended (epoch seconds).

    `environment` is where it ran (host, CPU and GPU models, driver: from a results
    database; empty for logs). `samples` holds the per-batch times (ms) when they were asked
    for and exist.
    """

    experiment: dict[str, Any]
    source: str
    recency: float = 0.0
    environment: dict[str, Any] = field(default_factory=dict)
    samples: np.ndarray | None = None


# A value that stands for "the attempt has no such key" in `Column.of`.
MISSING = object()


class Column:
    """One key over a set of attempts: `codes` (0 is None) and `values[code]`.

    `present` is False where an attempt lacks the key altogether (None where every attempt
    has it). Values may be decoded only when asked for (`decode`); `texts` are their
    canonical JSON, which tells values apart across parts.
    """

    __slots__ = ("codes", "present", "_values", "_decode", "_texts", "_find")

    def __init__(self, codes: np.ndarray, present: np.ndarray | None,
                 values: list[Any] | None = None,
                 decode: Callable[[], list[Any]] | None = None,
                 texts: Callable[[], list[str | None]] | None = None,
                 find: Callable[[str], int | None] | None = None) -> None:
        self.codes = codes
        self.present = present
        self._values = values
        self._decode = decode
        self._texts = texts
        self._find = find

    def find(self, value: Any) -> int | None:
        """The code of `value` (None when no attempt has it), without decoding the others."""
        text = canonical(value)
        if text == "null":
            return 0
        if self._values is None and self._find is not None:
            return self._find(text)
        for code, known in enumerate(self.texts()):
            if known == text:
                return code
        return None

    @property
    def values(self) -> list[Any]:
        """The value of each code (index 0: None)."""
        if self._values is None:
            assert self._decode is not None
            self._values = self._decode()
        return self._values

    def texts(self) -> list[str | None]:
        """Canonical JSON of each code's value (None for code 0)."""
        if self._texts is not None:
            return self._texts()
        return [None] + [canonical(value) for value in self.values[1:]]

    def take(self, rows: np.ndarray) -> Column:
        """The column of the attempts `rows` (same codes and values)."""
        return Column(self.codes[rows], None if self.present is None else self.present[rows],
                      self._values, self._decode, self._texts, self._find)

    def has(self) -> np.ndarray:
        """Which attempts have the key (even with a null value)."""
        if self.present is None:
            return np.ones(len(self.codes), dtype=bool)
        return self.present

    @classmethod
    def of(cls, values: Sequence[Any]) -> Column:
        """A column of Python values, one per attempt (`MISSING`: the key is absent)."""
        codes = np.zeros(len(values), dtype=np.intp)
        present = np.ones(len(values), dtype=bool)
        table: dict[Any, int] = {}
        distinct: list[Any] = [None]
        for index, value in enumerate(values):
            if value is None:
                continue
            if value is MISSING:
                present[index] = False
                continue
            key = (value.__class__, value) if isinstance(value, str | int | float | bool) \
                else canonical(value)
            code = table.get(key)
            if code is None:
                code = table[key] = len(distinct)
                distinct.append(value)
            codes[index] = code
        column = cls(codes, None if present.all() else present, distinct)
        return _merged_by_text(column)


def _merged_by_text(column: Column) -> Column:
    """The column with codes merged where the canonical JSON is equal (1 == 1.0 stays two)."""
    texts = column.texts()
    if len(texts) == len(set(texts)) and "null" not in texts:
        return column
    mapping = np.zeros(len(texts), dtype=np.intp)
    seen: dict[str | None, int] = {None: 0, "null": 0}
    values: list[Any] = [None]
    for code in range(1, len(texts)):
        target = seen.get(texts[code])
        if target is None:
            target = seen[texts[code]] = len(values)
            values.append(column.values[code])
        mapping[code] = target
    return Column(mapping[column.codes], column.present, values)


def finite_numbers(column: Column) -> np.ndarray:
    """A column's finite numbers as float64, NaN for anything else (bools are not numbers)."""
    table = np.full(len(column.values), np.nan)
    for code, value in enumerate(column.values):
        if isinstance(value, int | float) and not isinstance(value, bool):
            try:
                number = float(value)
            except OverflowError:
                continue
            if math.isfinite(number):
                table[code] = number
    return table[column.codes]


class Part(Protocol):
    """Where attempts come from: the records of logs, or a results database."""

    @property
    def size(self) -> int:
        """How many attempts."""

    @property
    def recency(self) -> np.ndarray:
        """When each attempt ended (epoch seconds): the newest counts."""

    def sources(self) -> tuple[np.ndarray, list[str]]:
        """Where each attempt was read: codes into names."""

    def keys(self) -> list[str]:
        """Every key outside `results.` that some attempt has (`env.*` included)."""

    def column(self, key: str) -> Column:
        """The column of `key`."""

    def numbers(self, key: str) -> np.ndarray:
        """`key`'s finite numbers (NaN elsewhere)."""

    def has_value(self, key: str) -> np.ndarray:
        """Which attempts have a value of `key` that is not None."""

    def uniform(self, key: str) -> tuple[int, bool] | None:
        """(code, present) when every attempt has the same code of `key` (known cheaply)."""

    def decoded(self, key: str) -> list[Any]:
        """The values of `key`'s codes (as `column(key).values`)."""

    def samples(self, rows: np.ndarray) -> list[np.ndarray | None]:
        """The per-batch times of attempts `rows`."""

    def records(self, rows: np.ndarray) -> list[Record]:
        """Attempts `rows` as records (flat experiments), for pages and charts."""


class RecordsPart:
    """Attempts of logs and parse output, already read as records."""

    def __init__(self, records: Sequence[Record]) -> None:
        self._records = list(records)
        self.size = len(self._records)
        self.recency = np.array([record.recency for record in self._records], dtype=float)
        self._columns: dict[str, Column] = {}

    def sources(self) -> tuple[np.ndarray, list[str]]:
        column = Column.of([record.source for record in self._records])
        return column.codes, [str(value) for value in column.values]

    def keys(self) -> list[str]:
        found: dict[str, None] = {}
        previous: Any = None
        for record in self._records:
            names = record.experiment.keys()
            if names != previous:   # most experiments of a sweep have the same keys
                found.update(dict.fromkeys(names))
                previous = names
            found.update(dict.fromkeys(ENV_PREFIX + str(name) for name in record.environment))
        return [key for key in found if not key.startswith("results.")]

    def column(self, key: str) -> Column:
        column = self._columns.get(key)
        if column is None:
            if key.startswith(ENV_PREFIX):
                name = key[len(ENV_PREFIX):]
                values = [record.environment.get(name, MISSING) for record in self._records]
            else:
                values = [record.experiment.get(key, MISSING) for record in self._records]
            column = self._columns[key] = Column.of(values)
        return column

    def numbers(self, key: str) -> np.ndarray:
        return finite_numbers(self.column(key))

    def has_value(self, key: str) -> np.ndarray:
        return self.column(key).codes != 0

    def uniform(self, key: str) -> tuple[int, bool] | None:
        return None

    def decoded(self, key: str) -> list[Any]:
        return self.column(key).values

    def samples(self, rows: np.ndarray) -> list[np.ndarray | None]:
        return [self._records[row].samples for row in rows.tolist()]

    def records(self, rows: np.ndarray) -> list[Record]:
        return [self._records[row] for row in rows.tolist()]


class Attempts:
    """Attempts of one or more parts, as columns (see the module).

    Columns are computed once per key. `take(rows)` is the same attempts' subset, which
    shares nothing but the parts.
    """

    def __init__(self, parts: Sequence[Part], rows: Sequence[np.ndarray] | None = None) -> None:
        self._parts = list(parts)
        self._rows = list(rows) if rows is not None else \
            [np.arange(part.size) for part in self._parts]
        # Pieces that are their part's attempts in order (no indexing needed).
        self._whole = [len(part_rows) == part.size and bool(
            np.array_equal(part_rows, np.arange(part.size)))
            for part, part_rows in zip(self._parts, self._rows)]
        self.size = sum(len(rows) for rows in self._rows)
        self._columns: dict[str, Column] = {}
        self._numbers: dict[str, np.ndarray] = {}
        self._recency: np.ndarray | None = None

    @classmethod
    def of_records(cls, records: Sequence[Record]) -> Attempts:
        """Attempts of records (tests, logs)."""
        return cls([RecordsPart(records)])

    @classmethod
    def concat(cls, sets: Sequence[Attempts]) -> Attempts:
        """The attempts of `sets`, one after the other (their columns merged by value)."""
        parts: list[Part] = []
        rows: list[np.ndarray] = []
        for attempts in sets:
            parts.extend(attempts._parts)
            rows.extend(attempts._rows)
        return cls(parts, rows)

    def take(self, rows: np.ndarray) -> Attempts:
        """The attempts `rows` (indices into this set), in that order."""
        rows = np.asarray(rows, dtype=np.intp)
        bounds = np.cumsum([0] + [len(part_rows) for part_rows in self._rows])
        parts, selected = [], []
        # Rows of one part stay together only when `rows` keeps them so: split into runs.
        which = np.searchsorted(bounds, rows, side="right") - 1
        if len(rows):
            breaks = np.flatnonzero(np.diff(which)) + 1
            for run in np.split(np.arange(len(rows)), breaks):
                part = int(which[run[0]])
                parts.append(self._parts[part])
                selected.append(self._rows[part][rows[run] - bounds[part]])
        taken = Attempts(parts, selected)
        # A column's codes mean the same in any subset: keep what was computed.
        taken._columns = {key: column.take(rows) for key, column in self._columns.items()}
        taken._numbers = {key: numbers[rows] for key, numbers in self._numbers.items()}
        return taken

    @property
    def recency(self) -> np.ndarray:
        """When each attempt ended (epoch seconds)."""
        if self._recency is None:
            self._recency = self._concat([part.recency[rows] for part, rows in self._pieces()])
        return self._recency

    def sources(self) -> tuple[np.ndarray, list[str]]:
        """Where each attempt was read: codes into source names."""
        names: dict[str, int] = {}
        codes = []
        for part, rows in self._pieces():
            part_codes, part_names = part.sources()
            mapping = np.array([names.setdefault(name, len(names)) for name in part_names],
                               dtype=np.intp)
            codes.append(mapping[part_codes[rows]])
        return self._concat(codes, np.intp), list(names)

    def keys(self) -> list[str]:
        """Every key outside `results.` of the parts (some attempt may have it), sorted."""
        found: set[str] = set()
        for part in self._parts:
            found.update(part.keys())
        return sorted(found)

    def column(self, key: str) -> Column:
        """`key` over these attempts (see Column)."""
        column = self._columns.get(key)
        if column is None:
            pieces = [(part.column(key), None if whole else rows)
                      for (part, rows), whole in zip(self._pieces(), self._whole)]
            column = self._columns[key] = _concatenate(pieces, self.size)
        return column

    def decoded(self, key: str) -> list[Any]:
        """The values of `key`'s codes (`column(key).values`), without making the column."""
        if key not in self._columns and len(self._parts) == 1:
            return self._parts[0].decoded(key)
        return self.column(key).values

    def derived(self, key: str, build: Callable[[Attempts], Column]) -> Column:
        """A column computed from others (`build(self)`), kept like the parts' columns."""
        column = self._columns.get(key)
        if column is None:
            column = self._columns[key] = build(self)
        return column

    def numbers(self, key: str) -> np.ndarray:
        """`key`'s finite numbers as float64, NaN for anything else."""
        numbers = self._numbers.get(key)
        if numbers is None:
            numbers = self._numbers[key] = self._concat(
                [part.numbers(key)[rows] for part, rows in self._pieces()])
        return numbers

    def has_value(self, key: str) -> np.ndarray:
        """Which attempts have a value of `key` that is not None."""
        column = self._columns.get(key)
        if column is not None:
            return column.codes != 0
        return self._concat([part.has_value(key)[rows] for part, rows in self._pieces()], bool)

    def uniform(self, key: str) -> tuple[int, bool] | None:
        """(code, present) if every attempt has one value of `key` (known cheaply), else None.

        A parameter that a sweep did not vary is known so without making its column.
        """
        if len(self._parts) != 1 or key in self._columns:
            return None
        return self._parts[0].uniform(key)

    def present(self, key: str) -> np.ndarray:
        """Which attempts have `key` at all (even with a null value)."""
        column = self._columns.get(key)
        if column is not None:
            return column.has()
        return self._concat([part.column(key).has()[rows] for part, rows in self._pieces()],
                            bool)

    def has_key(self, key: str) -> bool:
        """Whether some attempt has `key` (results: with a value)."""
        if key.startswith("results."):
            return bool(self.has_value(key).any())
        return bool(self.present(key).any())

    def samples(self, indices: Sequence[int] | np.ndarray) -> list[np.ndarray | None]:
        """The per-batch times of the attempts at `indices`."""
        return self._by_part(indices, lambda part, rows: part.samples(rows))

    def records(self, indices: Sequence[int] | np.ndarray) -> list[Record]:
        """The attempts at `indices` as records."""
        return self._by_part(indices, lambda part, rows: part.records(rows))

    def _by_part(self, indices: Sequence[int] | np.ndarray,
                 read: Callable[[Part, np.ndarray], list[Any]]) -> list[Any]:
        indices = np.asarray(indices, dtype=np.intp)
        found: list[Any] = [None] * len(indices)
        start = 0
        for part, rows in self._pieces():
            stop = start + len(rows)
            mine = np.flatnonzero((indices >= start) & (indices < stop))
            if len(mine):
                for position, item in zip(mine.tolist(),
                                          read(part, rows[indices[mine] - start])):
                    found[position] = item
            start = stop
        return found

    def _pieces(self) -> list[tuple[Part, np.ndarray]]:
        return list(zip(self._parts, self._rows))

    @staticmethod
    def _concat(arrays: list[np.ndarray], dtype: Any = float) -> np.ndarray:
        if not arrays:
            return np.zeros(0, dtype=dtype)
        return arrays[0] if len(arrays) == 1 else np.concatenate(arrays)


def _concatenate(pieces: list[tuple[Column, np.ndarray | None]], size: int) -> Column:
    """One column of the pieces' rows (None: all), codes merged by canonical JSON."""
    if len(pieces) == 1:
        column, rows = pieces[0]
        return column if rows is None else column.take(rows)
    if not pieces:
        return Column(np.zeros(0, dtype=np.intp), None, [None])
    pieces = [(column, np.arange(len(column.codes)) if rows is None else rows)
              for column, rows in pieces]
    table: dict[str | None, int] = {None: 0, "null": 0}
    values: list[Any] = [None]
    codes, present = [], []
    for column, rows in pieces:
        texts = column.texts()
        mapping = np.zeros(len(texts), dtype=np.intp)
        used = np.flatnonzero(np.bincount(column.codes[rows], minlength=1))
        for code in used.tolist():
            target = table.get(texts[code])
            if target is None:
                target = table[texts[code]] = len(values)
                values.append(column.values[code])
            mapping[code] = target
        codes.append(mapping[column.codes[rows]])
        present.append(column.has()[rows])
    everywhere = np.concatenate(present)
    return Column(np.concatenate(codes), None if everywhere.all() else everywhere, values)
