"""History: each configuration's results over run tags, and regressions against a lookback.

series.py turns a store's attempts (read as columns, as reports read them) into one series
per configuration, one point per run tag; check.py flags the newest point of each series that
lies beyond a z-score threshold of its lookback window and is worse by a minimum change
(Conbench's lookback z-score), and a configuration whose newest run failed. `dlbs history`
(dlbs/cli/history.py) and `dlbs serve` show them; docs/results.md documents both.
"""

from dlbs.history.check import Judgement, Settings, Verdict, check, judge, verdict
from dlbs.history.series import History, Series, build_history

__all__ = ["History", "Judgement", "Series", "Settings", "Verdict", "build_history", "check",
           "judge", "verdict"]
