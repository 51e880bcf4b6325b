"""A `postgresql://` URL's password is never printed, logged, stored, nor written to a plan.

The rule (dlbs/util/credentials.py, docs/security.md): what dlbs shows or keeps names the
store without its password; a plan file holds the URL without it, and `dlbs run --plan FILE`
takes it from PGPASSWORD or PGPASSFILE. The functions are checked on their own, then every
command against a real PostgreSQL role whose password hypothesis makes up: each output, the
plan file, the logs, every table of the store and every page of `dlbs serve`.
"""

from __future__ import annotations

import html
import io
import json
import os
import sys
import tempfile
import urllib.parse
import uuid
from collections.abc import Iterator
from pathlib import Path
from unittest import mock

import pytest
from helpers_results import http_get, postgres_url, serve_in_process, with_search_path
from hypothesis import HealthCheck, Phase, assume, given, settings
from hypothesis import strategies as st

from dlbs.cli.main import main
from dlbs.results.store import open_store
from dlbs.util.credentials import (
    ExperimentMask,
    mask_text,
    masked,
    passwords,
    without_password,
)
from tests import runs

HOST = "db.example.org:5432/bench"

# -- the functions -----------------------------------------------------------------------


@pytest.mark.parametrize(("url", "shown", "secrets"), [
    ("postgresql://u:pw@h:5432/db", "postgresql://u@h:5432/db", ["pw"]),
    ("postgres://u:pw@h/db", "postgres://u@h/db", ["pw"]),
    ("postgresql://u:p%40ss@h/db", "postgresql://u@h/db", ["p%40ss", "p@ss"]),
    ("postgresql://h/db?password=x&sslmode=require", "postgresql://h/db?sslmode=require",
     ["x"]),
    ("postgresql://h/db?sslmode=require&%70assword=x", "postgresql://h/db?sslmode=require",
     ["x"]),
    ("postgresql://u:a@h/db?password=b", "postgresql://u@h/db", ["a", "b"]),
    # Written as it should not be (raw `@`, `?`, `/`): left out all the same.
    ("postgresql://u:p@ss@h/db", "postgresql://u@h/db", ["p@ss"]),
    ("postgresql://u:p?w@h/db", "postgresql://u@h/db", ["p?w"]),
    ("postgresql://u:se/cret@h/db", "postgresql://u@h/db", ["se/cret"]),
    # What has no password stays as it was, to the byte.
    ("postgresql://u@h/db?options=-csearch_path%3Dteam_a",
     "postgresql://u@h/db?options=-csearch_path%3Dteam_a", []),
    ("postgresql:///db?host=/run/postgresql", "postgresql:///db?host=/run/postgresql", []),
    ("postgresql://h:5432/db@name", "postgresql://h:5432/db@name", []),
    ("postgresql://u@[::1]:5432,h2:5433/db", "postgresql://u@[::1]:5432,h2:5433/db", []),
    ("postgresql://u:pw@/db?host=/tmp", "postgresql://u@/db?host=/tmp", ["pw"]),
    ("logs/results.db", "logs/results.db", []),
])
def test_a_url_without_its_password(url: str, shown: str, secrets: list[str]) -> None:
    assert without_password(url) == shown
    assert passwords(url) == secrets
    assert mask_text(f"cannot open '{url}': refused") == f"cannot open '{shown}': refused"


def test_texts_and_documents_lose_every_password() -> None:
    message = ("argument --window: invalid int value: 'POSTGRESQL://u:s3cret@h/db' and "
               "postgres://v:other@h2/db2, postgresql://h/db?password=third")
    assert mask_text(message) == ("argument --window: invalid int value: 'POSTGRESQL://u@h/db'"
                                  " and postgres://v@h2/db2, postgresql://h/db")
    document = {"parameters": {"runtime.results_db": {"val": "postgresql://u:s3cret@h/db"}},
                "variables": {"x": ["postgresql://u:s3cret@h/a", 3, None]}}
    assert "s3cret" not in json.dumps(masked(document))
    assert masked({"a": [1.5, True, "plain"]}) == {"a": [1.5, True, "plain"]}


def test_an_experiment_loses_the_password_wherever_its_url_went() -> None:
    mask = ExperimentMask()
    plain = {"runtime.results_db": "logs/results.db", "exp.model": "resnet50"}
    assert mask(plain) is plain and not mask.found
    experiment = {"runtime.results_db": "postgresql://u:s3cret@h/db", "exp.id": "abc",
                  "my.note": "store: postgresql://u:s3cret@h/db, shared",
                  "my.list": ["postgresql://u:s3cret@h/db"], "my.bare": "s3cret alone"}
    shown = mask(experiment)
    assert mask.found and "s3cret" not in json.dumps(shown)
    assert shown["runtime.results_db"] == "postgresql://u@h/db"
    assert shown["my.note"] == "store: postgresql://u@h/db, shared"
    assert shown["my.bare"] == "*** alone" and shown["exp.id"] == "abc"
    assert experiment["my.note"].count("s3cret") == 1   # the planner's dict is left alone


_PASSWORDS = st.text(st.characters(min_codepoint=32, max_codepoint=0x24F,
                                   blacklist_categories=("Cs", "Cc")),
                     min_size=10, max_size=24).filter(lambda text: len(set(text)) >= 6)


def _forms(password: str) -> set[str]:
    """Every way an output could carry `password`: as is, %-encoded, JSON, HTML, repr."""
    forms = {password, urllib.parse.quote(password, safe=""), urllib.parse.quote(password),
             urllib.parse.quote_plus(password), json.dumps(password)[1:-1],
             json.dumps(password, ensure_ascii=False)[1:-1], html.escape(password),
             html.escape(password, quote=False), repr(password)[1:-1]}
    return {form for form in forms if form}


def _leaks(password: str, text: str) -> list[str]:
    return [form for form in _forms(password) if form in text]


@given(password=_PASSWORDS, user=st.sampled_from(["dlbs", "u", "team%20a"]),
       in_query=st.booleans())
def test_any_password_is_left_out_of_a_url_and_a_message(password: str, user: str,
                                                         in_query: bool) -> None:
    encoded = urllib.parse.quote(password, safe="")
    url = f"postgresql://{user}@{HOST}?password={encoded}&sslmode=prefer" if in_query else \
        f"postgresql://{user}:{encoded}@{HOST}?sslmode=prefer"
    assume(not _leaks(password, f"postgresql://{user}@{HOST}?sslmode=prefer"))
    assert without_password(url) == f"postgresql://{user}@{HOST}?sslmode=prefer"
    assert password in passwords(url)
    assert not _leaks(password, mask_text(f"dlbs: error: bad value {url!r} (and {url})"))


@given(password=_PASSWORDS.filter(lambda text: "/" not in text))
def test_a_raw_password_is_left_out_as_libpq_reads_it(password: str) -> None:
    """Written without %-encoding (a raw `@`, `?`, `:` in it), it is still left out."""
    assume(not _leaks(password, f"postgresql://u@{HOST}"))
    assert without_password(f"postgresql://u:{password}@{HOST}") == f"postgresql://u@{HOST}"


# -- every command, against a real role -----------------------------------------------------

class Role:
    """A PostgreSQL role of the test cluster and a schema it may use; its password changes."""

    def __init__(self) -> None:
        import psycopg

        self.admin = postgres_url()
        self.name = runs.role_name("cred")
        self.schemas: list[str] = []
        with psycopg.connect(self.admin, autocommit=True) as conn:
            conn.execute(f"CREATE ROLE {self.name} LOGIN")

    def url(self, password: str, schema: str, in_query: bool = False) -> str:
        """The role's URL with `password` (%-encoded), its tables in `schema`."""
        import psycopg
        import psycopg.sql

        with psycopg.connect(self.admin, autocommit=True) as conn:
            conn.execute(psycopg.sql.SQL("ALTER ROLE {} PASSWORD {}").format(
                psycopg.sql.Identifier(self.name), psycopg.sql.Literal(password)))
            if schema not in self.schemas:
                conn.execute(f"CREATE SCHEMA {schema}")
                conn.execute(f"GRANT ALL ON SCHEMA {schema} TO {self.name}")
                self.schemas.append(schema)
        parts = urllib.parse.urlsplit(self.admin)
        encoded = urllib.parse.quote(password, safe="")
        where = f"{parts.hostname}:{parts.port}{parts.path}"
        url = f"postgresql://{self.name}@{where}?password={encoded}" if in_query else \
            f"postgresql://{self.name}:{encoded}@{where}"
        return with_search_path(url, schema)

    def url_in_a_new_schema(self, password: str, in_query: bool) -> tuple[str, str]:
        """A new schema of the role's, and its URL with `password` (see `url`)."""
        schema = f"c_{uuid.uuid4().hex[:12]}"
        return schema, self.url(password, schema, in_query)

    def tables_text(self, schema: str) -> str:
        """Every row of every table of `schema`, as text."""
        import psycopg

        with psycopg.connect(self.admin, autocommit=True) as conn:
            tables = [row[0] for row in conn.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = %s",
                (schema,))]
            return "\n".join(str(row[0]) for table in tables for row in conn.execute(
                f"SELECT t::text FROM {schema}.{table} AS t"))

    def drop(self) -> None:
        import psycopg

        with psycopg.connect(self.admin, autocommit=True) as conn:
            for schema in self.schemas:
                conn.execute(f"DROP SCHEMA {schema} CASCADE")
            conn.execute(f"DROP ROLE {self.name}")


@pytest.fixture(scope="module")
def role() -> Iterator[Role]:
    made = Role()
    try:
        yield made
    finally:
        made.drop()


def dlbs(*argv: str, environment: dict[str, str] | None = None,
         remove: tuple[str, ...] = ()) -> tuple[int, str]:
    """`dlbs ARGV` in this process: (exit status, stdout and stderr together)."""
    out, err = io.BytesIO(), io.BytesIO()
    streams = [io.TextIOWrapper(stream, encoding="utf-8", write_through=True)
               for stream in (out, err)]
    changed = dict(environment or {})
    with mock.patch.dict(os.environ, changed), \
            mock.patch.object(sys, "stdout", streams[0]), \
            mock.patch.object(sys, "stderr", streams[1]):
        for name in remove:
            os.environ.pop(name, None)
        code = main(list(argv))
    for stream in streams:
        stream.flush()
    return code, out.getvalue().decode("utf-8", "replace") + \
        err.getvalue().decode("utf-8", "replace")


def _spec(folder: Path, url: str) -> list[str]:
    return ["-P", "exp.framework=dummy", "-P", f"exp.log_dir={folder}",
            "-P", "exp.num_batches=3", "-P", "exp.num_warmup_batches=1",
            "-P", "dummy.sleep=0.001", "-P", f"runtime.results_db={json.dumps(url)}",
            "-P", 'my.note="recorded in ${runtime.results_db}"',
            "-V", 'exp.model=["resnet50", "alexnet"]']


def _outputs(role: Role, password: str, in_query: bool) -> list[str]:
    """What plan, print-config and dry runs print for a store URL that holds `password`."""
    _, url = role.url_in_a_new_schema(password, in_query)
    with tempfile.TemporaryDirectory() as folder:
        spec = _spec(Path(folder) / "logs", url)
        outputs = []
        for fmt in ("json", "jsonl", "table", "csv"):
            code, text = dlbs("plan", *spec, "--format", fmt,
                              "--keys", "exp.id,runtime.results_db,my.note")
            assert code == 0 and "postgresql://" in text, text
            outputs.append(text)
        code, text = dlbs("plan", *spec)
        outputs.append(text)
        assert code == 0 and "my.note" in text
        for fmt in ("json", "yaml"):
            code, text = dlbs("print-config", *spec, "--format", fmt)
            assert code == 0 and "runtime.results_db" in text
            outputs.append(text)
        plan = Path(folder) / "plan.json"
        code, text = dlbs("plan", *spec, "-o", str(plan))
        assert code == 0 and "PGPASSFILE or PGPASSWORD" in text, text
        outputs.extend([text, plan.read_text()])
        # The store exists (a dry run reads what is done), made by the role itself.
        open_store(url).close()
        code, text = dlbs("run", *spec, "--dry-run")
        assert code == 0 and "2 experiments: 2 to run" in text, text
        outputs.append(text)
        code, text = dlbs("run", *spec, "--dry-run", "--format", "json")
        assert code == 0 and text.count('"action":"run"') == 2, text
        outputs.append(text)
        # The plan file reaches the store with the password from the environment only.
        code, text = dlbs("run", "--plan", str(plan), "--dry-run", remove=("PGPASSWORD",))
        assert code == 2 and "no password supplied" in text and "PGPASSWORD" in text, text
        outputs.append(text)
        code, text = dlbs("run", "--plan", str(plan), "--dry-run",
                          environment={"PGPASSWORD": password})
        assert code == 0 and "2 experiments: 2 to run" in text, text
        outputs.append(text)
        passfile = Path(folder) / "pgpass"
        parts = urllib.parse.urlsplit(role.admin)
        escaped = password.replace("\\", "\\\\").replace(":", "\\:")
        passfile.write_text(f"{parts.hostname}:{parts.port}:*:{role.name}:{escaped}\n")
        passfile.chmod(0o600)
        code, text = dlbs("run", "--plan", str(plan), "--dry-run",
                          environment={"PGPASSFILE": str(passfile)}, remove=("PGPASSWORD",))
        assert code == 0 and "2 experiments: 2 to run" in text, text
        outputs.append(text)
    return outputs


#: What the commands print for another password: text that is there whatever the password.
_baseline: list[str] = []


def _assume_not_shown_anyway(role: Role, password: str) -> None:
    """Skip a password that the commands print whatever the password is.

    Hypothesis also draws strings from dlbs's own source ('prefetch_b', of
    pytorch.prefetch_batches): what every output shows anyway is no leak of a password.
    """
    if not _baseline:
        _baseline.extend(_outputs(role, "n0t-the-0ne-looked-for", False))
    assume(not any(_leaks(password, text) for text in _baseline))


@pytest.mark.postgres
@settings(max_examples=8, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(password=_PASSWORDS, in_query=st.booleans())
def test_plan_print_config_and_dry_run_never_show_the_password(
        role: Role, password: str, in_query: bool) -> None:
    _assume_not_shown_anyway(role, password)
    for text in _outputs(role, password, in_query):
        assert not _leaks(password, text), (_leaks(password, text), text)


@pytest.mark.postgres
@pytest.mark.slow
@settings(max_examples=3, deadline=None, phases=[Phase.explicit, Phase.reuse, Phase.generate],
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(password=_PASSWORDS, in_query=st.booleans())
def test_a_run_and_every_reader_never_show_nor_keep_the_password(
        role: Role, password: str, in_query: bool) -> None:
    """A real sweep into the store, then every command that reads it, and `dlbs serve`."""
    _assume_not_shown_anyway(role, password)
    schema, url = role.url_in_a_new_schema(password, in_query)
    outputs = []
    with tempfile.TemporaryDirectory() as folder:
        logs = Path(folder) / "logs"
        spec = _spec(logs, url)
        code, text = dlbs("run", *spec, "-P", "runtime.run_tag=v1")
        assert code == 0 and "2 ok" in text, text
        outputs.append(text)
        code, text = dlbs("run", *spec, "-P", "runtime.run_tag=v2")
        assert code == 0, text
        outputs.append(text)
        for fmt in ("text", "json", "csv", "html", "markdown"):
            code, text = dlbs("report", url, "--format", fmt)
            assert code == 0, text
            outputs.append(text)
        for command, expected in ((("parse", url), 0), (("history", url), 0),
                                  (("history", url, "--check"), 0), (("compare", url, url), 0),
                                  (("trace", url), 2),   # nothing traced: an error line
                                  (("results", "copy", url, str(Path(folder) / "copy.db")), 0),
                                  (("results", "copy", url, str(Path(folder) / "copy")), 0),
                                  (("report", str(Path(folder) / "copy.db"), "--format",
                                    "json"), 0)):
            code, text = dlbs(*command)
            assert code == expected, (command, text)
            outputs.append(text)
        with open_store(url, read_only=True) as store:
            stored = store.attempts()
        assert len(stored) == 4 and all(
            attempt.params["my.note"].startswith("recorded in postgresql://")
            for attempt in stored)
        outputs.extend(path.read_text(errors="replace") for path in Path(folder).rglob("*")
                       if path.is_file() and path.suffix in (".log", ".json", ".csv", ""))
        copied = Path(folder) / "copy.db"
        outputs.append(copied.read_bytes().decode("utf-8", "replace"))
        outputs.append(role.tables_text(schema))
        with serve_in_process(url) as base:
            pages = ["/", "/experiments", "/report", "/report?format=csv", "/compare",
                     "/history", "/history/chart?index=0", "/report?type=bogus"]
            for path in pages:
                status, headers, body = http_get(base, path)
                assert status == (400 if "bogus" in path else 200), (path, body[-2000:])
                outputs.append(body + json.dumps(headers))
            status, _, body = http_get(base, f"/experiment/{stored[0].exp_id}")
            assert status == 200 and "my.note" in body
            outputs.append(body)
    assert any("postgresql://" in text for text in outputs)
    for text in outputs:
        assert not _leaks(password, text), (_leaks(password, text), text[:3000])
