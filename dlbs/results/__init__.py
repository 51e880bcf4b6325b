"""Results: the log protocol parser, the results store, the run lock, run metadata.

protocol.py reads `__key__=json` logs; store.py keeps attempts in SQLite; lock.py keeps two
runs out of one log folder; environment.py records where a result was measured;
sources.py gathers experiments from logs, folders, databases and parse output; output.py
writes them out.
"""

from dlbs.results.protocol import (
    STATUSES,
    ParsedLog,
    ProtocolParser,
    experiment_from_log,
    judge_status,
    parse_lines,
    parse_log,
    protocol_line,
)

__all__ = [
    "STATUSES",
    "ParsedLog",
    "ProtocolParser",
    "experiment_from_log",
    "judge_status",
    "parse_lines",
    "parse_log",
    "protocol_line",
]
