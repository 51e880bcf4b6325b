"""The project's exception hierarchy.

Only `dlbs.cli.main.main` catches these; it prints `dlbs: error: <message>` and, when
present, one `hint: <hint>` line, then exits with status 2.
"""

from __future__ import annotations


class DlbsError(Exception):
    """An error caused by the user's input or environment, reported in one line."""

    exit_status = 2

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message


class ConfigError(DlbsError):
    """A malformed spec: syntax, unknown keys, bad types, failed references or expressions."""


class PlanError(DlbsError):
    """A spec that loads but whose plan is invalid (collisions, empty plan, ...)."""


class LaunchError(DlbsError):
    """An experiment (or the sweep) could not be started: missing image, daemon, binary."""


class ResultsError(DlbsError):
    """Logs or a results database that cannot be read or written."""


class OutputError(DlbsError):
    """A file dlbs was asked to write (`-o FILE`, a job script) cannot be written."""
