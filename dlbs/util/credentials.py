"""A database URL's password: never printed, logged, stored, nor written into a plan.

`runtime.results_db` may be a `postgresql://` URL that holds a password, in its user part
(`postgresql://user:secret@host/db`) or as a parameter (`...?password=secret`). libpq reads
it there, or from PGPASSFILE (`~/.pgpass`) or PGPASSWORD when the URL has none. Whatever
dlbs shows or keeps goes through this module (docs/security.md, "Credentials"):
- `without_password(url)`: a whole value, the URL with its password left out and nothing
  else changed, so that it still names the same database (plan files, stored parameters,
  log headers); libpq then takes the password from PGPASSFILE or PGPASSWORD;
- `mask_text(text)`: every such URL inside a text (a message, a table cell);
- `ExperimentMask`: an experiment's values, as the planner made them, with the password of
  its `runtime.results_db` left out of each value that holds it (a value may interpolate
  the URL); an experiment without one is passed through untouched, at the cost of one
  lookup, so plans of a million experiments do not pay for the rule;
- `benchmark_environment()`: the environment a benchmark inherits from dlbs, without the
  store's credentials (libpq's password variables, and any URL's password in a value): a
  backend runs a user's model code, which has no business with the results store.

Schemes are read in any case (`Postgresql://`, `POSTGRES://` are PostgreSQL's, and
`canonical_url` spells them as libpq reads them), and a password is left out of a URL of any
scheme (`mysql://u:pw@host/db`): such a URL is not a store dlbs opens, and what refuses it
must not show it either (`looks_like_url`).

The URL is cut as libpq reads it: the user part ends at its first `@`, unless a `/` after
a valid host list comes first (then the `@` is in the database name); the password is what
follows the first `:` of the user part, and each `password=` parameter of the query. A
password written with a raw `@`, `/` or `?` (it should be %-encoded) is left out all the
same, with whatever libpq would have misread around it.
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Mapping
from typing import Any

#: The schemes of the database URLs dlbs opens (PostgreSQL's), in libpq's spelling.
SCHEMES = ("postgresql://", "postgres://")
RESULTS_DB = "runtime.results_db"
# The patterns are compiled when first used (`re` keeps them): most processes never meet a
# database URL, and compiling them cost every command about 2 million instructions.
# PostgreSQL's schemes in any case; any URL's scheme (RFC 3986), for passwords and texts: a
# message about a mistyped URL must not show its password either.
_SCHEME = r"(?i)postgres(?:ql)?://"
_ANY_SCHEME = r"[A-Za-z][A-Za-z0-9+.\-]*://"
# Where a URL ends inside a text (a message quotes it, or a blank follows it).
_TEXT_END = r"[\s'\"<>]"
# A libpq host list: host[:port][,host[:port]...], a host an IPv6 literal in brackets.
_HOSTS = (r"(?:\[[^\]/@]*\]|[^:/,@\[\]?]*)(?::\d*)?"
          r"(?:,(?:\[[^\]/@]*\]|[^:/,@\[\]?]*)(?::\d*)?)*")
_PASSWORD_KEY = "password"
#: libpq's variables that hold a password or name where passwords are kept: what dlbs reads
#: to reach the store, and what no benchmark inherits (docs/security.md, "Credentials").
CREDENTIAL_VARIABLES = frozenset({"PGPASSWORD", "PGPASSFILE", "PGSERVICEFILE", "PGSSLKEY"})


def is_database_url(value: object) -> bool:
    """Whether `value` is a database URL as `runtime.results_db` takes one (any case)."""
    return isinstance(value, str) and re.match(_SCHEME, value) is not None


def looks_like_url(value: object) -> bool:
    """Whether `value` starts with a URL's scheme (`scheme://`), supported or not."""
    return isinstance(value, str) and re.match(_ANY_SCHEME, value) is not None


def canonical_url(url: str) -> str:
    """A database URL with its scheme in lower case, as libpq reads it (`POSTGRESQL://`)."""
    match = re.match(_SCHEME, url)
    return url if match is None else url[:match.end()].lower() + url[match.end():]


def without_password(url: str) -> str:
    """`url` without its password (see the module); any other text is returned as it is."""
    match = re.match(_ANY_SCHEME, url)
    if match is None:
        return url
    return url[:match.end()] + _stripped(url[match.end():])


def passwords(url: str) -> list[str]:
    """The password texts of `url` as written and as libpq decodes them (none: [])."""
    match = re.match(_ANY_SCHEME, url)
    if match is None:
        return []
    found = []
    rest = url[match.end():]
    user_end, query = _parts(rest)
    if user_end is not None:
        user = rest[:user_end]
        if ":" in user:
            found.append(user[user.index(":") + 1:])
    if query is not None:
        for item in rest[query + 1:].split("&"):
            key, _, value = item.partition("=")
            if urllib.parse.unquote(key) == _PASSWORD_KEY:
                found.append(value)
    texts = []
    for text in found:
        for form in (text, urllib.parse.unquote(text)):
            if form and form not in texts:
                texts.append(form)
    return texts


def mask_text(text: str) -> str:
    """`text` with every database URL in it without its password (messages, cells)."""
    if "://" not in text:
        return text
    pieces = []
    done = 0
    for match in re.finditer(_ANY_SCHEME, text):
        if match.start() < done:
            continue
        end = re.compile(_TEXT_END).search(text, match.end())
        stop = end.start() if end else len(text)
        pieces.append(text[done:match.end()])
        pieces.append(_stripped(text[match.end():stop]))
        done = stop
    pieces.append(text[done:])
    return "".join(pieces)


def masked(value: Any) -> Any:
    """`value` (a document: dicts, lists, strings) with every URL's password left out."""
    if isinstance(value, str):
        return without_password(value) if looks_like_url(value) else mask_text(value)
    if isinstance(value, Mapping):
        return {key: masked(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [masked(item) for item in value]
    return value


def benchmark_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """`environ` (this process's by default) as a benchmark inherits it (see the module).

    The variables of CREDENTIAL_VARIABLES are left out; a value that holds a database URL
    with a password (`DATABASE_URL=postgresql://u:pw@...`) keeps the URL without it.
    What a user sets for the benchmark on purpose (`runtime.env.*`, `-e` of docker_args)
    is added after this, by the target, as given.
    """
    import os

    source = os.environ if environ is None else environ
    return {name: mask_text(value) if "://" in value else value
            for name, value in source.items() if name.upper() not in CREDENTIAL_VARIABLES}


class ExperimentMask:
    """Experiments with the password of their results store left out (see the module)."""

    def __init__(self) -> None:
        #: Whether some experiment had a password to leave out (a plan file says so).
        self.found = False

    def __call__(self, experiment: dict[str, Any]) -> dict[str, Any]:
        """`experiment`, itself when its `runtime.results_db` holds no password."""
        url = experiment.get(RESULTS_DB)
        secrets = passwords(url) if looks_like_url(url) else []
        if not secrets:
            return experiment
        self.found = True
        return {key: _without(value, secrets) for key, value in experiment.items()}


def _without(value: Any, secrets: list[str]) -> Any:
    """A value of an experiment whose store's password is one of `secrets`, without it."""
    if isinstance(value, str):
        if not any(secret in value for secret in secrets):
            return value
        value = masked(value)
        for secret in secrets:   # a password that reached the value other than in a URL
            value = value.replace(secret, "***")
        return value
    if isinstance(value, Mapping):
        return {key: _without(item, secrets) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_without(item, secrets) for item in value]
    return value


def _parts(rest: str) -> tuple[int | None, int | None]:
    """Where the user part of a URL (less its scheme) ends (its `@`), and where `?` is."""
    user_end: int | None = None
    at = rest.find("@")
    if at >= 0:
        slash = rest.find("/")
        if not (0 <= slash < at and re.fullmatch(_HOSTS, rest[:slash])):
            # libpq's user part ends at the first `@`; a raw `@` of a password puts more
            # before the host's `/`: up to the last of them.
            after = rest.find("/", at)
            user_end = rest.rfind("@", at, len(rest) if after < 0 else after)
        # else postgresql://host:5432/db@name: the `@` is in the database name
    question = rest.find("?", 0 if user_end is None else user_end)
    return user_end, (question if question >= 0 else None)


def _stripped(rest: str) -> str:
    """A URL less its scheme, without the password (see the module)."""
    user_end, query = _parts(rest)
    head = rest if query is None else rest[:query]
    if user_end is not None and ":" in rest[:user_end]:
        head = rest[:rest.index(":")] + head[user_end:]
    if query is None:
        return head
    kept = [item for item in rest[query + 1:].split("&")
            if urllib.parse.unquote(item.partition("=")[0]) != _PASSWORD_KEY]
    return head + ("?" + "&".join(kept) if any(kept) else "")
