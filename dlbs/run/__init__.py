"""Running experiments: the run loop and the execution targets behind one small interface.

`dlbs.run.invocation` holds what a framework recipe produces (`Invocation`, `Mount`) and what
a target returns (`Outcome`); `dlbs.run.targets` holds the registry and the targets (local
process, Docker Engine, SLURM). Importing this package loads neither the Docker SDK nor
Jinja2: a target's dependencies load when the target is first asked for.
"""

from dlbs.run.invocation import Invocation, Mount, Outcome

__all__ = ["Invocation", "Mount", "Outcome"]
