"""Names a spec sets that dlbs does not have: slips are errors, DLBS's settings warnings.

A name in one of dlbs's own namespaces (those the default configs declare names in: `exp.`,
`runtime.`, `monitor.`, `slurm.`, `sys.` and each framework's) is a parameter of dlbs only if
a config declares it (with a `type`). Any other name set there, in a spec's parameters,
variables or extensions, by -P or -V, or tested by a condition, is a slip
(`exp.replica_bach`, `-P exp.num_batchs=5`): it would change nothing but the experiment's id,
so the spec is refused before anything runs, with the nearest declared names
(`refuse_undeclared`). Names outside those namespaces are the user's own axes and helper
variables (`global_batch`, `tensorflow.var_update`), planned as they are.

DLBS's own parameters that dlbs has no use for are declared (configs/90-from-dlbs.yaml), so
that DLBS specs plan; a spec that sets one is warned that nothing reads it, with what to do
instead (`unused_parameters`). See docs/from-dlbs.md.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from dlbs.config.loader import default_config_dir
from dlbs.config.spec import Spec
from dlbs.errors import ConfigError
from dlbs.util.booleans import parse_bool

#: Read by the planner itself rather than declared: the order of the product's axes (DLBS's).
ENGINE_READ = ("sys.plan_builder.var_order",)
# Read by prefix: every `runtime.env.NAME` is an environment variable of the experiment.
READ_BY_PREFIX = ("runtime.env.",)
FRAMEWORK = "exp.framework"
DOCKER = "exp.docker"
DOCKER_IMAGE = "exp.docker_image"

# DLBS parameters with no counterpart here (declared in configs/90-from-dlbs.yaml), and what
# to do instead.
_RECIPE = "DLBS's launcher scripts are recipes here (launchers/<framework>.py)"
_NGC = "the MXNet backend has no such option (NGC's MXNet had it)"
_PS = "dist_* kvstores start their own scheduler and servers (mxnet.num_servers)"
_MONITOR = "the resource monitor is built in (monitor.frequency)"
_STORE = "the results store keeps it (results.status_msg, env.*, exp.framework_ver)"
_ENV = "the recipes set CUDA_VISIBLE_DEVICES and CUDA_CACHE_PATH themselves"
_TORCHRUN = "torchrun gets the master from pytorch.distributed_rendezvous"
DLBS_ONLY = {
    "exp.status_msg": _STORE,
    "exp.framework_ver": _STORE,
    "exp.framework_commit": _STORE,
    "exp.cuda": _STORE,
    "exp.cudnn": _STORE,
    "exp.device_title": _STORE,
    "exp.data_store": "exp.data_dir names the data",
    "exp.node_nic": "SLURM and torchrun choose the network",
    "runtime.EXPORT_CUDA_VISIBLE_DEVICES": _ENV,
    "runtime.EXPORT_CUDA_CACHE_PATH": _ENV,
    "pytorch.launcher": _RECIPE,
    "mxnet.launcher": _RECIPE,
    "pytorch.host_python_path": "set runtime.env.PYTHONPATH instead",
    "mxnet.host_python_path": "set runtime.env.PYTHONPATH instead",
    "pytorch.host_libpath": "set runtime.env.LD_LIBRARY_PATH instead",
    "mxnet.host_libpath": "set runtime.env.LD_LIBRARY_PATH instead",
    "pytorch.__master_addr": _TORCHRUN,
    "pytorch.__master_port": _TORCHRUN,
    "mxnet.workspace": "the MXNet backend leaves cuDNN's workspace limit to MXNet",
    "mxnet.input_layout": _NGC,
    "mxnet.model_layout": _NGC,
    "mxnet.nvidia_layers": _NGC,
    "mxnet.use_dali": "the MXNet backend reads RecordIO with ImageRecordIter, not DALI",
    "mxnet.rendezvous": _PS,
    "mxnet.scheduler": _PS,
    "monitor.pid_folder": _MONITOR,
    "monitor.backend_pid_folder": _MONITOR,
    "monitor.timeseries": _MONITOR,
    "monitor.launcher": _MONITOR,
}


def refuse_undeclared(spec: Spec) -> None:
    """A `ConfigError` naming each name set or tested in dlbs's namespaces that none declares.

    One line: the first name with where it is set and its nearest declared names, then the
    others. Nothing is checked without the default configs (`--no-defaults`).
    """
    if not spec.own_namespaces:
        return
    declared = {name for name, definition in spec.params.items() if definition.type is not None}
    found: dict[str, str] = {}
    for name, source in _named(spec):
        if name in declared or name in ENGINE_READ or name.startswith(READ_BY_PREFIX) or \
                name.partition(".")[0] not in spec.own_namespaces:
            continue
        found.setdefault(name, source)
    if not found:
        return
    said = [f"{name!r}" + (f" (nearest: {close})" if (close := _closest(name, declared)) else "")
            for name in found]
    (first, source), others = next(iter(found.items())), said[1:]
    raise ConfigError(
        f"{source}: parameter {said[0]} is not declared by any config"
        + (f"; nor {', '.join(others)}" if others else ""),
        hint=f"a name in dlbs's namespaces ({', '.join(sorted(spec.own_namespaces))}) must be "
             f"declared: `dlbs help --params '^{first.partition('.')[0]}[.]'` lists them; a name "
             "of your own belongs outside them")


def unused_parameters(spec: Spec) -> list[str]:
    """Warnings: DLBS settings that the spec sets and nothing reads, images unused.

    An image is unused when the spec names it and no experiment runs in a container.
    """
    return _dlbs_settings(spec) + _unused_images(spec)


def _dlbs_settings(spec: Spec) -> list[str]:
    defaults = default_config_dir().resolve()
    return [f"{source}: parameter {name!r} is DLBS's, and nothing in dlbs reads it ({hint})"
            for name, hint in DLBS_ONLY.items()
            if (source := _first_set(spec, name, defaults)) is not None]


def _first_set(spec: Spec, name: str, defaults: Path) -> str | None:
    """Where the spec (not the default configs) first gives `name` a value; None: nowhere."""
    definition = spec.params.get(name)
    if definition is not None and Path(definition.source).parent.resolve() != defaults:
        return definition.source
    return next((source for source, _ in _set_values(spec, name)), None)


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
        source = _first_set(spec, name, defaults)
        if source is not None:
            warnings.append(f"{source}: {name} names an image, but exp.docker is false in "
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
    """The declared names spelt most alike (up to 3): of its namespace, else of any."""
    import difflib  # here: only a slip needs it

    namespace, _, rest = name.partition(".")
    same = {n.partition(".")[2]: n for n in declared if n.startswith(namespace + ".")}
    close = [same[c] for c in difflib.get_close_matches(rest, list(same), n=3, cutoff=0.6)] or \
        difflib.get_close_matches(name, sorted(declared), n=3, cutoff=0.8)
    return ", ".join(close) if close else None


def _named(spec: Spec) -> Iterator[tuple[str, str]]:
    """Every name the spec gives a value or tests, with where: parameters, axes, extensions."""
    for name, definition in spec.params.items():
        yield name, definition.source
    for axis in spec.axes.values():
        yield axis.name, axis.source
        if axis.zipped:
            for item in axis.items:
                for key in item:
                    yield str(key), axis.source
    for extension in spec.extensions:
        for values in (extension.condition, extension.parameters, *extension.cases):
            for key in values:
                yield str(key), extension.source
