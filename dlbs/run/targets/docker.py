"""The `docker` target: the benchmark in a container of the Docker Engine or of Podman.

Through the Docker SDK for Python (`docker==7.2.0`), or, when the container's launcher is
`nvidia-docker`, through the legacy `nvidia-docker` binary with the equivalent CLI flags. The
request (image, the user's flags translated once, dlbs's environment, mounts and GPUs) comes
whole from the invocation's `ContainerSpec`, rendered by `dlbs.recipes.container`. The
container is removed afterwards, whatever happened; its output is streamed into the
experiment's log as it comes. It carries the attempt's token as the label `dlbs.attempt`
and the run that started it as `dlbs.run`: after a `kill -9` of dlbs, the next run finds it
by that label (whatever `--name` the user gave it) and removes it (`stop_leftovers`), unless
the run that started it still runs.

Podman (`ContainerSpec.engine`) is driven through the same SDK and the same request, at its
Docker-compatible API socket (`ContainerSpec.engine_url`, which `podman system service`
serves). Its GPUs go as CDI device requests, which Podman's compatible API honours from
version 5.4 on; older versions drop them without a word, so a GPU experiment on one is
refused before the sweep.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import socket
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any, BinaryIO

from dlbs.errors import LaunchError
from dlbs.recipes.container import cli_argv, container_of, sdk_request
from dlbs.recipes.invocation import PODMAN_ENGINE, Invocation
from dlbs.run.interrupts import forced_event
from dlbs.run.marks import OWNER_LABEL, TOKEN_LABEL
from dlbs.run.outcome import FAILURE, INTERRUPTED, OK, TIMEOUT, Outcome
from dlbs.run.targets.base import OnStart, ProcessTarget, register_target
from dlbs.run.targets.orphans import owner_identity, owner_lives
from dlbs.run.targets.process import DEFAULT_KILL_GRACE, run_process, signal_name
from dlbs.util.credentials import benchmark_environment

try:
    import docker
    import docker.errors
    import docker.types
    import requests.exceptions
except ImportError as _error:  # the target still registers, and says why it can't be used
    _MISSING: str | None = f"the Docker SDK for Python is missing ({_error}); " \
                           "install it with: pip install docker==7.2.0"
else:
    _MISSING = None

NVIDIA_HINT = ("install the NVIDIA Container Toolkit on the Docker host and restart dockerd, "
               "or run this experiment on the CPU (exp.gpus: '')")
#: The first Podman whose Docker-compatible API honours CDI device requests
#: (containers/podman#25171).
PODMAN_CDI_VERSION = (5, 4)


def _version_tuple(text: str) -> tuple[int, ...]:
    numbers = []
    for part in text.split("-")[0].split("."):
        if not part.isdigit():
            break
        numbers.append(int(part))
    return tuple(numbers)


def _is_nvidia_error(error: Exception) -> bool:
    text = str(error).lower()
    return ("could not select device driver" in text or "unknown runtime" in text
            or "nvidia-container" in text)


def _stream_logs(container: Any, log: BinaryIO) -> None:
    for chunk in container.logs(stream=True, follow=True, stdout=True, stderr=True):
        log.write(chunk)
        log.flush()


@register_target("docker", unavailable=_MISSING)
class DockerTarget(ProcessTarget):
    """A container of the Docker Engine; see the module doc."""

    summary = ("a container of the Docker Engine or of Podman (Docker SDK, or the "
               "nvidia-docker binary)")
    kill_grace = DEFAULT_KILL_GRACE

    def __init__(self) -> None:
        self._clients: dict[str, Any] = {}

    # -- the request -------------------------------------------------------------------

    def describe(self, invocation: Invocation) -> dict[str, Any]:
        """The SDK request, and the equivalent command line."""
        spec = container_of(invocation)
        described = {"target": self.name, "engine": spec.engine, "launcher": spec.launcher,
                     **sdk_request(invocation), "cli": cli_argv(invocation)}
        if spec.engine_url:
            described["engine_url"] = spec.engine_url
        if spec.launcher == "nvidia-docker" and invocation.gpus:
            described["env"] = {"NV_GPU": ",".join(invocation.gpus)}
        return described

    def close(self) -> None:
        """Close the connections to the engines."""
        for client in self._clients.values():
            client.close()
        self._clients.clear()

    # -- checks before the sweep -------------------------------------------------------

    @property
    def client(self) -> Any:
        """The Docker Engine's SDK client (from DOCKER_HOST etc.)."""
        return self.engine_client("")

    def client_of(self, invocation: Invocation) -> Any:
        """The SDK client of the engine that runs the invocation's container."""
        return self.engine_client(container_of(invocation).engine_url)

    def engine_client(self, url: str) -> Any:
        """The SDK client at `url` ("" = the Docker SDK's settings, DOCKER_HOST and friends).

        `LaunchError` naming the engine and how to start it when it does not answer.
        """
        if url not in self._clients:
            podman = bool(url)
            host = url or os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
            what = "Podman's Docker-compatible API" if podman else "the Docker Engine"
            hint = ("start it with `podman system service --time=0 " + host + "` (for the "
                    "tests: .ci/services/podman.sh), or set runtime.podman_socket"
                    if podman else "start dockerd (for the tests: .ci/services/docker.sh), or "
                    "point DOCKER_HOST at a running engine")
            # Checked with a socket of our own first: the SDK leaks its socket when the
            # connection is refused.
            if host.startswith("unix://"):
                with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
                    probe.settimeout(10)
                    try:
                        probe.connect(host[len("unix://"):])
                    except OSError as error:
                        raise LaunchError(f"{what} at {host} does not answer: "
                                          f"{error.strerror or error}", hint=hint) from None
            client = None
            try:
                client = docker.DockerClient(base_url=url) if podman else docker.from_env()
                client.ping()
            except (docker.errors.DockerException, requests.exceptions.RequestException) as error:
                if client is not None:
                    client.close()
                raise LaunchError(f"{what} at {host} does not answer: {error}",
                                  hint=hint) from error
            self._clients[url] = client
        return self._clients[url]

    def preflight(self, invocations: Sequence[Invocation]) -> None:
        """Launchers, the engines, the images, and the way to hand GPUs to containers."""
        images: dict[tuple[str, str], Invocation] = {}
        gpu_invocations: list[Invocation] = []
        podman_gpus: dict[str, Invocation] = {}
        for invocation in invocations:
            spec = container_of(invocation)
            images.setdefault((spec.engine_url, spec.image), invocation)
            if spec.engine == PODMAN_ENGINE:
                if invocation.gpus:
                    podman_gpus.setdefault(spec.engine_url, invocation)
                continue
            if spec.launcher == "nvidia-docker" and shutil.which("nvidia-docker") is None:
                raise LaunchError(
                    f"exp.docker_launcher is nvidia-docker, but there is no nvidia-docker "
                    f"on PATH (experiment {invocation.label})",
                    hint="install nvidia-docker, or set exp.docker_launcher: docker "
                         "(GPUs then go through device requests)")
            if spec.launcher == "docker" and invocation.gpus:
                gpu_invocations.append(invocation)
        if not invocations:
            return
        for (url, image), invocation in images.items():
            client = self.engine_client(url)
            engine = "Podman" if url else "the Docker Engine"
            try:
                client.images.get(image)
            except docker.errors.ImageNotFound:
                pull = "podman pull" if url else "docker pull"
                raise LaunchError(
                    f"image {image!r} is not in {engine} (exp.docker_image of "
                    f"experiment {invocation.label})",
                    hint=f"pull or build it first ({pull} {image}); dlbs never pulls "
                         "images itself") from None
            except docker.errors.APIError as error:
                raise LaunchError(f"cannot inspect image {image!r}: {error}") from error
        for url, invocation in podman_gpus.items():
            self._check_podman_gpus(url, invocation)
        if gpu_invocations:
            self._check_nvidia(gpu_invocations[0])

    def podman_version(self, url: str) -> str:
        """The version of the Podman that serves `url` (from its version API)."""
        version = self.engine_client(url).version()
        for component in version.get("Components") or []:
            if "podman" in str(component.get("Name", "")).lower():
                return str(component.get("Version", ""))
        return str(version.get("Version", ""))

    def _check_podman_gpus(self, url: str, invocation: Invocation) -> None:
        """Refuse GPUs on a Podman whose compatible API would drop the CDI request."""
        version = self.podman_version(url)
        if _version_tuple(version) < PODMAN_CDI_VERSION:
            wanted = ".".join(map(str, PODMAN_CDI_VERSION))
            raise LaunchError(
                f"experiment {invocation.label} asks for GPUs {invocation.gpus}, but Podman "
                f"{version}'s Docker-compatible API ignores GPU requests (CDI device requests "
                f"are honoured from Podman {wanted})",
                hint=f"use Podman {wanted} or newer with a CDI spec (nvidia-ctk cdi generate), "
                     "or exp.container_engine: docker")

    def _check_nvidia(self, invocation: Invocation) -> None:
        """Is there a way to hand GPUs to a container? Probe with a real request if unsure."""
        spec = container_of(invocation)
        runtimes = sorted((self.client.info().get("Runtimes") or {}).keys())
        if "nvidia" in runtimes:
            return
        if spec.uses_nvidia_runtime:
            raise LaunchError(
                f"experiment {invocation.label} asks for GPUs with --runtime=nvidia, but the "
                f"Docker Engine has no NVIDIA runtime (its runtimes: {', '.join(runtimes)})",
                hint=NVIDIA_HINT)
        # Device requests work with the NVIDIA hook alone, without a registered runtime:
        # only starting a container tells. The probe's command need not exist in the image;
        # the driver is selected (or refused) before it would run.
        probe = None
        try:
            probe = self.client.containers.create(
                spec.image, ["true"], labels={"dlbs.probe": "gpu"},
                device_requests=[docker.types.DeviceRequest(driver="nvidia", count=1,
                                                            capabilities=[["gpu"]])])
            probe.start()
            probe.wait(timeout=60)
        except docker.errors.APIError as error:
            if _is_nvidia_error(error):
                raise LaunchError(
                    f"experiment {invocation.label} asks for GPUs {invocation.gpus}, but the "
                    f"Docker Engine has no NVIDIA runtime to hand them to a container "
                    f"(runtimes: {', '.join(runtimes)}; the engine said: "
                    f"{error.explanation or error})", hint=NVIDIA_HINT) from None
        finally:
            if probe is not None:
                self._remove(probe)

    # -- running -----------------------------------------------------------------------

    def run(self, invocation: Invocation, log: BinaryIO, timeout: float | None, *,
            on_start: OnStart | None = None, stop: threading.Event | None = None,
            token: str | None = None) -> Outcome:
        """Run the container to its end; see `ProcessTarget.run` and the module doc.

        `on_start` gets the host PID of the container's first process; `token` becomes the
        container's label `dlbs.attempt`, beside its owner's `dlbs.run` (this dlbs run).
        """
        if token:
            spec = container_of(invocation)
            invocation = dataclasses.replace(invocation, container=dataclasses.replace(
                spec, labels={**spec.labels, TOKEN_LABEL: token,
                              OWNER_LABEL: owner_identity()}))
        request = sdk_request(invocation)
        if container_of(invocation).launcher == "nvidia-docker":
            return self._run_nvidia_docker(invocation, request, log, timeout, on_start, stop)
        client = self.client_of(invocation)
        container = self._create(invocation, request, client)
        details: dict[str, Any] = {"container": container.name, "image": request["image"],
                                   "engine": container_of(invocation).engine}
        stopped = threading.Event()
        done = threading.Event()
        try:
            try:
                container.start()
            except docker.errors.APIError as error:
                raise self._start_error(invocation, error) from None
            log.flush()
            pump = threading.Thread(target=_stream_logs, args=(container, log), daemon=True)
            pump.start()
            if stop is not None:
                threading.Thread(target=self._stop_on_request, daemon=True,
                                 args=(container, stop, done, stopped)).start()
            limit = timeout if timeout and timeout > 0 else None
            try:
                if on_start is not None:
                    pid = self._host_pid(client, container.name)
                    if pid:
                        on_start(pid)
                result = container.wait(timeout=limit)
            except (requests.exceptions.ReadTimeout, requests.exceptions.ConnectionError):
                container.stop(timeout=int(self.kill_grace))
                pump.join(timeout=30)
                return Outcome(TIMEOUT, f"still running after the timeout of {limit:g} s; "
                               "the container was stopped", details=details)
            except KeyboardInterrupt:
                try:  # SIGINT first, as Ctrl-C would have sent it to a foreground process
                    container.kill(signal="SIGINT")
                except docker.errors.APIError:
                    pass  # it ended meanwhile
                container.stop(timeout=int(self.kill_grace))
                pump.join(timeout=30)
                return Outcome(INTERRUPTED, "interrupted by the user", details=details)
            pump.join(timeout=30)
            if stopped.is_set():
                return Outcome(INTERRUPTED, "interrupted by the user", details=details)
            return self._outcome(container, result, details)
        finally:
            done.set()
            self._remove(container)

    def _stop_on_request(self, container: Any, stop: threading.Event, done: threading.Event,
                         stopped: threading.Event) -> None:
        """Stop the container as Ctrl-C would once `stop` is set (until `done`).

        SIGINT, then SIGKILL after the grace period, or at once when the stop is forced.
        """
        forced = forced_event(stop)
        while not done.wait(0.1):
            if stop.is_set():
                stopped.set()
                try:
                    container.kill(signal="SIGINT")
                except docker.errors.APIError:
                    pass  # it ended meanwhile
                deadline = time.monotonic() + self.kill_grace
                while not done.is_set() and time.monotonic() < deadline and \
                        not (forced is not None and forced.is_set()):
                    done.wait(0.1)
                if not done.is_set():
                    try:
                        container.kill(signal="SIGKILL")
                    except docker.errors.APIError:
                        pass  # it ended meanwhile
                return

    def stop_leftovers(self, invocation: Invocation, mark: Mapping[str, Any]) -> list[str]:
        """Remove the containers labelled with the attempt's token, on its engine.

        A container whose `dlbs.run` label names a run that still runs (or one of another
        host, which cannot be looked at from here) belongs to that run: it is left alone.
        """
        token = str(mark.get("token") or "")
        if not token:
            return []
        client = self.client_of(invocation) if invocation.container is not None \
            else self.client
        try:
            found = client.containers.list(all=True,
                                           filters={"label": f"{TOKEN_LABEL}={token}"})
        except docker.errors.APIError as error:
            raise LaunchError(f"cannot list the containers of experiment {invocation.label}: "
                              f"{error.explanation or error}") from error
        stopped = []
        for container in found:
            owner = (container.labels or {}).get(OWNER_LABEL)
            if owner and owner_lives(owner):
                continue
            try:
                container.stop(timeout=int(self.kill_grace))
            except docker.errors.APIError:
                pass  # it ended meanwhile, or is being removed
            self._remove(container)
            stopped.append(f"container {container.name}")
        return stopped

    def _create(self, invocation: Invocation, request: dict[str, Any], client: Any) -> Any:
        kwargs = dict(request["kwargs"])
        if "ulimits" in kwargs:
            kwargs["ulimits"] = [docker.types.Ulimit(name=u["Name"], soft=u["Soft"],
                                                     hard=u["Hard"]) for u in kwargs["ulimits"]]
        if "device_requests" in kwargs:
            kwargs["device_requests"] = [
                docker.types.DeviceRequest(driver=r["Driver"], count=r.get("Count", 0),
                                           device_ids=r.get("DeviceIDs"),
                                           capabilities=r["Capabilities"])
                for r in kwargs["device_requests"]]
        if "mounts" in kwargs:
            kwargs["mounts"] = [docker.types.Mount(m["Target"], m["Source"], type=m["Type"],
                                                   read_only=m["ReadOnly"])
                                for m in kwargs["mounts"]]
        try:
            return client.containers.create(request["image"], request["command"],
                                            stdin_open=False, tty=False, **kwargs)
        except docker.errors.ImageNotFound:
            raise LaunchError(f"image {request['image']!r} is not in the Docker Engine "
                              f"(experiment {invocation.label})",
                              hint="pull or build it first; dlbs never pulls images") from None
        except docker.errors.APIError as error:
            if _is_nvidia_error(error):
                raise LaunchError(f"the Docker Engine has no NVIDIA runtime for experiment "
                                  f"{invocation.label}: {error.explanation or error}",
                                  hint=NVIDIA_HINT) from None
            raise LaunchError(f"the Docker Engine refused the container of experiment "
                              f"{invocation.label}: {error.explanation or error}"
                              ) from error

    def _start_error(self, invocation: Invocation, error: Exception) -> LaunchError:
        explanation = getattr(error, "explanation", None) or str(error)
        if _is_nvidia_error(error):
            return LaunchError(
                f"experiment {invocation.label} asks for GPUs {invocation.gpus}, "
                f"but the Docker Engine has no NVIDIA runtime to hand them to a container "
                f"(the engine said: {explanation})", hint=NVIDIA_HINT)
        hint = None
        if "rlimit" in explanation:
            hint = ("a --ulimit in exp.docker_args is above the Docker daemon's own hard limit "
                    "(raise dockerd's limit, or lower or drop that --ulimit)")
        return LaunchError(f"the container of experiment {invocation.label} did "
                           f"not start: {explanation}", hint=hint)

    def _outcome(self, container: Any, result: dict[str, Any],
                 details: dict[str, Any]) -> Outcome:
        code = int(result.get("StatusCode", -1))
        try:
            container.reload()
            oom = bool(container.attrs.get("State", {}).get("OOMKilled"))
        except docker.errors.APIError:
            oom = False
        if code == 0:
            return Outcome(OK, returncode=0, details=details)
        if oom:
            message = "out of memory: the container was OOM-killed"
        elif code > 128:
            name = signal_name(code - 128)
            details["signal"] = name
            message = f"container's process killed by {name}"
        elif code in (126, 127):
            message = (f"container exited with status {code}: the command cannot be run "
                       "in the image (not found or not executable)")
        else:
            message = f"container exited with status {code}"
        error = (result.get("Error") or {}).get("Message")
        if error:
            message += f" ({error})"
        return Outcome(FAILURE, message, code, details)

    def _remove(self, container: Any) -> None:
        try:
            container.remove(force=True)
        except docker.errors.NotFound:
            pass
        except docker.errors.APIError as error:
            if "already in progress" not in str(error):
                raise LaunchError(f"cannot remove container {container.name}: {error}") from error

    def _host_pid(self, client: Any, name: str, wait: float = 0.0) -> int | None:
        """The host PID of a running container's first process (waits up to `wait` s)."""
        deadline = time.monotonic() + wait
        while True:
            try:
                state = client.api.inspect_container(name).get("State", {})
                if state.get("Running") and state.get("Pid"):
                    return int(state["Pid"])
                if state.get("Status") == "exited":
                    return None
            except docker.errors.NotFound:
                pass
            if time.monotonic() >= deadline:
                return None
            time.sleep(0.05)

    def _run_nvidia_docker(self, invocation: Invocation, request: dict[str, Any],
                           log: BinaryIO, timeout: float | None,
                           on_start: OnStart | None, stop: threading.Event | None) -> Outcome:
        argv = cli_argv(invocation)
        env = benchmark_environment()   # the CLI passes `-e NAME` from it: no credentials
        if invocation.gpus:  # nvidia-docker's own way to select GPUs
            env["NV_GPU"] = ",".join(invocation.gpus)
        name = request["kwargs"]["name"]

        def remove_leftover() -> None:
            try:
                self._remove(self.client.containers.get(name))
            except (docker.errors.NotFound, LaunchError):
                pass

        def container_started(_cli_pid: int) -> None:
            # The benchmark runs under the engine, not under the CLI: find the container.
            def report() -> None:
                pid = self._host_pid(self.client, name, wait=60.0)
                if pid:
                    on_start(pid)  # type: ignore[misc]
            threading.Thread(target=report, daemon=True).start()

        outcome = run_process(argv, env=env, cwd=None, log=log, timeout=timeout,
                              grace=self.kill_grace, cleanup=remove_leftover,
                              on_start=container_started if on_start else None, stop=stop)
        outcome.details["container"] = name
        return outcome
