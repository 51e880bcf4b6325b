"""What only the PostgreSQL store does: refusals, credentials, lost servers, many writers.

Foreign and newer databases are refused; credentials are never printed nor stored; a server
that goes away mid-run fails one recording; writers on both SLURM nodes lose nothing.

The protocol every store offers is tested on both stores in test_results_store.py.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
import urllib.parse
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import psycopg.sql
import pytest
from helpers_results import REPO, postgres_store_url, postgres_url

from dlbs.errors import ResultsError
from dlbs.results.schema import SCHEMA_VERSION
from dlbs.results.sources import load_experiments
from dlbs.results.store import open_store, store_name
from tests import runs
from tests.report.conftest import dummy_run
from tests.run.conftest import gated, wait_until

pytestmark = pytest.mark.postgres
PARAMS = {"exp.model": "resnet50", "exp.replica_batch": 32}


def _schema(url: str) -> str:
    return urllib.parse.unquote(url.rsplit("search_path", 1)[1]).lstrip("=")


def test_a_foreign_or_newer_database_is_refused_untouched() -> None:
    with postgres_store_url() as url:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f"CREATE TABLE {_schema(url)}.theirs (x int)")
        with pytest.raises(ResultsError, match="not a dlbs results database"):
            open_store(url)
        with psycopg.connect(url, autocommit=True) as conn:
            tables = conn.execute("SELECT count(*) FROM information_schema.tables WHERE "
                                  "table_schema = %s", (_schema(url),)).fetchone()[0]
        assert tables == 1
    with postgres_store_url() as url:
        open_store(url).close()
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f"UPDATE {_schema(url)}.dlbs_meta SET value = %s "
                         "WHERE name = 'schema_version'", (str(SCHEMA_VERSION + 1),))
        with pytest.raises(ResultsError, match=f"schema version {SCHEMA_VERSION + 1}; this "
                                               "dlbs reads versions up to") as error:
            open_store(url)
        assert "newer dlbs" in (error.value.hint or "")
    with postgres_store_url() as url:
        with pytest.raises(ResultsError, match="no results database at"):
            open_store(url, create=False)
        with pytest.raises(ResultsError, match="holds no results"):
            open_store(url, read_only=True)


def test_a_reader_never_writes() -> None:
    with postgres_store_url() as url:
        with open_store(url) as store:
            store.record_start("e1", 1, PARAMS)
        with open_store(url, read_only=True) as reader:
            with pytest.raises(ResultsError, match="reading only"):
                reader.record_end("e1", 1, "ok")
            with pytest.raises(ResultsError, match="reading only"):
                reader.execute("write", "DELETE FROM attempts")
            # The session itself is read-only: the server refuses a write that gets there.
            with pytest.raises(ResultsError, match="read-only transaction"):
                reader.query("write", "DELETE FROM attempts RETURNING exp_id")
        with open_store(url) as store:
            assert store.latest_status("e1") == "started"


def test_credentials_are_never_printed_nor_stored(tmp_path: Path, dlbs_cli) -> None:
    url = postgres_url()
    parts = urllib.parse.urlsplit(url)
    password = urllib.parse.unquote(parts.password or "")
    assert password, "the test cluster's URL carries a password"
    # A wrong password: the server refuses, the message names the database, not the secret.
    wrong = url.replace(f":{parts.password}@", ":not-the-password-4242@")
    with pytest.raises(ResultsError) as error:
        open_store(wrong)
    text = f"{error.value.message} {error.value.hint}"
    assert "not-the-password-4242" not in text and "password authentication failed" in text
    assert str(error.value.message).startswith("results database postgresql://dlbs@")
    # A whole run: nothing it prints, logs or records holds the password.
    with postgres_store_url(url) as store_url:
        logs = tmp_path / "logs"
        result = dummy_run(logs, "-P", f"runtime.results_db={store_url}", "-P",
                           "exp.num_batches=3")
        assert result.returncode == 0, result.stderr
        assert password not in result.stdout + result.stderr
        assert all(password not in log.read_text() for log in logs.rglob("*.log"))
        report = dlbs_cli("report", store_url)
        parsed = dlbs_cli("parse", store_url)
        assert report.returncode == 0 and parsed.returncode == 0, report.stderr
        assert password not in report.stdout + report.stderr + parsed.stdout + parsed.stderr
        with psycopg.connect(store_url, autocommit=True) as conn:
            rows = conn.execute("SELECT params, environment, log_path, coalesce(results, '') "
                                "FROM attempts").fetchall()
        assert rows and all(password not in "".join(row) for row in rows)
        [stored] = [json.loads(row[0])["runtime.results_db"] for row in rows]
        assert stored == store_name(store_url) and stored.startswith("postgresql://dlbs@")


def test_the_password_may_come_from_a_pgpass_file(tmp_path: Path) -> None:
    """A URL without a password opens a store of this run's with the one of a PGPASSFILE."""
    with postgres_store_url() as url:
        open_store(url).close()
        parts = urllib.parse.urlsplit(url)
        passfile = tmp_path / "pgpass"
        passfile.write_text(f"{parts.hostname}:{parts.port}:*:{parts.username}:"
                            f"{urllib.parse.unquote(parts.password or '')}\n")
        passfile.chmod(0o600)
        bare = urllib.parse.urlunsplit(parts._replace(
            netloc=f"{parts.username}@{parts.hostname}:{parts.port}"))
        assert store_name(bare) == bare
        environment = dict(os.environ, PGPASSFILE=str(passfile), PYTHONPATH=str(REPO))
        environment.pop("PGPASSWORD", None)
        code = ("import sys; from dlbs.results.store import open_store; "
                "s = open_store(sys.argv[1], create=False); print(s.schema_version)")
        done = subprocess.run([sys.executable, "-c", code, bare], env=environment,
                              capture_output=True, text=True, timeout=60, check=False)
        assert done.returncode == 0 and done.stdout.strip() == str(SCHEMA_VERSION), done.stderr
        # Without the file, the same URL has no password to give.
        environment["PGPASSFILE"] = str(tmp_path / "none")
        refused = subprocess.run([sys.executable, "-c", code, bare], env=environment,
                                 capture_output=True, text=True, timeout=60, check=False)
        assert refused.returncode != 0 and "password" in refused.stderr


def test_an_unreachable_server_is_one_clear_line(dlbs_cli) -> None:
    result = dlbs_cli("report", "postgresql://dlbs:secret-4242@127.0.0.1:1/dlbs")
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert lines[0].startswith("dlbs: error: results database postgresql://dlbs@127.0.0.1:1/"
                               "dlbs: cannot open:"), result.stderr
    assert "Traceback" not in result.stderr and "secret-4242" not in result.stderr


@pytest.mark.slow
def test_a_server_lost_mid_run_fails_the_recording_and_keeps_the_log(tmp_path: Path) -> None:
    """The server goes while the first benchmark runs: it runs to its end, nothing more starts.

    The benchmark is held back by a gate (tests/run/conftest.gated) until its attempt is
    recorded with its process mark; the server's connection is cut then, and the gate opened.
    """
    release = tmp_path / "release"
    with postgres_store_url() as url:
        logs = tmp_path / "logs"
        command = [sys.executable, "-m", "dlbs.cli.main", "run", "-P", "exp.framework=dummy",
                   "-P", f"exp.log_dir={logs}", "-P", "exp.num_warmup_batches=1",
                   "-P", "exp.num_batches=20", "-P", "dummy.sleep=0.05",
                   "-V", 'exp.model=["resnet50", "vgg16", "alexnet"]',
                   "-P", f"runtime.results_db={url}", *gated(release)]
        run = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
        try:
            with psycopg.connect(url, autocommit=True) as watcher:
                def marked() -> bool:
                    if not watcher.execute(
                            "SELECT count(*) FROM pg_tables WHERE tablename = 'attempts' AND "
                            "schemaname = current_schema()").fetchone()[0]:
                        return False
                    # The mark recorded at the start gains the process's pid once it runs.
                    return bool(watcher.execute("SELECT count(*) FROM attempts WHERE job_id "
                                                "LIKE '%\"pid\":%'").fetchone()[0])
                wait_until(marked, "the first attempt recorded with its process mark")
            with psycopg.connect(postgres_url(), autocommit=True) as conn:
                killed = conn.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE application_name = %s", (f"dlbs pid {run.pid} on "
                                                    f"{os.uname().nodename}"[:63],)).fetchall()
            assert killed == [(True,)]
            release.touch()
            _, stderr = run.communicate(timeout=120)
        finally:
            run.kill()
            run.wait()
    errors = [line for line in stderr.splitlines() if line.startswith("dlbs: error:")]
    assert run.returncode == 2 and len(errors) == 1, stderr
    assert "results database postgresql://" in errors[0] and "cannot record" in errors[0]
    assert "Traceback" not in stderr
    [log] = list(logs.glob("*.log"))
    [experiment] = load_experiments([str(log)]).experiments
    assert experiment["results.status"] == "ok" and experiment["results.time_count"] == 20


_WRITER = textwrap.dedent("""
    import os, sys
    from dlbs.results.store import open_store

    name, count = sys.argv[1], int(sys.argv[2])
    node = os.environ.get("SLURMD_NODENAME", "here")
    with open_store(os.environ["DLBS_TEST_STORE"]) as store:
        for index in range(count):
            # Every writer also records "shared-N": runs that start one experiment at once.
            exp_id = f"{name}-{index}" if index % 5 else f"shared-{index}"
            number = store.record_start(exp_id, None, {"exp.model": "m", "i": index},
                                        run=("t", node, "/" + name))
            store.record_end(exp_id, number, "ok",
                             results={"results.time_data": [1.0, 2.0, float(index)]})
            print(exp_id, number, flush=True)
""")


@pytest.mark.slurm
@pytest.mark.slow
def test_writers_on_both_slurm_nodes_lose_nothing_and_repeat_nothing(tmp_path: Path) -> None:
    if shutil.which("sbatch") is None:
        pytest.fail("SLURM is not installed; run `bash .ci/services/slurm.sh` (as root)")
    writer = tmp_path / "writer.py"
    writer.write_text(_WRITER)
    count = 40
    names = [f"{node}-{k}" for node in ("node1", "node2") for k in range(2)]
    with postgres_store_url() as url:
        open_store(url).close()
        environment = dict(os.environ, DLBS_TEST_STORE=url, PYTHONPATH=str(REPO))
        jobs = {}
        for name in names:
            submitted = subprocess.run(
                ["sbatch", "--parsable", "-w", name.split("-")[0], "-c", "1",
                 "-o", str(tmp_path / f"{name}.out"), "-e", str(tmp_path / f"{name}.err"),
                 "--wrap", f"{sys.executable} {writer} {name} {count}"],
                env=environment, capture_output=True, text=True, timeout=60, check=True)
            jobs[name] = submitted.stdout.strip().split(";")[0]
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            queued = subprocess.run(["squeue", "-h", "-j", ",".join(jobs.values())],
                                    capture_output=True, text=True, timeout=60).stdout
            if not queued.strip():
                break
            time.sleep(1)
        reported = set()
        for name in names:
            lines = (tmp_path / f"{name}.out").read_text().split()
            errors = (tmp_path / f"{name}.err").read_text()
            assert len(lines) == 2 * count, errors
            reported |= {(lines[i], int(lines[i + 1])) for i in range(0, len(lines), 2)}
        with open_store(url) as store:
            stored = [(a.exp_id, a.attempt, a.run_host, a.status) for a in store.attempts()]
    assert len(stored) == len(names) * count == len(reported)
    assert {(exp_id, attempt) for exp_id, attempt, _, _ in stored} == reported
    assert {host for _, _, host, _ in stored} == {"node1", "node2"}
    assert {status for _, _, _, status in stored} == {"ok"}
    shared = sorted(attempt for exp_id, attempt, _, _ in stored if exp_id == "shared-0")
    assert shared == list(range(1, len(names) + 1))


# -- schema versions: the next layout's migration, older and newer dlbs --------------------

def _meta_version(url: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        return int(conn.execute(f"SELECT value FROM {_schema(url)}.dlbs_meta "
                                "WHERE name = 'schema_version'").fetchone()[0])


def _has_table(url: str, name: str) -> bool:
    with psycopg.connect(url, autocommit=True) as conn:
        return bool(conn.execute("SELECT to_regclass(%s) IS NOT NULL",
                                 (f"{_schema(url)}.{name}",)).fetchone()[0])


@contextlib.contextmanager
def _next_version(monkeypatch: pytest.MonkeyPatch, step: Any) -> Iterator[None]:
    """Make this dlbs the next one: SCHEMA_VERSION + 1, with `step` from this version."""
    import dlbs.results.postgres_store as postgres_store
    from dlbs.results import postgres_schema

    with monkeypatch.context() as patch:
        patch.setattr(postgres_store, "SCHEMA_VERSION", SCHEMA_VERSION + 1)
        patch.setattr(postgres_schema, "MIGRATIONS",
                      {**postgres_schema.MIGRATIONS, SCHEMA_VERSION: step})
        yield


def test_a_newer_dlbs_migrates_a_database_of_this_version_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The mechanism the next layout uses, with a synthetic version SCHEMA_VERSION + 1."""
    runs: list[int] = []

    def add_a_table(session: Any) -> None:
        runs.append(1)
        session.execute("CREATE TABLE next_layout (id BIGINT PRIMARY KEY, note TEXT)")
        session.execute("ALTER TABLE attempts ADD COLUMN next_note TEXT")

    with postgres_store_url() as url:
        with open_store(url) as store:
            store.record_attempt("e1", 1, PARAMS, "ok", results={"results.time_data": [2.0]})
        with _next_version(monkeypatch, add_a_table):
            # Many dlbs open the database at once: one migrates it, the others find it done.
            stores = _threads(lambda: open_store(url), 4)
            assert runs == [1] and all(s.schema_version == SCHEMA_VERSION + 1 for s in stores)
            for store in stores:
                store.close()
            with open_store(url, read_only=True) as reader:
                assert [a.exp_id for a in reader.attempts()] == ["e1"]
            assert runs == [1]
        assert _meta_version(url) == SCHEMA_VERSION + 1 and _has_table(url, "next_layout")
        # This dlbs is the older one now: it refuses the database, reading or writing.
        for read_only in (False, True):
            with pytest.raises(ResultsError, match=f"has schema version {SCHEMA_VERSION + 1}; "
                               f"this dlbs reads versions up to {SCHEMA_VERSION}") as error:
                open_store(url, read_only=read_only)
            assert "newer dlbs" in (error.value.hint or "")
        result = subprocess.run([sys.executable, "-m", "dlbs.cli.main", "report", url],
                                cwd=REPO, capture_output=True, text=True, timeout=120,
                                check=False)
        assert result.returncode == 2 and "Traceback" not in result.stderr
        assert result.stderr.startswith("dlbs: error: results database postgresql://")


def test_a_failed_migration_leaves_the_old_version_whole(
        monkeypatch: pytest.MonkeyPatch) -> None:
    def half_a_step(session: Any) -> None:
        session.execute("CREATE TABLE next_layout (id BIGINT)")
        session.execute("SELECT no_such_function()")

    with postgres_store_url() as url:
        with open_store(url) as store:
            store.record_attempt("e1", 1, PARAMS, "ok")
        with _next_version(monkeypatch, half_a_step):
            with pytest.raises(ResultsError, match="cannot open: .*no_such_function"):
                open_store(url)
        assert _meta_version(url) == SCHEMA_VERSION and not _has_table(url, "next_layout")
        with open_store(url, read_only=True) as reader:
            assert [a.exp_id for a in reader.attempts()] == ["e1"]


def test_a_reader_who_may_not_migrate_is_told_who_can(monkeypatch: pytest.MonkeyPatch) -> None:
    role = runs.role_name("reader")
    secret = uuid.uuid4().hex
    with postgres_store_url() as url:
        open_store(url).close()
        schema = _schema(url)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(psycopg.sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(
                psycopg.sql.Identifier(role), psycopg.sql.Literal(secret)))
            conn.execute(f"GRANT USAGE ON SCHEMA {schema} TO {role}")
            conn.execute(f"GRANT SELECT ON ALL TABLES IN SCHEMA {schema} TO {role}")
        try:
            parts = urllib.parse.urlsplit(url)
            reader_url = url.replace(f"{parts.username}:{parts.password}@",
                                     f"{role}:{secret}@", 1)
            with open_store(reader_url, read_only=True) as reader:
                assert reader.schema_version == SCHEMA_VERSION
            with _next_version(monkeypatch, lambda session: session.execute(
                    "CREATE TABLE next_layout (id BIGINT)")):
                with pytest.raises(ResultsError, match=f"has schema version {SCHEMA_VERSION}; "
                                   "this dlbs reads version .* could not migrate it: .*"
                                   "permission denied") as error:
                    open_store(reader_url, read_only=True)
                assert "may change its tables" in (error.value.hint or "")
                assert secret not in error.value.message + (error.value.hint or "")
            assert _meta_version(url) == SCHEMA_VERSION
        finally:
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute(f"REVOKE ALL ON ALL TABLES IN SCHEMA {schema} FROM {role}")
                conn.execute(f"REVOKE ALL ON SCHEMA {schema} FROM {role}")
                conn.execute(f"DROP ROLE {role}")


def test_an_older_version_that_postgresql_never_had_is_refused_untouched() -> None:
    """PostgreSQL stores begin at version 4: a lower one was not written by dlbs."""
    with postgres_store_url() as url:
        open_store(url).close()
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f"UPDATE {_schema(url)}.dlbs_meta SET value = %s "
                         "WHERE name = 'schema_version'", (str(SCHEMA_VERSION - 1),))
        for read_only in (False, True):
            with pytest.raises(ResultsError, match=f"schema version {SCHEMA_VERSION - 1}, "
                               f"which this dlbs cannot migrate to {SCHEMA_VERSION}"):
                open_store(url, read_only=read_only)
        assert _meta_version(url) == SCHEMA_VERSION - 1


def test_every_layout_after_the_first_has_a_migration_in_both_stores() -> None:
    """Raising SCHEMA_VERSION without a step for each store fails here, not at a user's."""
    from dlbs.results import migrations, postgres_schema

    assert sorted(migrations.MIGRATIONS) == list(range(1, SCHEMA_VERSION))
    assert sorted(postgres_schema.MIGRATIONS) == list(range(4, SCHEMA_VERSION))


def _threads(call: Any, count: int) -> list[Any]:
    """`call()` in `count` threads at once; their results."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(count) as pool:
        return [future.result(timeout=120) for future in
                [pool.submit(call) for _ in range(count)]]


def test_a_writer_adds_the_indexes_a_store_made_before_them_lacks() -> None:
    """postgres_schema.INDEXES change nothing stored: a store of this version may lack them."""
    from dlbs.results import postgres_schema

    with postgres_store_url() as url:
        with open_store(url) as store:
            store.record_attempt("e1", 1, PARAMS, "ok", results={"results.time_data": [1.0]})
        assert all(_has_table(url, name) for name in postgres_schema.INDEXES)
        with psycopg.connect(url, autocommit=True) as conn:
            for name in postgres_schema.INDEXES:
                conn.execute(f"DROP INDEX {_schema(url)}.{name}")
        with open_store(url, read_only=True) as reader:   # a reader reads without them
            assert len(reader.report_columns()) == 1
        assert not any(_has_table(url, name) for name in postgres_schema.INDEXES)
        open_store(url).close()
        assert all(_has_table(url, name) for name in postgres_schema.INDEXES)
