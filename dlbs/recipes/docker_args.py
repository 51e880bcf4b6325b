"""`docker run` flags (as users write them in `exp.docker_args`) -> Docker SDK arguments.

Pure data in, pure data out: `translate(tokens)` returns keyword arguments for
`docker.client.containers.create` in which every value is plain JSON data (ulimits, device
requests and mounts as dictionaries); the docker target turns those few into SDK objects.
Both `--flag=value` and `--flag value` are accepted, short flags may be grouped (`-it`) or
carry their value (`-eNAME=1`, `-e=NAME=1`), as the docker CLI accepts them. A flag that is
not in the table is a `LaunchError` naming it, never silently dropped.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from dlbs.errors import LaunchError
from dlbs.util.booleans import parse_bool
from dlbs.util.credentials import benchmark_environment
from dlbs.util.records import FrozenRecord, Record

Kwargs = dict[str, Any]


class DockerArgs(Record):
    """The translation of one `exp.docker_args` token list."""

    __slots__ = ("kwargs", "ignored", "tokens")

    def __init__(self, kwargs: Kwargs | None = None, ignored: list[str] | None = None,
                 tokens: list[str] | None = None) -> None:
        self.kwargs = {} if kwargs is None else kwargs
        #: Flags accepted but without effect, each with the reason (shown by --dry-run).
        self.ignored = [] if ignored is None else ignored
        #: The flags as the user wrote them, split into tokens (a CLI rendering repeats them).
        self.tokens = [] if tokens is None else tokens


class Flag(FrozenRecord):
    """One `docker run` flag: its spellings, whether it takes a value, what it sets."""

    __slots__ = ("names", "takes_value", "apply")

    def __init__(self, names: tuple[str, ...], takes_value: bool,
                 apply: Callable[[DockerArgs, str], None]) -> None:
        self.names = names
        self.takes_value = takes_value
        self.apply = apply


class _BadValue(ValueError):
    """A flag's value that cannot be translated; the message says what was expected."""


def _set(key: str, convert: Callable[[str], Any] = str) -> Callable[[DockerArgs, str], None]:
    def apply(args: DockerArgs, value: str) -> None:
        args.kwargs[key] = convert(value)
    return apply


def _append(key: str, convert: Callable[[str], Any] = str) -> Callable[[DockerArgs, str], None]:
    def apply(args: DockerArgs, value: str) -> None:
        args.kwargs.setdefault(key, []).append(convert(value))
    return apply


def _put(key: str, separator: str) -> Callable[[DockerArgs, str], None]:
    """`NAME<sep>VALUE` into the dictionary `kwargs[key]`."""
    def apply(args: DockerArgs, value: str) -> None:
        name, sep, item = value.partition(separator)
        if not name or not sep:
            raise _BadValue(f"expected NAME{separator}VALUE")
        args.kwargs.setdefault(key, {})[name] = item
    return apply


def _flag_on(key: str) -> Callable[[DockerArgs, str], None]:
    def apply(args: DockerArgs, value: str) -> None:
        args.kwargs[key] = True
    return apply


def _ignore(reason: str) -> Callable[[DockerArgs, str], None]:
    def apply(args: DockerArgs, value: str) -> None:
        args.ignored.append(reason)
    return apply


_SIZE = re.compile(r"^\d+(\.\d+)?[bkmgBKMG]?[bB]?$")


def _size(value: str) -> str:
    if not _SIZE.match(value):
        raise _BadValue("expected a size such as 512m or 1g")
    return value


def _integer(value: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise _BadValue("expected an integer") from None


def _nano_cpus(value: str) -> int:
    try:
        return int(float(value) * 1e9)
    except ValueError:
        raise _BadValue("expected a number of CPUs such as 1.5") from None


def _ulimit_value(text: str) -> int:
    return -1 if text in ("unlimited", "-1") else _integer(text)


def _ulimit(value: str) -> dict[str, Any]:
    name, sep, limits = value.partition("=")
    if not name or not sep or not limits:
        raise _BadValue("expected NAME=SOFT[:HARD], e.g. memlock=-1")
    soft, _, hard = limits.partition(":")
    soft_value = _ulimit_value(soft)
    return {"Name": name, "Soft": soft_value, "Hard": _ulimit_value(hard) if hard else soft_value}


def _env(args: DockerArgs, value: str) -> None:
    name, sep, item = value.partition("=")
    if not name:
        raise _BadValue("expected NAME=VALUE or NAME")
    environment = args.kwargs.setdefault("environment", {})
    if sep:
        environment[name] = item
    else:  # `-e NAME` passes the host's value, as the docker CLI does (not a credential)
        inherited = benchmark_environment()
        if name in inherited:
            environment[name] = inherited[name]


def _env_file(args: DockerArgs, value: str) -> None:
    try:
        with open(value, encoding="utf-8") as lines:
            for line in lines:
                line = line.strip()
                if line and not line.startswith("#"):
                    _env(args, line)
    except OSError as error:
        raise _BadValue(f"cannot read the file: {error.strerror}") from None


def _mount(value: str) -> dict[str, Any]:
    """`type=bind,source=/a,target=/b,readonly` -> a mount dictionary."""
    fields: dict[str, str] = {}
    for part in value.split(","):
        key, _, item = part.partition("=")
        fields[key.strip()] = item.strip() if item else "true"
    target = fields.get("target") or fields.get("destination") or fields.get("dst")
    if not target:
        raise _BadValue("expected type=...,source=...,target=...")
    read_only = bool(parse_bool(fields.get("readonly", fields.get("ro", "false"))))
    return {"Target": target, "Source": fields.get("source") or fields.get("src"),
            "Type": fields.get("type", "volume"), "ReadOnly": read_only}


def _gpus(args: DockerArgs, value: str) -> None:
    """`all`, a count, or `device=0,2` (quoted or not) -> one nvidia device request."""
    value = value.strip().strip('"').strip("'")
    request: dict[str, Any] = {"Driver": "nvidia", "Capabilities": [["gpu"]]}
    if value == "all":
        request["Count"] = -1
    elif value.isdigit():
        request["Count"] = int(value)
    elif value.startswith("device="):
        request["DeviceIDs"] = [v for v in value[len("device="):].split(",") if v]
    else:
        raise _BadValue("expected all, a count, or device=ID[,ID...]")
    args.kwargs.setdefault("device_requests", []).append(request)


def _add_host(args: DockerArgs, value: str) -> None:
    host, sep, address = value.partition(":")
    if not host or not sep:
        raise _BadValue("expected HOST:IP")
    args.kwargs.setdefault("extra_hosts", {})[host] = address


def _tmpfs(args: DockerArgs, value: str) -> None:
    path, _, options = value.partition(":")
    args.kwargs.setdefault("tmpfs", {})[path] = options


FLAGS: tuple[Flag, ...] = (
    Flag(("--rm",), False, _ignore("--rm: dlbs always removes the container after the run")),
    Flag(("-i", "--interactive"), False,
         _ignore("-i: the benchmark gets no standard input from dlbs")),
    Flag(("-t", "--tty"), False,
         _ignore("-t: output goes to the experiment's log, not to a terminal")),
    Flag(("-d", "--detach"), False,
         _ignore("-d: dlbs always starts the container detached and follows its output")),
    Flag(("--shm-size",), True, _set("shm_size", _size)),
    Flag(("--ulimit",), True, _append("ulimits", _ulimit)),
    Flag(("--ipc",), True, _set("ipc_mode")),
    Flag(("--pid",), True, _set("pid_mode")),
    Flag(("--uts",), True, _set("uts_mode")),
    Flag(("--userns",), True, _set("userns_mode")),
    Flag(("--cgroupns",), True, _set("cgroupns")),
    Flag(("--security-opt",), True, _append("security_opt")),
    Flag(("-v", "--volume"), True, _append("volumes")),
    Flag(("--mount",), True, _append("mounts", _mount)),
    Flag(("-e", "--env"), True, _env),
    Flag(("--env-file",), True, _env_file),
    Flag(("--network", "--net"), True, _set("network_mode")),
    Flag(("-h", "--hostname"), True, _set("hostname")),
    Flag(("--add-host",), True, _add_host),
    Flag(("--dns",), True, _append("dns")),
    Flag(("--cpuset-cpus",), True, _set("cpuset_cpus")),
    Flag(("--cpuset-mems",), True, _set("cpuset_mems")),
    Flag(("--cpus",), True, _set("nano_cpus", _nano_cpus)),
    Flag(("-c", "--cpu-shares"), True, _set("cpu_shares", _integer)),
    Flag(("-m", "--memory"), True, _set("mem_limit", _size)),
    Flag(("--memory-swap",), True, _set("memswap_limit", lambda v: -1 if v == "-1" else _size(v))),
    Flag(("--memory-reservation",), True, _set("mem_reservation", _size)),
    Flag(("--oom-kill-disable",), False, _flag_on("oom_kill_disable")),
    Flag(("--pids-limit",), True, _set("pids_limit", _integer)),
    Flag(("-u", "--user"), True, _set("user")),
    Flag(("--group-add",), True, _append("group_add")),
    Flag(("--runtime",), True, _set("runtime")),
    Flag(("--gpus",), True, _gpus),
    Flag(("--privileged",), False, _flag_on("privileged")),
    Flag(("--cap-add",), True, _append("cap_add")),
    Flag(("--cap-drop",), True, _append("cap_drop")),
    Flag(("--device",), True, _append("devices")),
    Flag(("--device-cgroup-rule",), True, _append("device_cgroup_rules")),
    Flag(("--entrypoint",), True, _set("entrypoint", lambda v: [v])),
    Flag(("-w", "--workdir"), True, _set("working_dir")),
    Flag(("--name",), True, _set("name")),
    Flag(("-l", "--label"), True, _put("labels", "=")),
    Flag(("--sysctl",), True, _put("sysctls", "=")),
    Flag(("--tmpfs",), True, _tmpfs),
    Flag(("--init",), False, _flag_on("init")),
    Flag(("--read-only",), False, _flag_on("read_only")),
    Flag(("--stop-signal",), True, _set("stop_signal")),
    Flag(("--platform",), True, _set("platform")),
)

_BY_NAME: dict[str, Flag] = {name: flag for flag in FLAGS for name in flag.names}


def supported_flags() -> list[str]:
    """Every spelling this translator accepts, for messages and docs."""
    return sorted(_BY_NAME)


def _unknown(flag: str, where: str) -> LaunchError:
    return LaunchError(f"{where}: unknown docker run flag {flag!r}",
                       hint="supported flags: " + " ".join(supported_flags()))


def _apply(flag: Flag, spelling: str, value: str, args: DockerArgs, where: str) -> None:
    try:
        flag.apply(args, value)
    except _BadValue as error:
        raise LaunchError(f"{where}: bad value {value!r} for {spelling}: {error}") from None


def translate(tokens: list[str], where: str = "exp.docker_args") -> DockerArgs:
    """Translate `docker run` flags into SDK keyword arguments; see the module doc.

    `where` names the source in error messages (the parameter and the experiment).
    """
    args = DockerArgs(tokens=list(tokens))
    index = 0
    while index < len(tokens):
        token = tokens[index]
        index += 1
        if token.startswith("--") and len(token) > 2:
            spelling, has_value, value = token.partition("=")
            flag = _BY_NAME.get(spelling)
            if flag is None:
                raise _unknown(spelling, where)
            if flag.takes_value and not has_value:
                if index >= len(tokens):
                    raise LaunchError(f"{where}: {spelling} needs a value")
                value = tokens[index]
                index += 1
            elif not flag.takes_value and has_value and parse_bool(value) is False:
                continue  # --privileged=false: the flag is off
            _apply(flag, spelling, value, args, where)
        elif token.startswith("-") and len(token) > 1 and not token.startswith("--"):
            position = 1
            while position < len(token):
                spelling = "-" + token[position]
                flag = _BY_NAME.get(spelling)
                if flag is None:
                    raise _unknown(spelling if len(token) == 2 else f"{spelling} (in {token})",
                                   where)
                if not flag.takes_value:
                    _apply(flag, spelling, "", args, where)
                    position += 1
                    continue
                value = token[position + 1:]
                if value.startswith("="):
                    value = value[1:]
                if not value:
                    if index >= len(tokens):
                        raise LaunchError(f"{where}: {spelling} needs a value")
                    value = tokens[index]
                    index += 1
                _apply(flag, spelling, value, args, where)
                break
        else:
            raise LaunchError(
                f"{where}: unexpected argument {token!r}; only docker run flags belong here",
                hint="the image comes from exp.docker_image and the command from the recipe")
    return args
