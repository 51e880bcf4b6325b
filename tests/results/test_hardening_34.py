"""Issue 34 for the results store, copies, parse and what rows and backend output may do.

Each test reproduces one class of the issue (its item number in the test's name) with the
example and the variants around it: a user's command as a subprocess where hanging is the
defect, in-process otherwise.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.cli.test_plan_cli import assert_one_error_line

DUMMY = ["-P", "exp.framework=dummy", "-P", "exp.num_batches=2", "-P", "exp.num_warmup_batches=0"]


@pytest.fixture(params=["fifo", "device", "socket"])
def special(request, tmp_path: Path):
    """A path that is not a regular file: a FIFO with no writer, a device, a socket."""
    if request.param == "fifo":
        path = tmp_path / "store.db"
        os.mkfifo(path)
        yield str(path)
    elif request.param == "device":
        yield "/dev/zero"
    else:
        import socket

        path = tmp_path / "store.sock"
        with socket.socket(socket.AF_UNIX) as server:
            server.bind(str(path))
            yield str(path)


# -- 13: a FIFO (or any file that is not regular) as a store -----------------------------------
@pytest.mark.parametrize("command", [
    ["results", "copy", "{src}", "{tmp}/dst.db"],
    ["trace", "{src}", "--id", "X"],
    ["trace", "{src}"],
    ["trace", "{tmp}/dst.db", "{src}"],
])
def test_13_a_store_that_is_no_regular_file_is_refused_at_once(dlbs_cli, tmp_path, special,
                                                                command):
    source = special
    argv = [part.format(src=source, tmp=tmp_path) for part in command]
    result = dlbs_cli(*argv, cwd=tmp_path, timeout=60)
    assert_one_error_line(result, f"cannot read {source}: it is a", "not a regular file")


def test_13_a_fifo_named_results_db_in_a_folder_is_no_database(dlbs_cli, tmp_path):
    folder = tmp_path / "logs"
    folder.mkdir()
    os.mkfifo(folder / "results.db")
    for argv in (["trace", str(folder), "--id", "X"], ["results", "copy", str(folder),
                                                      str(tmp_path / "dst.db")]):
        result = dlbs_cli(*argv, cwd=tmp_path, timeout=60)
        assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr


def test_13_the_reading_helpers_never_wait_on_a_fifo(tmp_path):
    from dlbs.results.store import is_store
    from dlbs.util.regular_files import head, special_kind

    fifo = tmp_path / "f"
    os.mkfifo(fifo)
    assert not is_store(fifo)
    assert special_kind(fifo) == "a FIFO" and special_kind(tmp_path) is None
    with pytest.raises(OSError):
        head(fifo, 16)


# -- 16, first bullet: the store's credentials never reach a benchmark's environment -----------
SECRETS = {"PGPASSWORD": "s3cret-pw", "PGPASSFILE": "/home/me/.pgpass-s3cret",
           "PGSERVICEFILE": "/home/me/.pg_service-s3cret", "PGSSLKEY": "/home/me/s3cret.key",
           "DATABASE_URL": "postgresql://me:s3cret-url@db/bench"}


def test_16_the_benchmark_environment_has_no_store_credentials():
    from dlbs.util.credentials import benchmark_environment

    inherited = benchmark_environment({**SECRETS, "PATH": "/bin", "pgpassword": "x",
                                       "OTHER": "https://b:c@d/x", "URL": "https://d/x"})
    assert "s3cret" not in repr(inherited)
    assert inherited == {"PATH": "/bin", "DATABASE_URL": "postgresql://me@db/bench",
                         "OTHER": "https://b@d/x", "URL": "https://d/x"}


def _dumped(path: Path) -> str:
    assert path.is_file(), "the launcher did not run"
    return path.read_text()


def test_16_a_local_run_and_predict_inherit_no_credentials(dlbs_cli, tmp_path):
    dump = tmp_path / "env.txt"
    launcher = f"runtime.launcher=sh -c 'env > {dump}; exec \"$@\"' launcher"
    run = dlbs_cli("run", *DUMMY, "-P", launcher, "-P", "runtime.env.KEPT=yes", cwd=tmp_path,
                   env=SECRETS)
    assert run.returncode == 0, run.stderr
    seen = _dumped(dump)
    assert "KEPT=yes" in seen
    assert "s3cret" not in seen and "PGPASSWORD" not in seen
    assert "DATABASE_URL=postgresql://me@db/bench" in seen
    dump.unlink()
    (tmp_path / "a.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR" + b"\x00" * 13)
    predict = dlbs_cli("predict", "--framework", "dummy", "--model", "m", "-P", launcher,
                       "a.png", cwd=tmp_path, env=SECRETS)
    assert predict.returncode in (0, 1), predict.stderr
    assert "s3cret" not in _dumped(dump)


def test_16_docker_e_name_passes_no_credential(monkeypatch):
    from dlbs.recipes.docker_args import translate

    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("HOST_VALUE", "kept")
    args = translate(["-e", "PGPASSWORD", "-e", "HOST_VALUE", "-e", "DATABASE_URL",
                      "-e", "EXPLICIT=given"])
    assert args.kwargs["environment"] == {"HOST_VALUE": "kept", "EXPLICIT": "given",
                                          "DATABASE_URL": "postgresql://me@db/bench"}


def test_16_sbatch_is_given_no_credentials(monkeypatch):
    from dlbs.run.targets import slurm

    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    done = slurm._run(["env"])   # what sbatch, and so the job, would inherit
    assert done.returncode == 0
    assert "s3cret" not in done.stdout and "PATH=" in done.stdout


# -- 4: a URL scheme in another case; a URL of no supported store ------------------------------
SECRET = "Hunter2-s3cret"


def _all_text(folder: Path) -> str:
    """Every file under `folder` and every name in it, as one text (what a leak would be in)."""
    parts = []
    for path in folder.rglob("*"):
        parts.append(str(path))
        if path.is_file():
            parts.append(path.read_bytes().decode("utf-8", "replace"))
    return "\n".join(parts)


@pytest.mark.parametrize("scheme", ["postgresql", "Postgresql", "POSTGRESQL", "PostGres"])
def test_4_schemes_are_case_insensitive(scheme):
    from dlbs.results.store import is_store_url, store_name
    from dlbs.util.credentials import canonical_url, masked, without_password

    url = f"{scheme}://bench:{SECRET}@db.example.org:5432/results"
    assert is_store_url(url)
    assert SECRET not in store_name(url) and store_name(url).startswith("postgresql://bench@")
    assert without_password(url) == f"{scheme}://bench@db.example.org:5432/results"
    assert canonical_url(url).startswith(scheme.lower() + "://")
    assert SECRET not in repr(masked({"runtime.results_db": url, "x": [f"see {url}"]}))


@pytest.mark.postgres
@pytest.mark.parametrize("scheme", ["Postgresql", "POSTGRESQL", "Postgres"])
def test_4_a_run_with_a_scheme_in_another_case_reaches_postgresql(dlbs_cli, tmp_path, scheme):
    from helpers_results import postgres_store_url

    from dlbs.results.store import open_store

    with postgres_store_url() as url:
        shouted = scheme + url[url.index("://"):]
        plan = dlbs_cli("plan", *DUMMY, "-P", f"runtime.results_db={shouted}", cwd=tmp_path)
        assert plan.returncode == 0, plan.stderr
        password = url.split("://", 1)[1].split("@", 1)[0].partition(":")[2]
        assert password and password not in plan.stdout + plan.stderr
        run = dlbs_cli("run", *DUMMY, "-P", f"runtime.results_db={shouted}", cwd=tmp_path)
        assert run.returncode == 0, run.stderr
        with open_store(url) as store:
            (attempt,) = store.attempts()
        assert attempt.status == "ok"
        assert password not in repr(attempt) and password not in run.stdout + run.stderr
        assert password not in _all_text(tmp_path)
        assert sorted(path.name for path in tmp_path.iterdir()) == ["logs"]  # no "Postgresql:"


@pytest.mark.parametrize("location", [
    f"mysql://u:{SECRET}@db/results", f"postgresq://u:{SECRET}@db/results",
    f"sqlite://u:{SECRET}@/results.db", f"HTTP://u:{SECRET}@db/x",
    f"pg://db/results?password={SECRET}", "mongodb://db/results",
])
def test_4_a_url_of_no_supported_store_is_refused_masked(dlbs_cli, tmp_path, location):
    plan = dlbs_cli("plan", *DUMMY, "-P", f"runtime.results_db={location}", cwd=tmp_path)
    assert_one_error_line(plan, "is a URL of no results store dlbs opens")
    run = dlbs_cli("run", *DUMMY, "-P", f"runtime.results_db={location}", cwd=tmp_path)
    assert_one_error_line(run, "is a URL of no results store dlbs opens")
    assert SECRET not in plan.stdout + plan.stderr + run.stdout + run.stderr
    assert list(tmp_path.iterdir()) == []   # no folder named after it, no log


@pytest.mark.parametrize("command", [
    ["report", "{url}"], ["parse", "{url}"], ["history", "{url}"], ["serve", "{url}"],
    ["trace", "{url}", "--id", "x"], ["results", "copy", "{url}", "{tmp}/a.db"],
    ["results", "copy", "{tmp}", "{url}"], ["compare", "{url}", "{url}"],
])
def test_4_readers_refuse_a_url_of_no_supported_store_masked(tmp_path, capsys, command):
    from dlbs.cli.main import main

    url = f"MySQL://u:{SECRET}@db/results"
    assert main([part.format(url=url, tmp=tmp_path) for part in command]) == 2
    captured = capsys.readouterr()
    assert "is a URL of no results store dlbs opens" in captured.err, captured.err
    assert SECRET not in captured.out + captured.err and "MySQL://u@db/results" in captured.err
    assert not (tmp_path / "a.db").exists()
