"""Running experiments: the run loop and the execution targets behind one small interface.

A target (`dlbs.run.targets`: local process, Docker Engine, SLURM) runs an experiment's
`Invocation` (built by `dlbs.recipes`) and returns an `Outcome` (`dlbs.run.outcome`). Importing
this package loads neither the Docker SDK nor Jinja2: a target's dependencies load when the
target is first asked for.
"""

from dlbs.run.outcome import Outcome

__all__ = ["Outcome"]
