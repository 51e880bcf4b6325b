"""Container flags that give the container the host, named so that a user sees them.

A benchmark may need one of them (`--cap-add=SYS_ADMIN` for some profilers, `-v /:/host` to
read a dataset where it lies), so they are not refused; but each is a warning when the plan
is made (`dlbs plan`, `dlbs validate`, `dlbs run`), one line per flag with the number of
experiments that use it (docs/security.md). `--ipc=host`, which the frameworks' data
loaders need for shared memory and the default configs set, is not warned about.

The flags are read from the translation that the run uses (`docker_args.translate`), so what
is warned about is exactly what the Engine would be asked for. dlbs's own writable mounts
(the trace's folder, an evaluation's log folder: `own_mounts`) are warned about too when
they are, or are inside, a system folder: `exp.trace_file=/etc/x.trace.json.gz` gives the
container the host's /etc, writable.
"""

from __future__ import annotations

import operator
import os
import posixpath
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from dlbs.errors import DlbsError
from dlbs.recipes import evaluation, tracing
from dlbs.recipes.docker_args import DockerArgs, translate
from dlbs.recipes.parts import tokens
from dlbs.recipes.recipe import recipe_for
from dlbs.util.booleans import truthy

#: Namespaces that `--<name>=host` shares with the host (not ipc: see the module doc).
HOST_NAMESPACES = {
    "pid_mode": ("--pid=host", "every process of the host, to see and signal"),
    "network_mode": ("--network=host", "the host's network stack and ports"),
    "uts_mode": ("--uts=host", "the host's hostname, to change"),
    "userns_mode": ("--userns=host", "the host's users (root in it is root on the host)"),
    "cgroupns": ("--cgroupns=host", "the host's control groups"),
}
#: Capabilities that amount to root on the host.
HOST_CAPABILITIES = frozenset({"ALL", "SYS_ADMIN", "SYS_MODULE", "SYS_PTRACE", "SYS_RAWIO",
                               "SYS_BOOT", "SYS_TIME", "NET_ADMIN", "DAC_READ_SEARCH", "BPF",
                               "MAC_ADMIN", "SYSLOG"})
#: `--security-opt` values that switch the host's confinement off.
UNCONFINED = ("seccomp=unconfined", "seccomp:unconfined", "apparmor=unconfined",
              "apparmor:unconfined", "label=disable", "label:disable",
              "systempaths=unconfined")
#: Host folders whose mount hands over the host: its root, system folders, the engines' API.
HOST_PATHS = frozenset({"/", "/bin", "/boot", "/dev", "/etc", "/lib", "/proc", "/root", "/run",
                        "/sbin", "/sys", "/usr", "/var", "/var/run", "/var/lib/docker",
                        "/var/run/docker.sock", "/run/docker.sock", "/run/podman/podman.sock",
                        "/run/containerd/containerd.sock"})
#: Host devices that give raw access to memory or disks.
RAW_DEVICES = ("/dev/mem", "/dev/kmem", "/dev/port", "/dev/sd", "/dev/nvme", "/dev/vd",
               "/dev/xvd", "/dev/hd", "/dev/disk/", "/dev/mapper/", "/dev/loop", "/dev/dm-")


def host_access(args: DockerArgs) -> list[str]:
    """One text per flag of `args` that gives the container the host: what it gives."""
    kwargs = args.kwargs
    found: list[str] = []
    if kwargs.get("privileged"):
        found.append("--privileged gives the container every device and capability of the "
                     "host")
    for key, (flag, what) in HOST_NAMESPACES.items():
        if str(kwargs.get(key, "")).lower() == "host":
            found.append(f"{flag} gives the container {what}")
    for capability in kwargs.get("cap_add", []):
        name = str(capability).upper().removeprefix("CAP_")
        if name in HOST_CAPABILITIES:
            found.append(f"--cap-add={name} gives the container " +
                         ("every capability" if name == "ALL" else
                          "a capability that acts on the host"))
    for option in kwargs.get("security_opt", []):
        if str(option).replace(" ", "") in UNCONFINED:
            found.append(f"--security-opt={option} gives the container the host's kernel "
                         "without confinement")
    for volume in kwargs.get("volumes", []):
        source = str(volume).split(":", 1)[0]
        if _host_path(source):
            found.append(f"-v {volume} gives the container the host's {source}")
    for mount in kwargs.get("mounts", []):
        source = str(mount.get("Source") or "")
        if mount.get("Type") == "bind" and _host_path(source):
            found.append(f"--mount source={source} gives the container the host's {source}")
    for device in kwargs.get("devices", []):
        host = str(device).split(":", 1)[0]
        if host.startswith(RAW_DEVICES):
            found.append(f"--device {host} gives the container the host's {host}, raw")
    for rule in kwargs.get("device_cgroup_rules", []):
        if str(rule).strip().startswith("a"):
            found.append(f"--device-cgroup-rule={rule} gives the container every device")
    return found


def _host_path(source: str) -> bool:
    if not source.startswith("/"):
        return False  # a named volume
    normal = _real(source)
    return normal in HOST_PATHS or normal.endswith((".sock", "/docker.sock"))


def _real(path: str) -> str:
    """What the engine mounts: the path with this host's symbolic links followed.

    `/tmp/link` to `/etc` mounts `/etc`; `//etc` is `/etc`.
    """
    return os.path.realpath(path)


#: Host folders that a writable mount may be inside of without a warning, though the folder
#: itself is the host's (`/var/tmp/logs` is fine, `/var` is not).
_ONLY_ITSELF = frozenset({"/", "/var"})


def own_mounts(experiment: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(parameter, host folder) of the writable mounts dlbs adds to the container itself.

    The trace's folder (`tracing.trace_mounts`) and, for an evaluation scenario, the log's
    folder (`evaluation.container_mounts`); none on bare metal.
    """
    if not truthy(experiment.get("exp.docker", False)):
        return []
    found = []
    try:
        if tracing.traces(experiment):
            found.append((tracing.FILE, os.path.dirname(tracing.trace_path(experiment))))
        if evaluation.scenario(experiment) != "benchmark":
            found.append(("exp.log_file",
                          os.path.dirname(evaluation.output_stem(experiment))))
    except DlbsError:
        pass  # an empty path: the run says so
    return found


def mount_access(folder: str) -> str | None:
    """What a writable mount of the host's `folder` gives the container when that is a lot."""
    real = _real(folder)
    inside = next((system for system in sorted(HOST_PATHS - _ONLY_ITSELF)
                   if real == system or real.startswith(system + "/")), None)
    if real in _ONLY_ITSELF or inside:
        return f"a writable mount of {posixpath.normpath(folder)} gives the container the " \
               f"host's {inside or real}"
    return None


def experiment_host_access(experiment: Mapping[str, Any]) -> list[str]:
    """`host_access` of an experiment's container; none on bare metal or when untranslatable.

    A flag that cannot be translated is left to the run, which reports it.
    """
    if not truthy(experiment.get("exp.docker", False)):
        return []
    try:
        try:
            flags = recipe_for(experiment).docker_arg_tokens(experiment)
        except DlbsError:
            flags = tokens(experiment.get("exp.docker_args"), "exp.docker_args")
        return host_access(translate(flags))
    except DlbsError:
        return []


class HostAccessWatch:
    """Counts, over a plan, the experiments whose container gets the host through each flag."""

    def __init__(self) -> None:
        #: (the parameter, what it gives) -> experiments.
        self.counts: Counter[tuple[str, str]] = Counter()
        self._cache: dict[tuple[Any, ...], list[str]] = {}
        # The values the last experiment's flags were read from, and its flags.
        self._last: tuple[tuple[Any, Any, Any], list[str]] | None = None

    def watch(self, experiments: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        """Yield `experiments` unchanged, noting each one's flags on the way."""
        for experiment in experiments:
            self.add(experiment)
            yield experiment

    def add(self, experiment: Mapping[str, Any], args: DockerArgs | None = None) -> None:
        """Note the experiment's flags (`args`: those the run translated) and own mounts."""
        if not truthy(experiment.get("exp.docker", False)):
            return
        if args is not None:
            found = host_access(args)
        else:
            framework = experiment.get("exp.framework")
            values = (framework, experiment.get(f"{framework}.docker_args"),
                      experiment.get("exp.docker_args"))
            last = self._last
            if last is not None and all(map(operator.is_, values, last[0])):
                found = last[1]  # the same values as the experiment before (a plan shares them)
            else:
                key = (framework, repr(values[1]), repr(values[2]))
                found = self._cache.get(key)
                if found is None:
                    found = self._cache[key] = experiment_host_access(experiment)
                self._last = (values, found)
        if found:
            self.counts.update(("exp.docker_args", text) for text in found)
        for name, folder in own_mounts(experiment):
            text = mount_access(folder)
            if text:
                self.counts[(name, text)] += 1

    def warnings(self) -> list[str]:
        return [f"{name}: {text} ({count} experiment{'s' if count > 1 else ''}; see "
                f"docs/security.md)" for (name, text), count in self.counts.items()]
