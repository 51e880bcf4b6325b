"""Results: the log protocol parser, the statistics engine, the results store.

protocol.py reads `__key__=json` logs; stats.py computes every batch-time statistic from the
per-batch times and usage.py the resource monitor's summaries, which summary.py combines.
store.py is the results store's protocol and `open_store(location)`: an SQLite file
(sqlite_store.py) or a PostgreSQL database (postgres_store.py), sharing their statements
(store_writes.py, store_reads.py over sql_session.py) and layout (schema.py,
postgres_schema.py; migrations.py upgrades; view_codes.py: parameters as a base and
differences; row_shape.py: every row a reader takes is checked there first); copying.py
moves attempts between stores and log folders; sources.py gathers experiments from logs,
folders, stores and parse output; stored_columns.py reads a store as columns for reports;
output.py writes experiments out.
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
