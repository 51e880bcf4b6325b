r"""Every shell command of the docs runs: the fenced shell blocks of README.md and docs/.

The rules (docs/extending.md, "A command in the docs"):

- A block fenced with ```sh, ```bash, ```shell or ```console holds commands a user runs; each
  block is one test. Its commands run one after another, in one folder of their own, and each
  must exit 0. In a console block only the `$ ` lines are commands (the rest is what they
  print). A `\` at a line's end continues it; `a && b` is two commands. A synopsis with
  placeholders (`[--format json]`, `LOGS...`) or output goes in an unfenced block or ```text.
- The folder holds the repository's examples/, scripts/, python/, configs/, bench/ and .venv/
  (links), and the files the docs name as a user's own: `spec.yaml`, `exp.yaml`, `sweep.yaml`
  (a small sweep of the dummy backend), `resnet50.pt` (random weights of the PyTorch
  backend's ResNet-50), `classes.txt` (1,000 class names), `cat.jpg` (an image), and
  `logs/graph_backends` (a copy of bench/graph_backends' measured logs).
- `bash scripts/<name>.sh ...` (setting the machine up, running this suite: what CI runs
  before this test) is checked with `bash -n`; every other command runs as written, except:
- a `postgresql://` URL is the URL of a fresh store on this run's test database;
- `dlbs serve` gets `--port` of a free port; it passes once it answers, and is stopped then;
- `dlbs run` is first previewed as written (`--dry-run`: the plan, its checks, each
  experiment's exact request), which must pass whatever hardware the sweep is for; then it
  runs with one more extension (`-E`, after the command's own, so that it wins) that puts
  every experiment on this host's CPU with the dummy backend, bare metal, for 2 batches (and
  0.05 s of LoadGen): `exp.framework: dummy`, `exp.gpus: ""`, `exp.docker: false`. The run
  loop, the logs, the store and the commands after it (reports) are then real, and a sweep
  for eight GPUs takes seconds. The frameworks' own runs are the backends' tests, and
  tests/run/test_examples.py runs the README's quickstart as it is;
- a block preceded by `<!-- doc-test: dry-run: WHY -->` (its commands read results that the
  folder holds already: say why) only previews its `dlbs run`s; the others run.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")),
        *sorted((REPO / "docs" / "backends").glob("*.md"))]
SHELLS = ("sh", "bash", "shell", "console")
MARKER = re.compile(r"<!--\s*doc-test:\s*(?P<what>[\w-]+)\s*:\s*(?P<why>.+?)\s*-->")
LINKED = ("examples", "scripts", "python", "configs", "bench", ".venv")
POSTGRES_URL = re.compile(r"postgres(?:ql)?://[^\s'\"]+")
ON_THE_CPU = {"exp.framework": "dummy", "exp.gpus": "", "exp.docker": False,
              "dummy.sleep": 0.001, "exp.num_batches": 2, "exp.num_warmup_batches": 1,
              "exp.min_duration_s": 0.05}
SPEC = ("parameters: {exp.framework: dummy, dummy.sleep: 0.001, exp.num_batches: 2}\n"
        "variables: {exp.model: [resnet50, vgg16], exp.replica_batch: [8, 16]}\n")
TIMEOUT = 300


@dataclass
class Block:
    """A fenced shell block: where it is, its commands, its dry-run marker's reason."""

    path: Path
    line: int
    commands: list[str]
    dry_run: str | None

    @property
    def name(self) -> str:
        return f"{self.path.relative_to(REPO)}:{self.line}"


def shell_blocks(path: Path) -> Iterator[Block]:
    """The fenced shell blocks of a Markdown file."""
    lines = path.read_text().splitlines()
    index = 0
    while index < len(lines):
        fence = re.match(r"^ {0,3}(`{3,}|~{3,})\s*([\w-]*)", lines[index])
        if not fence:
            index += 1
            continue
        end = next((k for k in range(index + 1, len(lines))
                    if lines[k].lstrip().startswith(fence.group(1))), len(lines))
        if fence.group(2) in SHELLS:
            before = next((lines[k] for k in range(index - 1, -1, -1) if lines[k].strip()), "")
            marker = MARKER.search(before)
            if marker and marker.group("what") != "dry-run":
                raise ValueError(f"{path}:{index}: unknown doc-test marker "
                                 f"{marker.group('what')!r} (known: dry-run)")
            yield Block(path, index + 1, commands_of(lines[index + 1:end],
                                                     fence.group(2) == "console"),
                        marker.group("why") if marker else None)
        index = end + 1


def commands_of(lines: list[str], console: bool) -> list[str]:
    """The commands of a block's lines: continuations joined, `&&` split, comments dropped."""
    joined: list[str] = []
    pending = ""
    for raw in lines:
        line = raw.rstrip()
        if not pending:
            if console:
                if not line.lstrip().startswith("$ "):
                    continue
                line = line.lstrip()[2:]
            if not line.strip() or line.lstrip().startswith("#"):
                continue
        if pending:
            line = line.lstrip()
        if line.endswith("\\"):
            pending += line[:-1].rstrip() + " "
            continue
        joined.append(pending + line)
        pending = ""
    commands = []
    for line in joined:
        commands += [part.strip() for part in _split_and(line) if part.strip()]
    return commands


def _split_and(line: str) -> list[str]:
    """`a && b  # c` -> [a, b], where `&&` and `#` are outside quotes."""
    parts, current, quote, index = [], "", None, 0
    while index < len(line):
        char = line[index]
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (not current or current[-1].isspace()):
            break
        elif line.startswith("&&", index):
            parts.append(current)
            current, index = "", index + 2
            continue
        current += char
        index += 1
    return [*parts, current]


BLOCKS = [block for path in DOCS for block in shell_blocks(path)]


def _marks(block: Block) -> list[pytest.MarkDecorator]:
    text = " ".join(block.commands)
    marks = [pytest.mark.slow]
    if POSTGRES_URL.search(text):
        marks.append(pytest.mark.postgres)
    if re.search(r"\bdlbs predict\b", text):
        marks.append(pytest.mark.pytorch)
    return marks


# -- the folder ---------------------------------------------------------------------------------

@pytest.fixture(scope="session")
def weights(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Random weights of the PyTorch backend's ResNet-50 (made once per worker)."""
    path = tmp_path_factory.mktemp("weights") / "resnet50.pt"
    code = ("import sys, torch; sys.path.insert(0, 'python'); "
            "from pytorch_benchmarks.models.registry import get_model_spec; "
            "torch.save(get_model_spec('resnet50').build().state_dict(), sys.argv[1])")
    subprocess.run([sys.executable, "-c", code, str(path)], cwd=REPO, check=True,
                   timeout=TIMEOUT)
    return path


def _workspace(folder: Path, block: Block, request: pytest.FixtureRequest) -> None:
    for name in LINKED:
        (folder / name).symlink_to(REPO / name)
    for name in ("spec.yaml", "exp.yaml", "sweep.yaml"):
        (folder / name).write_text(SPEC)
    (folder / "classes.txt").write_text("".join(f"class {i}\n" for i in range(1000)))
    from PIL import Image

    Image.effect_noise((96, 96), 64).convert("RGB").save(folder / "cat.jpg")
    text = " ".join(block.commands)
    if "resnet50.pt" in text and re.search(r"\bdlbs predict\b", text):
        (folder / "resnet50.pt").symlink_to(request.getfixturevalue("weights"))
    if "logs/graph_backends" in text:
        shutil.copytree(REPO / "bench/graph_backends/results/2026-11-26/logs",
                        folder / "logs" / "graph_backends")


# -- the commands ------------------------------------------------------------------------------

def _run(command: str, folder: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """`bash -c command`; past TIMEOUT, everything it started is stopped and the test fails."""
    process = subprocess.Popen(["bash", "-c", command], cwd=folder, env=env, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               start_new_session=True)
    try:
        out, err = process.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        out, err = process.communicate()
        pytest.fail(f"{command}: still running after {TIMEOUT} s\n{err[-2000:]}")
    return subprocess.CompletedProcess(process.args, process.returncode, out, err)


def _words(command: str) -> list[str]:
    try:
        return shlex.split(command, comments=True)
    except ValueError:
        return []


def _dlbs_command(words: list[str]) -> str | None:
    """`run` for `dlbs run ...` (or `.venv/bin/dlbs run`), else the subcommand or None."""
    if words and os.path.basename(words[0]) == "dlbs" and len(words) > 1:
        return words[1]
    return None


def _extension(parameters: dict[str, object]) -> str:
    return "-E " + shlex.quote(json.dumps({"condition": {}, "parameters": parameters}))


def _serve(command: str, folder: Path, env: dict[str, str]) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(["bash", "-c", f"exec {command} --port {port}"], cwd=folder,
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            assert server.poll() is None, f"{command}: {server.communicate()[1]}"
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10) as page:
                    assert page.status == 200
                    return
            except OSError:
                assert time.monotonic() < deadline, f"{command}: did not answer in 60 s"
                time.sleep(0.2)
    finally:
        server.send_signal(signal.SIGINT)
        try:
            server.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.communicate()


def run_command(command: str, block: Block, folder: Path, env: dict[str, str]) -> None:
    """One command of a block, by the rules of the module doc; fails with what it printed."""
    words = _words(command)
    if words[:1] == ["bash"] and len(words) > 1 and words[1].startswith("scripts/"):
        done = _run(f"bash -n {shlex.quote(words[1])}", folder, env)
        assert done.returncode == 0, f"{block.name}: {command}: {done.stderr}"
        return
    if "postgresql://" in command or "postgres://" in command:
        from tests.results.helpers_results import postgres_store_url

        store = env.setdefault("DOC_TEST_STORE", "")
        if not store:
            store = env["DOC_TEST_STORE"] = _stores.enter(postgres_store_url())
        command = POSTGRES_URL.sub(lambda _: shlex.quote(store), command)
    subcommand = _dlbs_command(words)
    if subcommand == "serve":
        _serve(command, folder, env)
        return
    if subcommand == "run" and "--plan" not in words:
        preview = _run(f"{command} --dry-run --format json", folder, env)
        assert preview.returncode == 0, f"{block.name}: {command} --dry-run: {preview.stderr}"
        if block.dry_run is not None:
            return
        command = f"{command} {_extension(ON_THE_CPU)}"
    done = _run(command, folder, env)
    assert done.returncode == 0, \
        f"{block.name}: {command}: exit {done.returncode}\n{done.stdout[-2000:]}{done.stderr}"


class _Stores:
    """The PostgreSQL stores a test opened, dropped at its end."""

    def __init__(self) -> None:
        self.open: list[object] = []

    def enter(self, manager: object) -> str:
        self.open.append(manager)
        return manager.__enter__()  # type: ignore[attr-defined]

    def close(self) -> None:
        while self.open:
            self.open.pop().__exit__(None, None, None)  # type: ignore[attr-defined]


_stores = _Stores()


@pytest.mark.parametrize("block", [pytest.param(b, id=b.name, marks=_marks(b)) for b in BLOCKS])
def test_the_commands_of_a_block_run(block: Block, tmp_path: Path,
                                     request: pytest.FixtureRequest) -> None:
    _workspace(tmp_path, block, request)
    env = dict(os.environ, PATH=f"{REPO / '.venv' / 'bin'}{os.pathsep}{os.environ['PATH']}")
    env.pop("DOC_TEST_STORE", None)
    try:
        for command in block.commands:
            run_command(command, block, tmp_path, env)
    finally:
        _stores.close()


def test_the_blocks_are_found() -> None:
    """The parser finds the docs' blocks: a fence it missed would be a command never run."""
    fences = sum(len(re.findall(rf"^ {{0,3}}```(?:{'|'.join(SHELLS)})\s*$", path.read_text(),
                                flags=re.MULTILINE)) for path in DOCS)
    assert fences == len(BLOCKS) and all(block.commands for block in BLOCKS)
    assert commands_of(["dlbs run a.yaml \\", "  -P x=1 && dlbs report logs  # said",
                        "# a comment", ""], console=False) == [
        "dlbs run a.yaml -P x=1", "dlbs report logs"]
    assert commands_of(["$ dlbs plan 'a && b'", "output"], console=True) == ["dlbs plan 'a && b'"]
