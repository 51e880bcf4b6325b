"""Results: the log protocol parser, the statistics engine, the results store.

protocol.py reads `__key__=json` logs; stats.py computes every batch-time statistic from the
per-batch times and usage.py the resource monitor's summaries, which summary.py combines;
store.py keeps attempts in SQLite (schema.py: its layout, migrations.py: upgrades; view_codes.py:
parameters as a base and differences); sources.py gathers experiments from logs, folders,
databases and parse output; output.py writes them out.
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
