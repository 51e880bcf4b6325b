"""The one base class of the user's mistakes, so that the entry point can tell them apart."""

from __future__ import annotations


class UserError(ValueError):
    """Bad input, not a broken run: a flag, a model id, a dataset, this machine's devices.

    Reported as ``results.status="failure"`` with this message, one ``benchmarks.py: error:``
    line on stderr and exit status 2, without a traceback: the message says all there is.
    Anything else that escapes (a framework error, out of memory) keeps its traceback.
    """

    exit_status = 2
