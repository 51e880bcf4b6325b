"""The inputs and GPUs a plan needs from this host, checked before anything runs.

`dlbs validate` lists what is missing (problems) and what could not be checked (notes);
`dlbs run` fails each such experiment before it starts (dlbs/run/loop.py). The comparison is
dlbs/recipes/resources.py; this module asks the host, once: nvidia-smi for its GPUs.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from dlbs.monitor.gpu import GpuQueryError, list_gpus
from dlbs.recipes.resources import HostGpus, Missing, elsewhere, missing_resources


def host_gpus() -> HostGpus:
    """The GPUs of this host as nvidia-smi lists them (unknown when it gives no answer)."""
    try:
        return HostGpus.listed(list_gpus())
    except GpuQueryError as error:
        return HostGpus.unknown(f"nvidia-smi gives no answer: {error}")


class HostCheck:
    """Checks experiments against this host as they stream by; nvidia-smi runs at most once."""

    def __init__(self, gpus: HostGpus | None = None) -> None:
        self._gpus = gpus
        #: One line per experiment and missing thing: "experiment #3: exp.weights ...".
        self.problems: list[str] = []
        self._elsewhere: Counter[str] = Counter()
        self._unknown_gpus = 0

    @property
    def gpus(self) -> HostGpus:
        if self._gpus is None:
            self._gpus = host_gpus()
        return self._gpus

    def missing(self, experiment: Mapping[str, Any]) -> list[Missing]:
        """What one experiment lacks here ([] when it runs elsewhere)."""
        if elsewhere(experiment) is not None:
            return []
        wants_gpus = bool(experiment.get("exp.gpus"))
        return missing_resources(experiment, self.gpus if wants_gpus else HostGpus.listed([]))

    def watch(self, experiments: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        """Yield `experiments` unchanged, checking each on the way (counted from 1)."""
        for index, experiment in enumerate(experiments, start=1):
            place = elsewhere(experiment)
            if place is not None:
                self._elsewhere[place] += 1
            else:
                self.problems += [f"experiment #{index}: {m}" for m in self.missing(experiment)]
                if experiment.get("exp.gpus") and self.gpus.ids is None:
                    self._unknown_gpus += 1
            yield experiment

    def notes(self) -> list[str]:
        """What was not checked, and why."""
        notes = [f"{_count(count)} {'runs' if count == 1 else 'run'} {place}: not checked "
                 f"here (paths and GPUs)" for place, count in self._elsewhere.items()]
        if self._unknown_gpus:
            notes.append(f"the GPUs of {_count(self._unknown_gpus)} were not checked: "
                         f"{self.gpus.source}")
        return notes


def _count(experiments: int) -> str:
    return f"{experiments} experiment{'s' if experiments != 1 else ''}"
