"""The `docker` target: the benchmark in a container of the Docker Engine.

Through the Docker SDK for Python (`docker==7.2.0`), or, when the container's launcher is
`nvidia-docker`, through the legacy `nvidia-docker` binary with the equivalent CLI flags. The
request (image, the user's flags translated once, dlbs's environment, mounts and GPUs) comes
whole from the invocation's `ContainerSpec`, rendered by `dlbs.recipes.container`. The
container is removed afterwards, whatever happened; its output is streamed into the
experiment's log as it comes.
"""

from __future__ import annotations

import os
import shutil
import socket
import threading
import time
from collections.abc import Sequence
from typing import Any, BinaryIO

from dlbs.errors import LaunchError
from dlbs.recipes.container import cli_argv, container_of, sdk_request
from dlbs.recipes.invocation import Invocation
from dlbs.run.outcome import FAILURE, INTERRUPTED, OK, TIMEOUT, Outcome
from dlbs.run.targets.base import OnStart, ProcessTarget, register_target
from dlbs.run.targets.process import DEFAULT_KILL_GRACE, run_process, signal_name

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

    summary = "a container of the Docker Engine (Docker SDK, or the nvidia-docker binary)"
    kill_grace = DEFAULT_KILL_GRACE

    def __init__(self) -> None:
        self._client: Any = None

    # -- the request -------------------------------------------------------------------

    def describe(self, invocation: Invocation) -> dict[str, Any]:
        """The SDK request, and the equivalent command line."""
        spec = container_of(invocation)
        described = {"target": self.name, "launcher": spec.launcher,
                     **sdk_request(invocation), "cli": cli_argv(invocation)}
        if spec.launcher == "nvidia-docker" and invocation.gpus:
            described["env"] = {"NV_GPU": ",".join(invocation.gpus)}
        return described

    def close(self) -> None:
        """Close the connection to the Docker Engine."""
        if self._client is not None:
            self._client.close()
            self._client = None

    # -- checks before the sweep -------------------------------------------------------

    @property
    def client(self) -> Any:
        """The Docker SDK client (from DOCKER_HOST etc.); `LaunchError` if the daemon is down."""
        if self._client is None:
            host = os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
            hint = ("start dockerd (for the tests: .ci/services/docker.sh), or point DOCKER_HOST "
                    "at a running engine")
            # Checked with a socket of our own first: the SDK leaks its socket when the
            # connection is refused.
            if host.startswith("unix://"):
                with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
                    probe.settimeout(10)
                    try:
                        probe.connect(host[len("unix://"):])
                    except OSError as error:
                        raise LaunchError(f"the Docker Engine at {host} does not answer: "
                                          f"{error.strerror or error}", hint=hint) from None
            try:
                self._client = docker.from_env()
                self._client.ping()
            except (docker.errors.DockerException, requests.exceptions.RequestException) as error:
                self.close()
                raise LaunchError(f"the Docker Engine at {host} does not answer: {error}",
                                  hint=hint) from error
        return self._client

    def preflight(self, invocations: Sequence[Invocation]) -> None:
        """Launchers, the daemon, the images, and the NVIDIA runtime for GPUs."""
        images: dict[str, Invocation] = {}
        gpu_invocations: list[Invocation] = []
        for invocation in invocations:
            spec = container_of(invocation)
            images.setdefault(spec.image, invocation)
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
        client = self.client
        for image, invocation in images.items():
            try:
                client.images.get(image)
            except docker.errors.ImageNotFound:
                raise LaunchError(
                    f"image {image!r} is not in the Docker Engine (exp.docker_image of "
                    f"experiment {invocation.label})",
                    hint=f"pull or build it first (docker pull {image}); dlbs never pulls "
                         "images itself") from None
            except docker.errors.APIError as error:
                raise LaunchError(f"cannot inspect image {image!r}: {error}") from error
        if gpu_invocations:
            self._check_nvidia(gpu_invocations[0])

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
            on_start: OnStart | None = None) -> Outcome:
        """Run the container to its end; see `ProcessTarget.run` and the module doc.

        `on_start` gets the host PID of the container's first process.
        """
        request = sdk_request(invocation)
        if container_of(invocation).launcher == "nvidia-docker":
            return self._run_nvidia_docker(invocation, request, log, timeout, on_start)
        container = self._create(invocation, request)
        details: dict[str, Any] = {"container": container.name, "image": request["image"]}
        try:
            try:
                container.start()
            except docker.errors.APIError as error:
                raise self._start_error(invocation, error) from None
            log.flush()
            pump = threading.Thread(target=_stream_logs, args=(container, log), daemon=True)
            pump.start()
            limit = timeout if timeout and timeout > 0 else None
            try:
                if on_start is not None:
                    pid = self._host_pid(container.name)
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
            return self._outcome(container, result, details)
        finally:
            self._remove(container)

    def _create(self, invocation: Invocation, request: dict[str, Any]) -> Any:
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
            return self.client.containers.create(request["image"], request["command"],
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

    def _host_pid(self, name: str, wait: float = 0.0) -> int | None:
        """The host PID of a running container's first process (waits up to `wait` s)."""
        deadline = time.monotonic() + wait
        while True:
            try:
                state = self.client.api.inspect_container(name).get("State", {})
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
                           on_start: OnStart | None) -> Outcome:
        argv = cli_argv(invocation)
        env = dict(os.environ)
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
                pid = self._host_pid(name, wait=60.0)
                if pid:
                    on_start(pid)  # type: ignore[misc]
            threading.Thread(target=report, daemon=True).start()

        outcome = run_process(argv, env=env, cwd=None, log=log, timeout=timeout,
                              grace=self.kill_grace, cleanup=remove_leftover,
                              on_start=container_started if on_start else None)
        outcome.details["container"] = name
        return outcome
