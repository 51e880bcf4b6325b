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
                                       "OTHER": "a://b:c@d"})
    assert "s3cret" not in repr(inherited)
    assert inherited == {"PATH": "/bin", "DATABASE_URL": "postgresql://me@db/bench",
                         "OTHER": "a://b:c@d"}


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
