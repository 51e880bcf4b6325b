"""Statements in one spelling for both databases: `?` placeholders, ids of new rows.

The stores write their SQL once, with SQLite's `?` placeholders; a `Session` over a
PostgreSQL connection turns them into psycopg's `%s` (a literal `%` doubled), and gives the
id of an inserted row from `RETURNING id` where SQLite has `lastrowid`. What differs beyond
that (types, JSON operators, locks) is each store's own (sqlite_store.py, postgres_store.py).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Dialect:
    """How one database spells what the stores' SQL leaves open."""

    name: str
    # Whether placeholders become `%s` (psycopg) rather than staying `?` (sqlite3).
    format_placeholders: bool
    # Whether the id of a new row comes from `RETURNING id` rather than `lastrowid`.
    returning_id: bool
    # Whether text cannot hold NUL (PostgreSQL's): one becomes U+FFFD on the way in.
    text_without_nul: bool = False


SQLITE = Dialect("sqlite", False, False)
POSTGRESQL = Dialect("postgresql", True, True, text_without_nul=True)


@functools.lru_cache(maxsize=512)
def _formatted(statement: str) -> str:
    return statement.replace("%", "%%").replace("?", "%s")


class Session:
    """A connection (sqlite3 or psycopg) with the statements spelled for its database."""

    __slots__ = ("conn", "dialect")

    def __init__(self, conn: Any, dialect: Dialect) -> None:
        self.conn = conn
        self.dialect = dialect

    def sql(self, statement: str) -> str:
        """`statement` as this database's driver takes it."""
        return _formatted(statement) if self.dialect.format_placeholders else statement

    def execute(self, statement: str, parameters: Sequence[Any] = ()) -> Any:
        """Run one statement; the driver's cursor."""
        return self.conn.execute(self.sql(statement), self._parameters(parameters))

    def executemany(self, statement: str, rows: Sequence[Sequence[Any]]) -> None:
        """Run one statement for each row of parameters (psycopg pipelines them)."""
        if self.dialect.format_placeholders:
            with self.conn.cursor() as cursor:
                cursor.executemany(self.sql(statement),
                                   [self._parameters(row) for row in rows])
        else:
            self.conn.executemany(statement, rows)

    def one(self, statement: str, parameters: Sequence[Any] = ()) -> Any:
        """The first row of a query (None when there is none)."""
        return self.execute(statement, parameters).fetchone()

    def all(self, statement: str, parameters: Sequence[Any] = (), *,
            binary: bool = False) -> list[Any]:
        """Every row of a query; `binary`: BLOBs come as they are, not as hex text (psycopg)."""
        if binary and self.dialect.format_placeholders:
            with self.conn.cursor(binary=True) as cursor:
                return cursor.execute(self.sql(statement),
                                      self._parameters(parameters)).fetchall()
        return self.execute(statement, parameters).fetchall()

    def _parameters(self, parameters: Sequence[Any]) -> Sequence[Any]:
        if not self.dialect.text_without_nul:
            return parameters
        return [value.replace("\0", "\ufffd") if isinstance(value, str) and "\0" in value
                else value for value in parameters]

    def insert(self, statement: str, parameters: Sequence[Any] = ()) -> int:
        """Run an INSERT into a table with an `id` key; the new row's id."""
        if self.dialect.returning_id:
            return int(self.execute(statement + " RETURNING id", parameters).fetchone()[0])
        return int(self.execute(statement, parameters).lastrowid or 0)
