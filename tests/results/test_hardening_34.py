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
