"""The run lock of a log folder, and the environment recorded with results."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dlbs.errors import ResultsError
from dlbs.results.store import open_store
from dlbs.run.environment import collect_environment
from dlbs.run.lock import LOCK_FILE_NAME, RunLock

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "results" / "data"


def test_second_holder_is_refused_with_the_pid(tmp_path: Path) -> None:
    log_dir = tmp_path / "logs"
    with RunLock(log_dir) as first:
        assert first.held
        assert (log_dir / LOCK_FILE_NAME).read_text().strip() == str(os.getpid())
        second = RunLock(log_dir)
        with pytest.raises(ResultsError) as error:
            second.acquire()
        assert str(error.value) == f"another dlbs run is using {log_dir} (pid {os.getpid()})"
        assert error.value.hint and "exp.log_dir" in error.value.hint
        assert not second.held
    # Released: the next run gets it.
    with RunLock(log_dir) as again:
        assert again.held


def test_lock_of_another_process_and_its_release_by_kill_9(tmp_path: Path) -> None:
    log_dir = tmp_path / "logs"
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, time; from dlbs.run.lock import RunLock; "
         "lock = RunLock(sys.argv[1]); lock.acquire(); print('held', flush=True); "
         "time.sleep(600)", str(log_dir)],
        stdout=subprocess.PIPE, text=True, env=dict(os.environ, PYTHONPATH=str(REPO)),
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(ResultsError, match=rf"\(pid {holder.pid}\)$"):
            RunLock(log_dir).acquire()
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=30)
        # The kernel dropped the flock with the process: no stale lock.
        with RunLock(log_dir) as lock:
            assert lock.held
    finally:
        holder.kill()
        holder.wait(timeout=30)
        if holder.stdout:
            holder.stdout.close()


def test_unwritable_lock_place_is_a_results_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(ResultsError, match="cannot create the run lock"):
        RunLock(blocker / "logs").acquire()


def test_environment_has_the_basics() -> None:
    environment = collect_environment(extra={"framework_version": "2.14.1"})
    for key in ("date", "host", "os", "python", "dlbs_version", "cpu_count"):
        assert environment[key], key
    assert environment["framework_version"] == "2.14.1"


def _fake_nvidia_smi(folder: Path, body: str) -> None:
    script = folder / "nvidia-smi"
    script.write_text("#!/bin/sh\n" + body)
    script.chmod(0o755)


def test_gpus_from_nvidia_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    canned = DATA / "nvidia-smi"
    _fake_nvidia_smi(tmp_path, f"""
case "$1" in
  --query-gpu=*) cat '{canned / "query-gpu.csv"}' ;;
  *) cat '{canned / "plain.txt"}' ;;
esac
""")
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    environment = collect_environment()
    assert environment["gpu_model"] == "NVIDIA H100 80GB HBM3"
    assert environment["gpu_count"] == 2
    assert environment["gpu_driver"] == "550.54.15"
    assert environment["cuda_driver_version"] == "12.4"
    assert environment["gpus"][1] == {"name": "NVIDIA H100 80GB HBM3", "memory_mib": 81559}


@pytest.mark.parametrize("body", [
    "echo 'NVIDIA-SMI has failed because it could not communicate with the driver' >&2\nexit 9\n",
    "echo 'garbage without commas'\n",
    "exit 0\n",
])
def test_broken_nvidia_smi_never_raises(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        body: str) -> None:
    _fake_nvidia_smi(tmp_path, body)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    environment = collect_environment()
    assert "gpus" not in environment and environment["host"]


def test_hanging_nvidia_smi_times_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_nvidia_smi(tmp_path, "exec sleep 30\n")
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    began = time.monotonic()
    environment = collect_environment(nvidia_smi_timeout=0.5)
    assert time.monotonic() - began < 10
    assert "gpus" not in environment and environment["python"]


# -- the lock file is only ever a regular file of its own (issue 14, defect 19) -----------

def _victim(tmp_path: Path) -> Path:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    return victim


def test_a_symlink_in_the_locks_place_is_refused_and_its_target_untouched(tmp_path):
    log_dir = tmp_path / "logs"
    log_dir.mkdir()
    victim = _victim(tmp_path)
    (log_dir / LOCK_FILE_NAME).symlink_to(victim)
    with pytest.raises(ResultsError, match="a symbolic link is in its place") as error:
        RunLock(log_dir).acquire()
    assert error.value.hint and "only ever a regular file" in error.value.hint
    assert victim.read_text() == "precious\n"
    dangling = tmp_path / "other"
    dangling.mkdir()
    (dangling / LOCK_FILE_NAME).symlink_to(tmp_path / "created-through-the-link")
    with pytest.raises(ResultsError, match="symbolic link"):
        RunLock(dangling).acquire()
    assert not (tmp_path / "created-through-the-link").exists()


def test_a_hard_link_in_the_locks_place_is_refused_and_left_as_it_was(tmp_path):
    log_dir = tmp_path / "logs"
    log_dir.mkdir()
    victim = _victim(tmp_path)
    os.link(victim, log_dir / LOCK_FILE_NAME)
    with pytest.raises(ResultsError, match="a file with other hard links is in its place"):
        RunLock(log_dir).acquire()
    assert victim.read_text() == "precious\n"


@pytest.mark.parametrize("kind", ["fifo", "folder"])
def test_a_fifo_or_a_folder_in_the_locks_place_is_one_clear_error(tmp_path, kind):
    log_dir = tmp_path / "logs"
    log_dir.mkdir()
    if kind == "fifo":
        os.mkfifo(log_dir / LOCK_FILE_NAME)
    else:
        (log_dir / LOCK_FILE_NAME).mkdir()
    with pytest.raises(ResultsError, match=f"a {'FIFO' if kind == 'fifo' else 'folder'} is "
                                           "in its place"):
        RunLock(log_dir).acquire()


# -- the database is locked too (issue 14, defect 3) ---------------------------------------

def test_a_database_lock_refuses_a_second_holder_naming_the_database(tmp_path):
    # An SQLite store's run lock is a file beside it (ResultsStore.claim).
    database = tmp_path / "shared" / "results.db"
    with open_store(database) as store, open_store(database) as again:
        lock = store.lock("here", str(tmp_path))
        with lock as first:
            assert first.held and first.path == str(tmp_path / "shared" /
                                                     ".results.db.dlbs-run.lock")
            with pytest.raises(ResultsError) as error:
                again.lock("here", str(tmp_path)).acquire()
            assert str(error.value) == (f"another dlbs run is using results database "
                                        f"{database} (pid {os.getpid()})")
            assert "runtime.results_db" in (error.value.hint or "")
            # Another database in the same folder is another lock.
            with open_store(tmp_path / "shared" / "other.db") as other, \
                    other.lock("here", str(tmp_path)) as held:
                assert held.held
