"""`docker run` flags -> Docker SDK arguments: the translation table (no daemon needed)."""

from __future__ import annotations

import pytest

from dlbs.errors import LaunchError
from dlbs.recipes.docker_args import supported_flags, translate

# DLBS's default exp.docker_args, as users have them in their configs.
DLBS_DEFAULT = ["--rm", "--shm-size=1g", "--ulimit", "memlock=-1", "--ulimit",
                "stack=67108864", "--ipc=host"]

CASES = [
    (DLBS_DEFAULT, {"shm_size": "1g", "ipc_mode": "host", "ulimits": [
        {"Name": "memlock", "Soft": -1, "Hard": -1},
        {"Name": "stack", "Soft": 67108864, "Hard": 67108864}]}),
    (["--shm-size", "512m"], {"shm_size": "512m"}),
    (["--ulimit=nofile=1024:4096"], {"ulimits": [{"Name": "nofile", "Soft": 1024,
                                                  "Hard": 4096}]}),
    (["--ulimit", "core=unlimited"], {"ulimits": [{"Name": "core", "Soft": -1, "Hard": -1}]}),
    (["--ipc", "host", "--pid=host", "--uts=host"],
     {"ipc_mode": "host", "pid_mode": "host", "uts_mode": "host"}),
    (["--security-opt", "seccomp=unconfined", "--security-opt=apparmor=unconfined"],
     {"security_opt": ["seccomp=unconfined", "apparmor=unconfined"]}),
    (["-v", "/data:/workspace/data:ro", "--volume=/a b:/c"],
     {"volumes": ["/data:/workspace/data:ro", "/a b:/c"]}),
    (["-v/x:/y"], {"volumes": ["/x:/y"]}),
    (["--mount", "type=bind,source=/a,target=/b,readonly"],
     {"mounts": [{"Target": "/b", "Source": "/a", "Type": "bind", "ReadOnly": True}]}),
    (["-e", "A=1", "--env=B=two words", "-eC=3", "-e=D=4", "--env", "E="],
     {"environment": {"A": "1", "B": "two words", "C": "3", "D": "4", "E": ""}}),
    (["--network", "host"], {"network_mode": "host"}),
    (["--net=none"], {"network_mode": "none"}),
    (["--cpuset-cpus", "0-3", "--cpuset-mems=0"], {"cpuset_cpus": "0-3", "cpuset_mems": "0"}),
    (["--cpus=1.5", "-m", "4g", "--memory-swap=-1"],
     {"nano_cpus": 1_500_000_000, "mem_limit": "4g", "memswap_limit": -1}),
    (["--user", "1000:1000"], {"user": "1000:1000"}),
    (["-u", "nobody"], {"user": "nobody"}),
    (["--runtime=nvidia"], {"runtime": "nvidia"}),
    (["--privileged"], {"privileged": True}),
    (["--privileged=false"], {}),
    (["--cap-add", "SYS_ADMIN", "--cap-add=IPC_LOCK", "--cap-drop", "NET_RAW"],
     {"cap_add": ["SYS_ADMIN", "IPC_LOCK"], "cap_drop": ["NET_RAW"]}),
    (["--device", "/dev/infiniband/uverbs0", "--device=/dev/fuse"],
     {"devices": ["/dev/infiniband/uverbs0", "/dev/fuse"]}),
    (["--entrypoint", "/bin/bash"], {"entrypoint": ["/bin/bash"]}),
    (["--workdir", "/workspace"], {"working_dir": "/workspace"}),
    (["-w", "/w"], {"working_dir": "/w"}),
    (["--name", "bench-1"], {"name": "bench-1"}),
    (["-it"], {}),
    (["-i", "-t", "--interactive", "--tty", "-d"], {}),
    (["--label", "team=ml", "-l", "run=7"], {"labels": {"team": "ml", "run": "7"}}),
    (["--gpus", "all"], {"device_requests": [{"Driver": "nvidia", "Capabilities": [["gpu"]],
                                              "Count": -1}]}),
    (["--gpus", '"device=0,2"'], {"device_requests": [
        {"Driver": "nvidia", "Capabilities": [["gpu"]], "DeviceIDs": ["0", "2"]}]}),
    (["--init", "--read-only", "--tmpfs", "/tmp:size=64m", "--sysctl", "net.core.somaxconn=1024"],
     {"init": True, "read_only": True, "tmpfs": {"/tmp": "size=64m"},
      "sysctls": {"net.core.somaxconn": "1024"}}),
    (["--add-host", "master:10.0.0.1", "--dns=8.8.8.8", "--hostname", "bench"],
     {"extra_hosts": {"master": "10.0.0.1"}, "dns": ["8.8.8.8"], "hostname": "bench"}),
    ([], {}),
]


@pytest.mark.parametrize(("tokens", "expected"), CASES, ids=lambda v: " ".join(v)
                         if isinstance(v, list) else None)
def test_flags_translate_to_sdk_arguments(tokens, expected):
    assert translate(tokens).kwargs == expected


def test_ignored_flags_say_why():
    ignored = translate(["--rm", "-it"]).ignored
    assert [reason.split(":")[0] for reason in ignored] == ["--rm", "-i", "-t"]
    assert all(len(reason) > 10 for reason in ignored)


def test_env_without_value_passes_the_host_value(monkeypatch):
    monkeypatch.setenv("DLBS_PASSED", "host value")
    monkeypatch.delenv("DLBS_NOT_SET", raising=False)
    assert translate(["-e", "DLBS_PASSED", "-e", "DLBS_NOT_SET"]).kwargs == {
        "environment": {"DLBS_PASSED": "host value"}}


def test_env_file_is_read(tmp_path):
    env_file = tmp_path / "bench.env"
    env_file.write_text("# comment\nA=1\n\nB=x y\n")
    assert translate([f"--env-file={env_file}"]).kwargs == {"environment": {"A": "1",
                                                                            "B": "x y"}}


@pytest.mark.parametrize(("tokens", "message"), [
    (["--no-such-flag"], "unknown docker run flag '--no-such-flag'"),
    (["--no-such-flag=1"], "unknown docker run flag '--no-such-flag'"),
    (["-itz"], "unknown docker run flag '-z (in -itz)'"),
    (["-Q"], "unknown docker run flag '-Q'"),
    (["--shm-size"], "--shm-size needs a value"),
    (["-v"], "-v needs a value"),
    (["--shm-size=lots"], "bad value 'lots' for --shm-size: expected a size"),
    (["--ulimit", "memlock"], "bad value 'memlock' for --ulimit"),
    (["--cpus=many"], "bad value 'many' for --cpus"),
    (["--gpus", "some"], "bad value 'some' for --gpus"),
    (["nvcr.io/nvidia/pytorch:24.01"], "unexpected argument 'nvcr.io/nvidia/pytorch:24.01'"),
])
def test_bad_arguments_are_errors_naming_the_flag(tokens, message):
    with pytest.raises(LaunchError) as caught:
        translate(tokens, where="exp.docker_args of experiment e1")
    assert caught.value.message.startswith("exp.docker_args of experiment e1: ")
    assert message in caught.value.message


def test_an_unknown_flag_hint_lists_the_supported_ones():
    with pytest.raises(LaunchError) as caught:
        translate(["--oops"])
    assert "--shm-size" in caught.value.hint and "--ulimit" in caught.value.hint
    assert "--rm" in supported_flags()
