"""Where `dlbs run` writes (issue 14: defects 3, 6, 12 and 19, their run-time part).

Logs only as regular files of its own, a database one run at a time, and a log that cannot
be written recorded as the attempt's failure.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from dlbs.cli.run import LineReporter
from dlbs.errors import ResultsError
from dlbs.plan.plan_file import read_plan
from dlbs.run.loop import Sweep
from tests.run.conftest import attempts, gated, open_attempts, wait_until

DUMMY = ["-P", "exp.framework=dummy", "-P", "exp.num_batches=2", "-P", "exp.num_warmup_batches=0",
         "-P", "dummy.sleep=0"]


def _one_error_line(stderr: str) -> str:
    """The `dlbs: error:` line of a refusal, checking there is one and no traceback."""
    assert "Traceback" not in stderr, stderr
    errors = [line for line in stderr.splitlines() if line.startswith("dlbs: error:")]
    assert len(errors) == 1, stderr
    return errors[0]


# -- defect 3: one database, two log folders -------------------------------------------------

def test_two_runs_with_other_log_folders_never_share_a_database(run_dlbs, tmp_path):
    shared = tmp_path / "shared.db"
    release = tmp_path / "release"
    first = subprocess.Popen(
        [sys.executable, "-m", "dlbs.cli.main", "run", *DUMMY, *gated(release),
         "-P", "exp.log_dir=logs_a", "-P", f"runtime.results_db={shared}"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: open_attempts(shared) == 1, "the first run never opened its attempt")
        second = run_dlbs("run", *DUMMY, "-P", "exp.model=other", "-P", "exp.log_dir=logs_b",
                          "-P", f"runtime.results_db={shared}")
        assert second.returncode == 2, second.stderr
        line = _one_error_line(second.stderr)
        assert line == (f"dlbs: error: another dlbs run is using results database {shared} "
                        f"(pid {first.pid})")
        assert open_attempts(shared) == 1  # the first run's live attempt is left alone
    finally:
        release.touch()
        _, err = first.communicate(timeout=120)
    assert first.returncode == 0, err
    assert [row[2] for row in attempts(shared)] == ["ok"]


# -- defects 12 and 19: a log is only ever a regular file of its own --------------------------

def test_a_device_as_the_log_file_is_refused_before_anything_runs(run_dlbs, tmp_path):
    beside = Path("/dev/null.attempt2.log")
    assert not beside.exists(), "left over from an earlier run: remove /dev/null.attempt2.log"
    try:
        result = run_dlbs("run", *DUMMY, "-P", "exp.log_file=/dev/null")
        assert result.returncode == 2, result.stderr
        line = _one_error_line(result.stderr)
        assert "exp.log_file /dev/null of experiment" in line
        assert line.endswith("is a character device, not a regular file")
        assert not beside.exists()
    finally:
        if beside.exists():
            beside.unlink()
    assert Path("/dev/null").is_char_device()


def test_a_fifo_or_a_symlink_as_the_log_file_is_refused_and_never_written(run_dlbs, tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    (logs / "linked.log").symlink_to(victim)
    os.mkfifo(logs / "fifo.log")
    for name, kind in (("linked.log", "a symbolic link"), ("fifo.log", "a FIFO")):
        result = run_dlbs("run", *DUMMY, "-P", f"exp.log_file=logs/{name}", timeout=120)
        assert result.returncode == 2, result.stderr
        assert _one_error_line(result.stderr).endswith(f"is {kind}, not a regular file")
    assert victim.read_text() == "precious\n"
    assert sorted(p.name for p in logs.iterdir() if p.suffix == ".log") == ["fifo.log",
                                                                             "linked.log"]


def test_a_link_where_a_retry_would_write_is_passed_over(run_dlbs, tmp_path):
    spec = [*DUMMY, "-P", "exp.log_file=logs/mine.log", "-P", "exp.rerun=always"]
    assert run_dlbs("run", *spec).returncode == 0
    not_to_be_created = tmp_path / "created-through-a-link"
    (tmp_path / "logs" / "mine.attempt2.log").symlink_to(not_to_be_created)
    result = run_dlbs("run", *spec)
    assert result.returncode == 0, result.stderr
    assert not not_to_be_created.exists()
    assert (tmp_path / "logs" / "mine.attempt2.log").is_symlink()
    rows = attempts(tmp_path / "logs" / "results.db")
    assert [row[1:3] for row in rows] == [(1, "ok"), (2, "ok")]
    assert "results.status" in (tmp_path / "logs" / "mine.attempt3.log").read_text()


# -- defect 6: a log that cannot be a log, or cannot be written ------------------------------

def test_a_log_under_an_existing_file_is_refused_before_anything_runs(run_dlbs, tmp_path):
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "afile").write_text("")
    result = run_dlbs("run", *DUMMY, "-V", 'exp.model=["a", "b"]',
                      "-E", '{"condition": {"exp.model": "a"}, '
                            '"parameters": {"exp.log_file": "logs/afile/a.log"}}')
    assert result.returncode == 2, result.stderr
    line = _one_error_line(result.stderr)
    assert line.startswith("dlbs: error: exp.log_file logs/afile/a.log of experiment ")
    assert line.endswith(" is under logs/afile, which is not a folder")
    assert not (tmp_path / "logs" / "results.db").exists() or \
        attempts(tmp_path / "logs" / "results.db") == []


@pytest.fixture
def full_disk(tmp_path: Path):
    """A folder on a 64 KiB tmpfs filled to the last byte: a real full disk."""
    folder = tmp_path / "full"
    folder.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(folder)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.fail(f"cannot mount a tmpfs (the tests run as root): {mounted.stderr.strip()}",
                    pytrace=False)
    try:
        filler = os.open(folder / "filler", os.O_WRONLY | os.O_CREAT)
        try:
            while os.write(filler, b"\0" * 4096):
                pass
        except OSError:
            pass  # full
        finally:
            os.close(filler)
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=True)


def test_a_full_disk_while_writing_a_log_header_is_a_recorded_failure(run_dlbs, tmp_path,
                                                                      full_disk):
    database = tmp_path / "results.db"
    result = run_dlbs("run", *DUMMY, "-P", f"exp.log_dir={full_disk}",
                      "-P", f"runtime.results_db={database}", "-V", 'exp.model=["a", "b"]')
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    rows = attempts(database)
    assert [row[2] for row in rows] == ["failure", "failure"]
    for row in rows:
        assert row[3].startswith("could not start: cannot write its log ")
        assert row[3].endswith(": No space left on device")


def _plan(run_dlbs, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *args: str
          ) -> list[dict]:
    """The plan of a spec, to run in-process from `tmp_path` (its paths are relative)."""
    planned = run_dlbs("plan", *DUMMY, *args, "-o", "plan.json")
    assert planned.returncode == 0, planned.stderr
    monkeypatch.chdir(tmp_path)
    return read_plan(str(tmp_path / "plan.json"))


def test_a_file_name_too_long_is_refused_before_anything_runs(run_dlbs, tmp_path,
                                                              monkeypatch):
    """In-process, with a plan that skipped the planner's checks (which refuse such names).

    A file system with shorter names than the planner allows fails the same way.
    """
    experiments = _plan(run_dlbs, tmp_path, monkeypatch, "-V", 'exp.model=["a", "b"]')
    experiments[1]["exp.log_file"] = "logs/" + "x" * 300 + ".log"
    with pytest.raises(ResultsError, match=r"x\.log of experiment \w+ cannot be a log: "
                                           "File name too long$"):
        Sweep(experiments, LineReporter()).run()
    assert attempts(tmp_path / "logs" / "results.db") == []
    assert not list((tmp_path / "logs").glob("*.log"))


def test_a_log_that_cannot_be_created_at_its_turn_is_a_recorded_failure(run_dlbs, tmp_path,
                                                                        monkeypatch):
    """What the checks before the sweep cannot see fails that experiment alone, with why.

    A file put in the way meanwhile here; a full disk, in the test above.
    """
    experiments = _plan(run_dlbs, tmp_path, monkeypatch, "-V", 'exp.model=["a", "b"]')
    blocker = Path("logs", "later")
    experiments[1]["exp.log_file"] = str(blocker / "b.log")

    class PutAFileInTheWay(LineReporter):
        def finished(self, *args, **kwargs):
            super().finished(*args, **kwargs)
            blocker.write_text("")  # after the first experiment, before the second

    summary = Sweep(experiments, PutAFileInTheWay()).run()
    assert summary.counts == {"failure": 1, "ok": 1} and summary.exit_status == 1
    (failure,) = summary.failures
    assert failure[2] == (f"could not start: cannot write its log {blocker / 'b.log'}: "
                          f"it is under {blocker}, which is not a folder")
    rows = attempts(tmp_path / "logs" / "results.db")
    assert [row[2:] for row in rows[1:]] == [("failure", failure[2])]
