"""Read one spec document (JSON or YAML 1.2) within the budgets of docs/security.md.

What a file can cost is bounded before and after it is parsed: the suffix is checked before
anything is opened, only regular files are read (a FIFO or `/dev/zero` never is), at most
`MAX_SPEC_BYTES` of them; bracket nesting is checked before the YAML parser sees it (its
scanner is quadratic in the depth); after parsing, the document's nesting and its size with
YAML aliases expanded are checked, so a billion-laughs file is refused in microseconds
instead of being expanded by whatever walks it next.
"""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path
from typing import Any

from dlbs.config.limits import MAX_DOCUMENT_VALUES, MAX_NESTING, MAX_SPEC_BYTES
from dlbs.errors import ConfigError

SUFFIXES = (".json", ".yaml", ".yml")


def check_suffix(path: Path) -> str:
    """The lower-case suffix of a spec file; ConfigError for any other file type."""
    suffix = path.suffix.lower()
    if suffix not in SUFFIXES:
        raise ConfigError(f"{path}: unsupported file type {path.suffix!r}",
                          hint="specs are .json, .yaml or .yml files")
    return suffix


def read_spec_bytes(path: Path, limit: int = MAX_SPEC_BYTES, *,
                    follow_links: bool = True) -> bytes:
    """The bytes of a regular file of at most `limit` bytes; never blocks on a FIFO.

    `follow_links=False`: a symbolic link at `path` is not read (an error), as for a file
    that only dlbs itself writes (dlbs/config/parsed_cache.py).
    """
    # O_NONBLOCK: opening a FIFO would otherwise wait for a writer forever.
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow_links else os.O_NOFOLLOW)
    try:
        descriptor = os.open(path, flags)
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file") from None
    except OSError as error:
        raise ConfigError(f"{path}: cannot read: {error.strerror or error}") from None
    try:
        status = os.fstat(descriptor)
        if not stat.S_ISREG(status.st_mode):
            kind = "a folder" if stat.S_ISDIR(status.st_mode) else "not a regular file"
            raise ConfigError(f"{path}: cannot read: it is {kind}",
                              hint="a spec and its includes are regular files")
        if status.st_size > limit:
            raise _too_big(path, limit)
        with os.fdopen(os.dup(descriptor), "rb") as stream:
            data = stream.read(limit + 1)
    except OSError as error:
        raise ConfigError(f"{path}: cannot read: {error.strerror or error}") from None
    finally:
        os.close(descriptor)
    if len(data) > limit:
        raise _too_big(path, limit)
    return data


def _too_big(path: Path, limit: int) -> ConfigError:
    return ConfigError(f"{path}: the file is larger than {limit / 2**20:g} MiB, the most a spec "
                       f"file may be", hint="docs/security.md lists the budgets of specs")


def parse_document(path: Path, data: bytes, default_config: bool = False) -> Any:
    """The JSON or YAML value of `data`, read from `path`; every error is one line.

    `default_config`: one of the default configs, parsed by libyaml where ruamel.yaml.clib is
    installed (about 15 times faster: each `dlbs` command reads them all). A test keeps
    every default config parsing to the same value both ways; any error is reported by the
    pure-Python parser, as for every other file.
    """
    suffix = check_suffix(path)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ConfigError(f"{path}: cannot read: not UTF-8 text ({error.reason} at byte "
                          f"{error.start})") from None
    if suffix == ".json":
        document = parse_json(text, str(path))
    else:
        document = _parse_yaml(path, text, default_config)
    check_document(document, str(path))
    return document


def parse_json(text: str, where: str) -> Any:
    """Strict JSON (no NaN or Infinity, no key twice in an object); errors name `where`."""
    try:
        return json.loads(text, parse_constant=_no_constant, object_pairs_hook=unique_keys)
    except json.JSONDecodeError as error:
        raise ConfigError(f"{where}:{error.lineno}:{error.colno}: malformed JSON: "
                          f"{error.msg}") from None
    except RecursionError:
        raise _too_deep(where) from None
    except ValueError as error:  # an integer of more than 4,300 digits, NaN
        raise ConfigError(f"{where}: malformed JSON: {_one_line(error)}") from None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


#: What a JSON object with a key twice says, as YAML says it (the JSON standard leaves it
#: open; Python's json would keep the last value without a word).
DUPLICATE_KEY = "found duplicate key"


def unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object of JSON text (`object_pairs_hook`); ValueError when a key comes twice."""
    made = dict(pairs)
    if len(made) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise ValueError(f"{DUPLICATE_KEY} {json.dumps(key)[:80]} (an object names "
                                 f"each key once)")
            seen.add(key)
    return made


def _too_deep(where: str) -> ConfigError:
    return ConfigError(f"{where}: the document is nested more than {MAX_NESTING} levels deep")


# Flow brackets, and what can hide them: quoted scalars (on one line) and comments.
_FLOW_TOKENS = re.compile(r"""[\[\]{}]|"(?:[^"\\\n]|\\.)*"?|'(?:[^'\n]|'')*'?|(?<!\S)#[^\n]*""")


def _flow_depth_exceeds(text: str, limit: int) -> bool:
    depth = 0
    for match in _FLOW_TOKENS.finditer(text):
        token = match.group()
        if token in "[{":
            depth += 1
            if depth > limit:
                return True
        elif token in "]}":
            depth = max(depth - 1, 0)
    return False


def _parse_yaml(path: Path, text: str, default_config: bool = False) -> Any:
    from ruamel.yaml import YAML
    from ruamel.yaml.error import MarkedYAMLError, YAMLError

    if _flow_depth_exceeds(text, MAX_NESTING):
        raise _too_deep(str(path))
    if default_config:
        try:
            # The same YAML 1.2 resolver and constructor, over libyaml's parser.
            return YAML(typ="safe").load(text)
        except Exception:  # noqa: BLE001 - the pure-Python parser below says what is wrong
            pass
    # The pure-Python safe loader follows YAML 1.2 (core schema): `no` stays a string.
    yaml = YAML(typ="safe", pure=True)
    try:
        return yaml.load(text)
    except MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        problem = error.problem or error.context or "syntax error"
        start = error.context_mark
        if error.context and start is not None and mark is not None and start.line != mark.line:
            problem += f" ({error.context} started at line {start.line + 1})"
        raise ConfigError(f"{where}: malformed YAML: {_one_line(problem)}") from None
    except YAMLError as error:
        raise ConfigError(f"{path}: malformed YAML: {_one_line(error)}") from None
    except RecursionError:
        raise _too_deep(str(path)) from None
    except (ValueError, OverflowError, TypeError) as error:  # 5,000-digit ints, bad dates
        raise ConfigError(f"{path}: malformed YAML: {_one_line(error)}") from None


def check_document(document: Any, where: str) -> None:
    """Refuse documents nested too deeply, or too large once YAML aliases are expanded.

    A YAML alias shares one object; its expanded size and height count it at every place it
    is used, computed once per distinct object, so a billion laughs costs a few steps. A
    structure that contains itself (`&a [*a]`) is refused as such.
    """
    known: dict[int, tuple[int, int]] = {}  # id -> (values once expanded, levels)
    path: set[int] = set()  # the containers between the document and the current one
    stack: list[tuple[Any, bool]] = [(document, False)]
    while stack:
        item, finished = stack.pop()
        if not isinstance(item, list | dict):
            continue
        key = id(item)
        children = list(item.values()) if isinstance(item, dict) else item
        if finished:
            size, height = 1, 1
            for child in children:
                child_size, child_height = known.get(id(child), (1, 0)) \
                    if isinstance(child, list | dict) else (1, 0)
                size += child_size
                height = max(height, child_height + 1)
            if size > MAX_DOCUMENT_VALUES:
                raise ConfigError(f"{where}: the document has more than "
                                  f"{MAX_DOCUMENT_VALUES:,} values once its YAML aliases are "
                                  f"expanded", hint="docs/security.md lists the budgets of specs")
            if height > MAX_NESTING:
                raise _too_deep(where)
            known[key] = (size, height)
            path.discard(key)
            continue
        if key in known:
            continue
        if key in path:
            raise ConfigError(f"{where}: a YAML alias makes the document contain itself")
        path.add(key)
        if len(path) > MAX_NESTING:
            raise _too_deep(where)
        stack.append((item, True))
        stack.extend((child, False) for child in children if isinstance(child, list | dict))


def _one_line(error: object) -> str:
    text = " ".join(str(error).split())
    return text if len(text) <= 300 else text[:297] + "..."
