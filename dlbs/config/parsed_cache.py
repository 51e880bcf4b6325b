"""A cache of the parsed default configs, so that a command does not parse them every time.

Every `dlbs` command reads all of `configs/`: parsing that YAML (and importing the parser)
was about half of the start-up of `dlbs plan`. The parsed documents are kept in
`dlbs/config/__pycache__/default-configs.<python tag>.json`, each under the SHA-256 of
its file's suffix and bytes, so a changed config is never served from the cache: it misses,
is parsed and the cache is written again. The whole cache is stamped with a format number,
the interpreter's tag, the SHA-256 of the parser's source (`documents.py`) and where
ruamel.yaml is installed (its version's files), so that a new parser reads everything again.

Only the default configs are cached (`SpecBuilder.add_file(default_config=True)`): a user's
spec and its includes are parsed every time. The file holds plain data that this process
wrote, as JSON (never `pickle` or `marshal`: their data claims sizes that the reader
allocates before it finds the data shorter, so 25 bytes could ask for gigabytes), in a folder
as trusted as the code beside it. It is checked before it is parsed: at most
MAX_CACHE_BYTES, and the SHA-256 of its payload, written in its first line, must match (a
cut or damaged file is dropped unread); what is parsed is refused unless it is a stamped
mapping of digests to documents of plain values (docs/security.md). Any failure to read or
write it is silent: dlbs parses the files, as it would without a cache. It is written
atomically (a temporary file, then `os.replace`), and never through a link or over anything
but a regular file. PYTHONDONTWRITEBYTECODE does not turn it off: it is not bytecode.
"""

from __future__ import annotations

import hashlib
import math
import os
import stat
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import orjson

from dlbs.config.documents import read_spec_bytes
from dlbs.config.limits import MAX_DOCUMENT_VALUES, MAX_NESTING
from dlbs.errors import ConfigError, OutputError

#: Bumped whenever what is cached changes meaning (2: JSON with a digest, was marshal).
FORMAT = 2
#: The cache file's first bytes; the SHA-256 of the payload (hex) and a newline follow.
MAGIC = b"dlbs-parsed-configs\n"
_DIGEST_SIZE = 64
#: The most bytes of a cache file read back; the default configs parse to about 100 kB.
MAX_CACHE_BYTES = 16 * 2**20
#: Documents kept: the current default configs first, then those of other config folders
#: (DLBS_CONFIGS) most recently used, so that switching back and forth does not re-parse.
MAX_ENTRIES = 64
#: The parser whose results are cached (its source is part of the stamp).
_PARSER = Path(__file__).with_name("documents.py")

_PLAIN_SCALARS = frozenset({str, int, float, bool, type(None)})


def cache_path() -> Path:
    """Where the cache of this interpreter lives."""
    tag = sys.implementation.cache_tag or "python"
    return Path(__file__).with_name("__pycache__") / f"default-configs.{tag}.json"


def digest(suffix: str, data: bytes) -> str:
    """The key of a file's document: what parsing depends on, its suffix and its bytes."""
    return hashlib.sha256(suffix.lower().encode() + b"\x00" + data).hexdigest()


class ParsedCache:
    """The parsed default configs by digest; `get` what is there, `put` what was parsed."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = cache_path() if path is None else path
        self._stamp: list[Any] | None = None
        self._entries: dict[str, Any] | None = None  # read when first asked
        self._used: dict[str, Any] = {}
        self._missed = False

    def get(self, key: str) -> Any:
        """The cached document of `key`, or None (a document is never None: see loader)."""
        if self._entries is None:
            self._entries = self._read()
        document = self._entries.get(key)
        if document is None:
            self._missed = True
        else:
            self._used[key] = document
        return document

    def put(self, key: str, document: Any) -> None:
        """Keep a freshly parsed document (written by `save`)."""
        self._used[key] = document
        self._missed = True

    def save(self) -> None:
        """Write the cache if anything was missing from it; any failure is silent."""
        if not self._missed:
            return
        entries = dict(self._used)
        for key, document in (self._entries or {}).items():
            if len(entries) >= MAX_ENTRIES:
                break
            entries.setdefault(key, document)
        if not _plain(entries.values()):
            return  # a value that is not plain data (a YAML timestamp, a NaN): not cached
        try:
            payload = orjson.dumps([FORMAT, self.stamp(), entries])
        except orjson.JSONEncodeError:
            return  # an integer beyond 64 bits: not cached
        try:
            _write(self.path, sealed(payload))
        except (OSError, OutputError):  # lstat's error, or atomic_write's
            pass
        self._missed = False

    def stamp(self) -> list[Any]:
        """What every cached document depends on besides its file: the parser, its budgets.

        As JSON reads it back (lists, not tuples), so that a stamp read compares equal.
        """
        if self._stamp is None:
            self._stamp = orjson.loads(orjson.dumps([
                MAX_NESTING,
                MAX_DOCUMENT_VALUES,
                sys.implementation.cache_tag,
                _source_digest(_PARSER),
                _package_stamp("ruamel.yaml"),
                _package_stamp("_ruamel_yaml"),
            ]))
        return self._stamp

    def _read(self) -> dict[str, Any]:
        try:
            data = read_spec_bytes(self.path, MAX_CACHE_BYTES, follow_links=False)
        except ConfigError:  # missing, a link, not a regular file, too big, unreadable
            return {}
        payload = unsealed(data)
        if payload is None:
            return {}
        try:
            loaded = orjson.loads(payload)
        except orjson.JSONDecodeError:
            return {}
        if not (
            type(loaded) is list
            and len(loaded) == 3
            and loaded[0] == FORMAT
            and loaded[1] == self.stamp()
            and type(loaded[2]) is dict
        ):
            return {}
        entries = loaded[2]
        if not all(type(key) is str for key in entries) or not _plain(entries.values()):
            return {}
        return entries


def sealed(payload: bytes) -> bytes:
    """The cache file's bytes: MAGIC, the SHA-256 of `payload` in hex and a newline, `payload`."""
    return MAGIC + hashlib.sha256(payload).hexdigest().encode() + b"\n" + payload


def unsealed(data: bytes) -> bytes | None:
    """The payload of a cache file's bytes, or None when it is not one whole, as written.

    Checked before anything is parsed: the magic, then the digest of the rest.
    """
    start = len(MAGIC) + _DIGEST_SIZE + 1
    if len(data) < start or not data.startswith(MAGIC) or data[start - 1:start] != b"\n":
        return None
    payload = data[start:]
    if hashlib.sha256(payload).hexdigest().encode() != data[len(MAGIC):start - 1]:
        return None
    return payload


def _plain(documents: Iterable[Any]) -> bool:
    """Whether `documents` hold only the values a parsed spec can (a writer can put more).

    Within the budgets that `check_document` keeps, which every cached document met when it
    was parsed: nesting, and values counted at each place they stand (a shared list as often
    as it is used), all documents together, so that no file makes this walk long.
    """
    budget = MAX_DOCUMENT_VALUES
    stack: list[tuple[Any, int]] = []
    for document in documents:
        if type(document) is not dict:
            return False
        budget -= 1
        stack.append((document, 0))
    while stack:
        item, depth = stack.pop()
        if depth > MAX_NESTING:
            return False
        if type(item) is dict:
            if not all(type(key) is str for key in item):
                return False
            children = item.values()
        else:
            children = item
        budget -= len(children)
        if budget < 0:
            return False
        for child in children:
            kind = type(child)
            if kind is dict or kind is list:
                stack.append((child, depth + 1))
            elif kind not in _PLAIN_SCALARS or (kind is float and not math.isfinite(child)):
                return False   # JSON holds no NaN: such a document is parsed every time
    return True


def _source_digest(path: Path) -> str:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return ""


def _package_stamp(name: str) -> tuple[str, int, int] | None:
    """Where a module is installed and its file's size and time, without importing it."""
    import importlib.util

    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    origin = spec.origin if spec is not None else None
    if not origin:
        return None
    try:
        status = os.stat(origin)
    except OSError:
        return None
    return (origin, status.st_size, status.st_mtime_ns)


def _write(path: Path, data: bytes) -> None:
    """Replace `path` with `data` atomically, unless something but a regular file is there.

    `atomic_write` would write a link's target and through a device or a FIFO, as an output
    the user named should be: this file nobody names, so anything else there is left alone.
    """
    try:
        status = os.lstat(path)
    except FileNotFoundError:
        pass
    else:
        if not stat.S_ISREG(status.st_mode):
            return  # a link, a folder, a FIFO: left as it is
    # Imported only when writing: most commands find the cache and never write it.
    from dlbs.util.atomic import atomic_write

    atomic_write(path, data)
