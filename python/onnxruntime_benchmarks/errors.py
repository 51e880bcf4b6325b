"""The one base class of the user's mistakes, so that the entry point can tell them apart."""

from __future__ import annotations


class UserError(ValueError):
    """Bad input, not a broken run: a flag, a model id, a model file, a missing provider.

    Reported as ``results.status="failure"`` with this message, one ``benchmarks.py: error:``
    line on stderr and exit status 2, without a traceback (docs/backends/protocol.md
    section 5). Anything else that escapes keeps its traceback and exits with 1.
    """

    exit_status = 2
