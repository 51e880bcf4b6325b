"""Parameters a spec sets that nothing reads: typos, and DLBS settings that dlbs does not have.

A name in one of dlbs's namespaces (`exp.`, `runtime.`, `monitor.`, `slurm.` and each
framework's) means something only if the configs declare it or a template of the merged spec
references it. Anything else a spec sets there (`pytorch.num_thread`, DLBS's
`mxnet.workspace`) would be recorded with the experiment and change nothing, so `dlbs plan`
and `dlbs validate` warn about it. Names outside those namespaces are the user's own helper
variables (`global_batch`) and are never reported. See docs/from-dlbs.md.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from dlbs.config.loader import default_config_dir
from dlbs.config.spec import Spec
from dlbs.plan.graph import matching, references
from dlbs.util.booleans import parse_bool

# Namespaces of the engine itself; each framework in exp.framework's choices adds its own.
ENGINE_NAMESPACES = ("exp", "runtime", "monitor", "slurm")
# Read by prefix: every `runtime.env.NAME` is an environment variable of the experiment.
READ_BY_PREFIX = ("runtime.env.",)
FRAMEWORK = "exp.framework"
DOCKER = "exp.docker"
DOCKER_IMAGE = "exp.docker_image"

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
    """Warnings: names set in a checked namespace that nothing declares or reads, images unused.

    An image is unused when the spec names it and no experiment runs in a container.
    """
    return _unread_names(spec) + _unused_images(spec)


def _unread_names(spec: Spec) -> list[str]:
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


def _unused_images(spec: Spec) -> list[str]:
    """An image the spec names while no experiment runs in a container (DLBS's recipes).

    DLBS ran containers by default (`exp.docker: true`); here bare metal is the default, so a
    DLBS spec that names its image and relies on that default would run without it, silently.
    """
    docker = spec.params.get(DOCKER)
    if docker is None or docker.type is None or _may_be_true(docker.value) or any(
            _may_be_true(value) for _, value in _set_values(spec, DOCKER)):
        return []
    defaults = default_config_dir().resolve()
    framework = spec.params.get(FRAMEWORK)
    names = [DOCKER_IMAGE, *(f"{choice}.docker_image" for choice in
                             (framework.choices or [] if framework is not None else []))]
    warnings = []
    for name in names:
        definition = spec.params.get(name)
        sources = [source for source, _ in _set_values(spec, name)]
        if definition is not None and Path(definition.source).parent.resolve() != defaults:
            sources.insert(0, definition.source)
        if sources:
            warnings.append(f"{sources[0]}: {name} names an image, but exp.docker is false in "
                            f"every experiment: they run on bare metal and the image is unused "
                            f"(DLBS ran containers by default; set exp.docker: true to run in "
                            f"it)")
    return warnings


def _may_be_true(value: Any) -> bool:
    """Whether a switch's value may turn out true (a template may: it is not resolved here)."""
    if isinstance(value, str):
        return parse_bool(value) is not False
    return value is not False


def _set_values(spec: Spec, name: str) -> Iterator[tuple[str, Any]]:
    """(source, value) of every axis item and extension that sets `name`."""
    axis = spec.axes.get(name)
    if axis is not None:
        for item in axis.items:
            yield axis.source, item
    for other in spec.axes.values():
        if other.zipped:
            for item in other.items:
                if isinstance(item, dict) and name in item:
                    yield other.source, item[name]
    for extension in spec.extensions:
        for values in (extension.parameters, *extension.cases):
            if name in values:
                yield extension.source, values[name]


def _closest(name: str, declared: set[str]) -> str | None:
    """'did you mean' the declared name of the same namespace that is spelt most alike."""
    namespace, _, rest = name.partition(".")
    same = {n.partition(".")[2]: n for n in declared if n.startswith(namespace + ".")}
    import difflib  # here: only a name that is not used needs it

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
