"""Parameters a spec sets that nothing reads: typos, and DLBS settings that dlbs does not have.

A name in one of dlbs's namespaces (`exp.`, `runtime.`, `monitor.`, `slurm.` and each
framework's) means something only if the configs declare it or a template of the merged spec
references it. Anything else a spec sets there (`pytorch.num_thread`, DLBS's
`mxnet.workspace`) would be recorded with the experiment and change nothing, so `dlbs plan`
and `dlbs validate` warn about it. Names outside those namespaces are the user's own helper
variables (`global_batch`) and are never reported. See docs/from-dlbs.md.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator
from typing import Any

from dlbs.config.spec import Spec
from dlbs.plan.graph import matching, references

# Namespaces of the engine itself; each framework in exp.framework's choices adds its own.
ENGINE_NAMESPACES = ("exp", "runtime", "monitor", "slurm")
# Read by prefix: every `runtime.env.NAME` is an environment variable of the experiment.
READ_BY_PREFIX = ("runtime.env.",)
FRAMEWORK = "exp.framework"

# DLBS parameters with no counterpart here, and what to do instead.
_RECIPE = "DLBS's launcher scripts are recipes here (launchers/<framework>.py)"
_NGC = "the MXNet backend has no such option (NGC's MXNet had it)"
_PS = "dist_* kvstores start their own scheduler and servers (mxnet.num_servers)"
_MONITOR = "the resource monitor is built in (monitor.frequency)"
DLBS_ONLY = {
    "pytorch.launcher": _RECIPE,
    "mxnet.launcher": _RECIPE,
    "pytorch.host_python_path": "set runtime.env.PYTHONPATH instead",
    "mxnet.host_python_path": "set runtime.env.PYTHONPATH instead",
    "pytorch.host_libpath": "set runtime.env.LD_LIBRARY_PATH instead",
    "mxnet.host_libpath": "set runtime.env.LD_LIBRARY_PATH instead",
    "mxnet.workspace": "the MXNet backend leaves cuDNN's workspace limit to MXNet",
    "mxnet.input_layout": _NGC,
    "mxnet.model_layout": _NGC,
    "mxnet.nvidia_layers": _NGC,
    "mxnet.use_dali": "the MXNet backend reads RecordIO with ImageRecordIter, not DALI",
    "mxnet.rendezvous": _PS,
    "mxnet.scheduler": _PS,
    "monitor.pid_folder": _MONITOR,
    "monitor.timeseries": _MONITOR,
    "monitor.launcher": _MONITOR,
}


def unused_parameters(spec: Spec) -> list[str]:
    """One warning per name the spec sets in a checked namespace that nothing declares or reads."""
    declared = {name for name, definition in spec.params.items() if definition.type is not None}
    namespaces = _checked_namespaces(spec, declared)
    if not namespaces:
        return []  # nothing is declared (--no-defaults): nothing to compare with
    candidates: dict[str, str] = {}
    for name, source in _set_names(spec):
        if name in declared or name.partition(".")[0] not in namespaces or \
                name.startswith(READ_BY_PREFIX):
            continue
        candidates.setdefault(name, source)
    if not candidates:
        return []
    used, patterns = _referenced(spec)
    used |= matching(patterns, candidates)
    warnings = []
    for name, source in candidates.items():
        if name in used:
            continue
        hint = DLBS_ONLY.get(name) or _closest(name, declared)
        warnings.append(f"{source}: parameter {name!r} is neither declared nor used by any "
                        f"template: it is only recorded with the experiment"
                        + (f"; {hint}" if hint else ""))
    return warnings


def _closest(name: str, declared: set[str]) -> str | None:
    """'did you mean' the declared name of the same namespace that is spelt most alike."""
    namespace, _, rest = name.partition(".")
    same = {n.partition(".")[2]: n for n in declared if n.startswith(namespace + ".")}
    close = difflib.get_close_matches(rest, list(same), n=1, cutoff=0.75)
    return f"did you mean {same[close[0]]!r}?" if close else None


def _checked_namespaces(spec: Spec, declared: set[str]) -> frozenset[str]:
    """The engine's and the frameworks' namespaces, where the configs declare anything."""
    framework = spec.params.get(FRAMEWORK)
    frameworks = [str(c) for c in framework.choices or []] if framework is not None else []
    wanted = {*ENGINE_NAMESPACES, *frameworks}
    return frozenset(name.partition(".")[0] for name in declared) & wanted


def _set_names(spec: Spec) -> Iterator[tuple[str, str]]:
    """Every name the spec gives a value, with where: parameters, axes, extensions."""
    for name, definition in spec.params.items():
        yield name, definition.source
    for axis in spec.axes.values():
        yield axis.name, axis.source
        if axis.zipped:
            for item in axis.items:
                for key in item:
                    yield str(key), axis.source
    for extension in spec.extensions:
        for values in (extension.parameters, *extension.cases):
            for key in values:
                yield str(key), extension.source


def _referenced(spec: Spec) -> tuple[set[str], set[tuple[str, ...]]]:
    """Names that some template references or some condition tests, and computed patterns."""
    names: set[str] = set()
    patterns: set[tuple[str, ...]] = set()

    def note(raw: Any) -> None:
        found, computed = references(raw)
        names.update(found)
        patterns.update(computed)

    for definition in spec.params.values():
        note(definition.value)
    for axis in spec.axes.values():
        note(axis.items)
    for extension in spec.extensions:
        names.update(str(key) for key in extension.condition)
        note(extension.parameters)
        note(extension.cases)
    return names, patterns
