"""Experiment logs: where each attempt writes, and the header that starts it."""

from __future__ import annotations

import os
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, BinaryIO

from dlbs import __version__
from dlbs.results.protocol import protocol_line


def attempt_log_path(log_file: str, attempt: int) -> str:
    """Attempt 1 writes `exp.log_file`; a retry writes beside it, never over anything."""
    root, ext = os.path.splitext(log_file)
    candidate = log_file if attempt == 1 else f"{root}.attempt{attempt}{ext or '.log'}"
    number = attempt
    while os.path.exists(candidate):
        # A log the results store does not know (a store deleted or moved): keep it too.
        number += 1
        candidate = f"{root}.attempt{number}{ext or '.log'}"
    return candidate


def write_header(log: BinaryIO, experiment: Mapping[str, Any], attempt: int) -> None:
    """Every resolved parameter as `__name__=json`, so the log alone describes the run."""
    started = datetime.now(UTC).isoformat(timespec="seconds")
    lines = [f"# dlbs {__version__}: experiment {experiment.get('exp.id')}, attempt {attempt}, "
             f"started {started}"]
    lines += [protocol_line(key, value) for key, value in experiment.items()]
    log.write(("\n".join(lines) + "\n").encode())
    log.flush()
