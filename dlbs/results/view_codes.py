"""An attempt's view as integer codes, computed when it is stored, so reports group integers.

An attempt's *view* is what reports group, filter and show besides its numbers: its
parameters, the keys outside `results.` that a backend owns and its results add or replace
(`exp.framework_ver`, `exp.model_title`; they win, as when the attempt is read as a flat
experiment; no other key of the results replaces a parameter), `exp.id`, and its environment
as `env.<name>` keys.

The store numbers each key once (table `param_keys`) and each value of a key once (table
`param_values`: the value as canonical JSON, numbered per key from 2; 0 means "the key is
absent", 1 JSON null). A code is `key id << 32 | value number`. An attempt's view is a shared
base (table `param_bases`: the codes of a whole view) plus the codes in which the attempt
differs from it (`attempts.param_codes`; a key of the base that the attempt lacks is coded
with value number 0). The experiments of a sweep share most of their 70-odd keys, so an
attempt stores about a dozen codes, and a report of 100,000 experiments reads them as one
numpy array and decodes only the values it shows. Codes are equal exactly when the canonical
JSON of the values is (1, 1.0 and true are three values, as in `exp.id`).
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from typing import Any

from dlbs.results.protocol import BACKEND_KEYS
from dlbs.results.sql_session import Session
from dlbs.util import exact_json

ENV_PREFIX = "env."
RESULTS_PREFIX = "results."
ABSENT, NULL = 0, 1
FIRST_VALUE = 2
KEY_SHIFT = 32
VALUE_MASK = (1 << KEY_SHIFT) - 1
# A base is reused while an attempt differs from it in at most this fraction of its keys.
REUSE_FRACTION = 0.5
# Bases a writer remembers (a sweep over several frameworks has one base per framework).
REMEMBERED = 8


def canonical(value: Any) -> str:
    """The text that identifies a value: JSON with sorted keys (None is `null`)."""
    return exact_json.dumps(value, sort_keys=True)


def view_of(params: Mapping[str, Any], summary: Mapping[str, Any] | None,
            environment: Mapping[str, Any] | None, exp_id: str) -> dict[str, Any]:
    """The view of an attempt (see the module)."""
    view = {key: value for key, value in params.items() if not key.startswith(ENV_PREFIX)}
    if summary:
        view.update((key, value) for key, value in summary.items() if key in BACKEND_KEYS)
    view["exp.id"] = exp_id
    for name, value in (environment or {}).items():
        view[ENV_PREFIX + str(name)] = value
    return view


def pack(codes: list[int]) -> bytes:
    """Codes as the store keeps them: little-endian int64."""
    return struct.pack(f"<{len(codes)}q", *codes)


def unpack(blob: bytes) -> tuple[int, ...]:
    """The inverse of `pack`."""
    return struct.unpack(f"<{len(blob) // 8}q", blob)


class ViewCoder:
    """The writer's side: codes of views (new keys and values stored on the way) and bases.

    It remembers the ids it has seen; `forget()` after a rolled-back write, which may have
    taken some of them back.
    """

    def __init__(self) -> None:
        self._keys: dict[str, int] = {}
        self._values: dict[tuple[int, str], int] = {}
        # (base id, {key id: code}), most recently used first.
        self._bases: list[tuple[int, dict[int, int]]] = []

    def forget(self) -> None:
        """Drop everything remembered (after a rollback)."""
        self._keys.clear()
        self._values.clear()
        self._bases.clear()

    def columns(self, session: Session, view: Mapping[str, Any]) -> tuple[int, bytes]:
        """(param_base, param_codes) of `view`: a remembered base, or a new one stored now."""
        codes = self.codes(session, view)
        chosen = self._choose(codes)
        if chosen is None:
            blob = pack(sorted(codes.values()))
            base_id = session.insert("INSERT INTO param_bases (codes) VALUES (?)", (blob,))
            self._bases.insert(0, (base_id, codes))
            del self._bases[REMEMBERED:]
            return base_id, b""
        base_id, delta = chosen
        return base_id, pack(delta)

    def codes(self, session: Session, view: Mapping[str, Any]) -> dict[int, int]:
        """{key id: code} of every key of `view`."""
        found = {}
        for key, value in view.items():
            key_id = self._key_id(session, key)
            number = NULL if value is None else self._value_number(session, key_id, value)
            found[key_id] = key_id << KEY_SHIFT | number
        return found

    def _key_id(self, session: Session, key: str) -> int:
        key_id = self._keys.get(key)
        if key_id is None:
            row = session.one("SELECT id FROM param_keys WHERE key = ?", (key,))
            if row is None:
                row = (session.insert("INSERT INTO param_keys (key) VALUES (?)", (key,)),)
            key_id = self._keys[key] = int(row[0])
        return key_id

    def _value_number(self, session: Session, key_id: int, value: Any) -> int:
        text = canonical(value)
        if text == "null":
            return NULL
        number = self._values.get((key_id, text))
        if number is None:
            row = session.one("SELECT number FROM param_values WHERE key_id = ? AND value = ?",
                              (key_id, text))
            if row is None:
                # Inside the write transaction, which holds the store's write lock: nobody
                # else numbers values of this key now.
                row = session.one(
                    "SELECT coalesce(max(number), ?) + 1 FROM param_values WHERE key_id = ?",
                    (FIRST_VALUE - 1, key_id))
                session.execute(
                    "INSERT INTO param_values (key_id, number, value) VALUES (?, ?, ?)",
                    (key_id, row[0], text))
            number = self._values[(key_id, text)] = int(row[0])
        return number

    def _choose(self, codes: dict[int, int]) -> tuple[int, list[int]] | None:
        """The best remembered base and the codes that differ, or None for a new base."""
        best: tuple[int, int, list[int]] | None = None
        for base_id, base in self._bases:
            delta = [code for key_id, code in codes.items() if base.get(key_id) != code]
            delta.extend(key_id << KEY_SHIFT | ABSENT for key_id in base if key_id not in codes)
            if best is None or len(delta) < best[0]:
                best = (len(delta), base_id, delta)
        if best is None or best[0] > REUSE_FRACTION * max(1, len(codes)):
            return None
        for index, (base_id, _) in enumerate(self._bases):
            if base_id == best[1]:
                self._bases.insert(0, self._bases.pop(index))
                break
        return best[1], sorted(best[2])
