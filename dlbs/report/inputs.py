"""What reports, charts and comparisons read: their inputs, a folder through its database.

A log folder that `dlbs run` wrote holds `results.db` beside the logs (`runtime.results_db`):
every attempt with the environment it ran in (host, GPU and CPU models, driver), which logs
do not carry. So a folder given to `dlbs report`, `plot` or `compare` is read through the
`results.db` of each of its folders that has one, and only the logs no database knows (a log
copied in from elsewhere) are parsed; a folder without one is read from its logs. The rule
is the results layer's (`dlbs.results.sources.folder_inputs`), which `dlbs parse` and
`dlbs results copy` read folders by too.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from dlbs.results.columns import Attempts
from dlbs.results.sources import load_attempts


def load_inputs(paths: Sequence[str | os.PathLike[str]], *,
                latest_only: bool = False) -> Attempts:
    """The attempts of `paths` (results.sources.load_attempts), folders as the module says."""
    return load_attempts(paths, latest_only=latest_only)
