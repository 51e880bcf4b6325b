"""What the fuzz suite feeds dlbs, and the contract each answer must keep (docs/security.md).

Each target takes what hypothesis draws and either succeeds or raises a `DlbsError` whose
message and hint are one line each. Any other exception is a bug: the harness
(`harness.py`) reports it with the input that caused it. Hangs and unbounded allocations
are caught by the harness too (a watchdog per example, a cap on the process's memory).

Targets: `spec` (spec files, YAML and JSON, with includes), `expression` (`$( ... )$`),
`plan` (plan files of `dlbs run --plan`), `log` (the `__key__=json` protocol and the
writers of `dlbs parse`), `cli` (argument vectors of the reading and planning commands),
`trace_path` (`exp.trace_file` values: contained, never shared, never written over a file
that is not a trace, and a container's mount of a system folder said), `database` (other
names of a results database: no name bypasses its run lock), and the two trust boundaries
of docs/security.md: `store_row` (a row of a results store, as any writer of the store could
write it, through every reader: parse, copy, reports, history, trace, serve's experiment
page; serve never shows a file but the attempt's own) and `backend_output` (what a
benchmark prints after its log's header, through the run's judge, parse and copy: it never
relabels what the planner decided).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import posixpath
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
from hypothesis import strategies as st

from dlbs.errors import DlbsError

# -- the contract ------------------------------------------------------------------------------


def one_line(error: DlbsError) -> None:
    """A DlbsError is what the CLI prints: one message line, at most one hint line."""
    assert error.message and "\n" not in error.message, repr(error.message[:300])
    assert error.hint is None or "\n" not in error.hint, repr(error.hint[:300])
    assert len(error.message) < 20_000, f"a message of {len(error.message)} characters"


def plain(experiment: dict[str, Any]) -> None:
    """What the planner hands on is plain data that orjson writes (64-bit ints, no NaN)."""
    orjson.dumps(experiment)


# -- vocabularies ------------------------------------------------------------------------------
NAMES = st.sampled_from(["a", "b", "x.y", "exp.model", "exp.replica_batch", "exp.id",
                         "exp.log_file", "exp.log_dir", "exp.gpus", "exp.framework",
                         "sys.max_experiments", "my param", "é", "a..b", "__condition.a_0",
                         "runtime.env.X", "exp.docker_args", "exp.timeout"])
HOSTILE_TEXT = st.sampled_from([
    "", "\x00", "\udcff", "../../x", "/dev/null", "a" * 300, "${a}", "${a}${a}${a}${a}",
    "$(1+1)$", "$(10**5000)$", "$(sum(range(10**12)))$", "$('a'.ljust(10**9))$",
    "$(math.factorial(10**8))$", "$('%1000000000d' % 1)$", "$(4000000**4000000)$",
    "$(re.match('(a|aa)+$', 'a'*28+'b'))$", "$([0]*10**6)$", "$({1,2})$", "$({1: 2})$",
    "$(float('nan'))$", "$(2**70)$", "$(${a})$", "${${a}.b}", "$<a>", "$$(", "${", "$(",
    "$(''.join(['x'] * 99999))$", "$([[1]*1000 for _ in range(1000)])$", "-1", "1e400",
])
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True),
                    st.text(max_size=20), HOSTILE_TEXT)
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=5), inner, max_size=3)),
    max_leaves=10)


# -- spec files --------------------------------------------------------------------------------
def _yaml(document: Any) -> str:
    from ruamel.yaml import YAML

    yaml = YAML(typ="safe", pure=True)
    stream = io.StringIO()
    yaml.dump(document, stream)
    return stream.getvalue()


BOMBS = st.one_of(
    st.builds(lambda depth: "parameters: {a: " + "[" * depth + "]" * depth + "}\n",
              st.integers(0, 100_000)),
    st.builds(lambda depth: '{"parameters": {"a": ' + "[" * depth + "]" * depth + "}}",
              st.integers(0, 100_000)),
    st.builds(lambda width, depth: "parameters:\n  l0: &l0 [" + ",".join(["x"] * width) + "]\n"
              + "".join(f"  l{i}: &l{i} [" + ",".join([f"*l{i - 1}"] * width) + "]\n"
                        for i in range(1, depth)),
              st.integers(1, 12), st.integers(1, 12)),
    st.just("parameters:\n  a: &a [*a]\n"),
    st.builds(lambda digits: "parameters: {a: " + "9" * digits + "}\n", st.integers(1, 6000)),
    st.just("include: [/dev/zero]\n"),
    st.just("include: [fifo.yaml]\n"),
    st.just("include: [self.yaml]\n"),
    st.just("parameters: {a: !!python/object:os.system x}\n"),
    st.just("parameters: {a: !!binary aGVsbG8=, b: 2001-12-14t21:59:43.10-05:00}\n"),
    st.just("? [a, b]\n: c\n"),
)


@st.composite
def spec_files(draw: st.DrawFn) -> tuple[str, bytes]:
    """(file name, content): a structured spec dumped as YAML or JSON, or a known bomb."""
    kind = draw(st.sampled_from(["yaml", "json", "bomb", "bytes"]))
    if kind == "bomb":
        text = draw(BOMBS)
        return "s.json" if text.startswith("{") else "s.yaml", text.encode()
    if kind == "bytes":
        return draw(st.sampled_from(["s.yaml", "s.json", "s.yml", "s.txt"])), \
            draw(st.binary(max_size=200))
    document = {
        "parameters": draw(st.dictionaries(NAMES, VALUES, max_size=6)),
        "variables": draw(st.dictionaries(NAMES, st.lists(SCALARS, max_size=4), max_size=3)),
        "extensions": draw(st.lists(st.fixed_dictionaries(
            {"condition": st.dictionaries(NAMES, st.one_of(SCALARS, st.sampled_from(
                ["(a|aa)+", ".*", "(", "(?P<x>a)"])), max_size=2)},
            optional={"parameters": st.dictionaries(NAMES, VALUES, max_size=2),
                      "cases": st.lists(st.dictionaries(NAMES, SCALARS, max_size=2),
                                        max_size=3),
                      "error": st.text(max_size=10)}), max_size=2)),
    }
    if kind == "json":
        return "s.json", json.dumps(document, default=str).encode("utf-8", "surrogatepass")
    try:
        return "s.yaml", _yaml(document).encode("utf-8", "surrogatepass")
    except Exception:  # noqa: BLE001 - a document YAML cannot write: send it as JSON
        return "s.json", json.dumps(document, default=str).encode("utf-8", "surrogatepass")


def spec(case: tuple[str, bytes]) -> None:
    """Load and plan a spec file (no default configs: fast), with a fifo and a self-include."""
    from dlbs.config.loader import load_spec
    from dlbs.plan.builder import Planner

    name, content = case
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / name
        path.write_bytes(content)
        os.mkfifo(Path(folder) / "fifo.yaml")
        (Path(folder) / "self.yaml").write_text("include: [self.yaml]\n")
        try:
            loaded = load_spec(path, defaults=False, params=["sys.max_experiments=200"])
            for experiment in Planner(loaded, {"HOME": "/h"}).experiments():
                plain(experiment)
        except DlbsError as error:
            one_line(error)


# -- expressions -------------------------------------------------------------------------------
TOKENS = st.sampled_from([
    "1", "0", "-1", "10", "10**9", "2**64", "9**9**9", "1e308", "0.5", "'a'", "'%d'", "''",
    "'(a|aa)+$'", "'a'*40", "[1, 2]", "[0]", "{}", "{'k': 1}", "(1,)", "{1}", "True", "null",
    "range(", "sum(", "len(", "str(", "int(", "float(", "sorted(", "list(", "dict(", "min(",
    "max(", "round(", "abs(", "any(", "math.factorial(", "math.comb(", "math.prod(",
    "math.pow(", "math.isqrt(", "math.lcm(", "math.ldexp(", "math.gcd(", "-10**18", "re.match(",
    "re.sub(", "re.split(", "re.findall(", "os.path.join(", ".ljust(", ".zfill(", ".join(",
    ".replace(", ".center(", ".split(", ".upper()", ".expandtabs(", ".append(", ".count(",
    ".group(", "__class__", "+", "-", "*", "**", "%", "<<", ">>", "//", "/", "==", "<", "in",
    "and", "or", "not", "if", "else", "for", "x", "in", "(", ")", "[", "]", ",", ":", " ",
    "f'{", "}'", "lambda", "import", ";", "=", ":=",
])


@st.composite
def expressions(draw: st.DrawFn) -> str:
    return "".join(draw(st.lists(TOKENS, min_size=1, max_size=14)))


def expression(text: str) -> None:
    from dlbs.config.evaluator import SafeEvaluator
    from dlbs.config.values import check_plain

    try:
        check_plain(SafeEvaluator().evaluate(text))
    except DlbsError as error:
        one_line(error)


# -- plan files --------------------------------------------------------------------------------
_PLAN: list[dict[str, Any]] = []


def _valid_plan() -> list[dict[str, Any]]:
    if not _PLAN:
        from dlbs.config.loader import load_spec
        from dlbs.plan.builder import Planner

        defaults = load_spec(None, params=["exp.framework=dummy"],
                             variables=["exp.replica_batch=[1,2]"])
        _PLAN.extend(Planner(defaults).experiments())
    return [dict(experiment) for experiment in _PLAN]


@st.composite
def plan_files(draw: st.DrawFn) -> bytes:
    experiments: list[Any] = _valid_plan()
    for _ in range(draw(st.integers(0, 4))):
        target = draw(st.integers(0, len(experiments) - 1))
        if isinstance(experiments[target], dict):
            experiments[target][draw(NAMES)] = draw(VALUES)
    if draw(st.booleans()):
        experiments.append(draw(VALUES))
    text = json.dumps(experiments, default=str).encode("utf-8", "surrogatepass")
    mutation = draw(st.sampled_from(["none", "jsonl", "truncate", "bytes", "deep"]))
    if mutation == "jsonl":
        return b"\n".join(json.dumps(e, default=str).encode("utf-8", "surrogatepass")
                          for e in experiments)
    if mutation == "truncate":
        return text[:draw(st.integers(0, len(text)))]
    if mutation == "bytes":
        return draw(st.binary(max_size=300))
    if mutation == "deep":
        depth = draw(st.integers(0, 100_000))
        return b'[{"x": ' + b"[" * depth + b"]" * depth + b"}]"
    return text


def plan(data: bytes) -> None:
    from dlbs.config.loader import load_spec
    from dlbs.plan.plan_file import parse_plan, validate_plan

    global _DEFAULTS
    if _DEFAULTS is None:
        _DEFAULTS = load_spec(None)
    try:
        for experiment in validate_plan(parse_plan(data, "plan.json"), "plan.json", _DEFAULTS):
            plain(experiment)
    except DlbsError as error:
        one_line(error)


_DEFAULTS: Any = None


# -- logs --------------------------------------------------------------------------------------
PROTOCOL_VALUES = st.one_of(
    VALUES.map(lambda v: json.dumps(v, default=str)),
    st.sampled_from(["1e308", "1e400", "-1e400", "NaN", "Infinity", str(10**30), str(-10**30),
                     "12.5.3", '"\\ud800"', '"\\u0000"', "{", "[" * 3000, "tru"]),
    st.builds(lambda depth: "[" * depth + "]" * depth, st.integers(0, 200_000)),
    st.text(max_size=20),
)
LOG_LINES = st.one_of(
    st.builds(lambda prefix, key, value: f"{prefix}__{key}__={value}", st.sampled_from(
        ["", "0: ", "[default0]:", "[1,0]<stdout>:", "  ", "\r"]), st.sampled_from(
        ["exp.id", "exp.model", "results.status", "results.time", "results.throughput",
         "results.batch_times", "results.big", "exp.replica_batch", "a__b", "x"]),
        PROTOCOL_VALUES),
    st.text(max_size=40),
)


@st.composite
def logs(draw: st.DrawFn) -> bytes:
    lines = draw(st.lists(LOG_LINES, max_size=12))
    data = "\n".join(lines).encode("utf-8", "surrogatepass")
    if draw(st.booleans()):
        data += draw(st.binary(max_size=50))
    return data


def log(data: bytes) -> None:
    from dlbs.results.output import experiments_to_csv, to_json
    from dlbs.results.protocol import experiment_from_log, parse_lines
    from dlbs.results.sources import with_engine_values

    try:
        parsed = parse_lines(data.splitlines(keepends=True), path="a.log")
        experiment = with_engine_values(experiment_from_log(parsed), _FULL()).experiment
        json.loads(to_json({"experiments": [experiment]}))
        experiments_to_csv([experiment])
    except DlbsError as error:
        one_line(error)


def _FULL() -> Any:  # noqa: N802 - the Detail the parse command uses
    from dlbs.results.sources import FULL

    return FULL


# -- trace file paths -------------------------------------------------------------------------
TRACE_PARTS = st.sampled_from(["..", ".", "", "logs", "a", "${exp.id}", "${exp.log_dir}",
                               "${exp.model}", "/etc", "/", "x" * 250, "results.db",
                               ".dlbs-run.lock", "t.trace.json.gz", "a.log", "\x00", "é"])
TRACE_PATHS = st.one_of(
    st.sampled_from(["", "t.trace.json.gz", "/etc/x.trace.json.gz", "${exp.log_dir}/../../x",
                     "../x", "logs/../x", "logs/./a//b.gz", "${exp.log_file}", "/dev/null",
                     "${exp.log_dir}/results.db", "${exp.log_dir}/.dlbs-run.lock", "/", "a/",
                     "/tmp/../etc/passwd", "/proc/self/x", "/var/run/docker.sock", "..",
                     "${exp.log_dir}/${exp.model}.log", "$('${exp.log_file}'[:-4])$.gz",
                     "/etc/ssh/x.gz", "/var/tmp/x.gz", "${exp.log_dir}/x/../../y"]),
    st.lists(TRACE_PARTS, min_size=1, max_size=6).map("/".join))
TRACE_CASES = st.tuples(TRACE_PATHS, st.sampled_from(["logs", "/tmp/dlbs-fuzz", "a/../b", "."]),
                        st.booleans(), st.sampled_from([[1], [1, 2]]))


def trace_path(case: tuple[str, str, bool, list[int]]) -> None:
    """Plan and check a sweep with the drawn `exp.trace_file`; then the run's own checks."""
    from dlbs.plan.builder import Planner
    from dlbs.plan.checks import check_plan, written_files
    from dlbs.recipes.host_access import HostAccessWatch
    from dlbs.run.logs import trace_place_problem

    trace_file, log_dir, docker, batches = case
    try:
        spec = _spec(("exp.framework=dummy", "exp.trace_level=step",
                      f"exp.trace_file={trace_file}", f"exp.log_dir={log_dir}",
                      f"exp.docker={str(docker).lower()}"), (f"exp.replica_batch={batches}",))
        planner = Planner(spec)
        watch = HostAccessWatch()
        experiments = list(watch.watch(planner.experiments()))
        report = check_plan(planner, experiments)
    except DlbsError as error:
        one_line(error)
        return
    seen: dict[str, str] = {}
    for experiment in experiments:
        plain(experiment)
        for name, path in written_files(experiment):
            assert path == posixpath.normpath(path), (name, path)
            if ".." in path.split("/"):  # only where it stays in the log folder
                base = os.path.abspath(experiment["exp.log_dir"])
                assert os.path.abspath(path).startswith(base + os.sep), (name, path)
            if name != "runtime.results_db":
                key = os.path.abspath(path)
                assert key not in seen or report.problems, (seen.get(key), name, path)
                seen[key] = name
        trace = experiment["exp.trace_file"]
        if docker and trace and os.path.dirname(os.path.abspath(trace)).startswith(
                ("/etc", "/proc", "/dev", "/usr", "/var/run")):
            assert any(text.startswith("exp.trace_file: a writable mount of /")
                       for text in watch.warnings()), (trace, watch.warnings())
    with tempfile.TemporaryDirectory() as folder:
        # The run refuses a trace path where another file is: a log of another experiment.
        other = Path(folder, "other.log")
        other.write_text("__results.time__=1.0\n")
        assert trace_place_problem(str(other)), "a log was taken for a trace"
        assert trace_place_problem(folder), "a folder was taken for a trace"



def _spec(params: tuple[str, ...], variables: tuple[str, ...]) -> Any:
    """The default configs (read once: YAML parsing is slow) with these overrides."""
    import copy

    from dlbs.config.loader import SpecBuilder, load_spec

    global _DEFAULT_SPEC
    if _DEFAULT_SPEC is None:
        _DEFAULT_SPEC = load_spec(None)
    builder = SpecBuilder()
    builder.spec = copy.deepcopy(_DEFAULT_SPEC)
    builder.add_cli(params, variables, ())
    return builder.spec


_DEFAULT_SPEC: Any = None


# -- the command line --------------------------------------------------------------------------
OPTIONS = st.sampled_from([
    "-P", "-V", "-E", "--no-defaults", "--format", "--keys", "-o", "--config", "json", "jsonl",
    "table", "csv", "html", "text", "exp.framework=dummy", "exp.model=$(10**5000)$",
    "exp.replica_batch=[1,2]", "my param=1", "exp.id=../x", "exp.log_dir=", "{}", "[1]",
    '{"condition": {"a": "(a|aa)+"}}', "a.log", "missing.log", "results.db", "fifo.log",
    "plan.json", "/dev/null", "/dev/full", "out", ".", "--params", "--text", "(", "exp.*",
    "--type", "weak", "--by", "exp.model", "--filter", "exp.model=*", "--latest", "models",
    "frameworks", "targets", "--dry-run", "--plan", "--debug-no",
])
COMMANDS = st.sampled_from(["plan", "validate", "print-config", "help", "list", "parse",
                            "report", "compare", "run"])


@st.composite
def argvs(draw: st.DrawFn) -> list[str]:
    command = draw(COMMANDS)
    argv = [command, *draw(st.lists(OPTIONS, max_size=8))]
    if command == "run" and "--dry-run" not in argv:
        argv.append("--dry-run")  # the fuzz suite plans and previews; it never runs a benchmark
    return argv


def cli(argv: list[str]) -> None:
    """`dlbs ARGV` in-process in a scratch folder: any exit status, never an exception."""
    from dlbs.cli.main import main

    with tempfile.TemporaryDirectory() as folder:
        here = os.getcwd()
        os.chdir(folder)
        try:
            Path("a.log").write_text('__exp.id__="a"\n__results.status__="ok"\n'
                                     '__results.time__=1.0\n__exp.model__="m"\n')
            Path("results.db").write_bytes(b"SQLite format 3\x00" + b"\x00" * 100)
            os.mkfifo("fifo.log")
            Path("plan.json").write_text("[]")
            stdout = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
            stderr = io.StringIO()
            with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
                try:
                    status = main(argv)
                except SystemExit as exit_:  # argparse's usage errors
                    status = exit_.code
            assert isinstance(status, int), status
            assert "Traceback" not in stderr.getvalue(), stderr.getvalue()[-2000:]
            errors = [line for line in stderr.getvalue().splitlines()
                      if line.startswith("dlbs: error:")]
            assert len(errors) <= 1, errors
        finally:
            os.chdir(here)


# -- the identity of a results database ----------------------------------------------------------
PARTS = st.sampled_from(["a", "b", "results.db", "x y", "é", ".hidden", "-d", "a" * 120, "c"])
ALIASES = st.sampled_from(["symlink", "relative symlink", "hard link", "folder symlink",
                           "dot-dot", "dot", "double slash", "chain", "loop", "dangling"])


@st.composite
def database_layouts(draw: st.DrawFn) -> tuple[list[str], str, bool, list[tuple[str, int, str]]]:
    """(folders of the database, its name, whether it exists, aliases: (kind, n, name))."""
    folders = draw(st.lists(PARTS, max_size=3))
    aliases = draw(st.lists(st.tuples(ALIASES, st.integers(0, 5), PARTS), max_size=6))
    return folders, draw(PARTS), draw(st.booleans()), aliases


def _alias(root: Path, database: Path, made: list[Path], kind: str, number: int,
           name: str) -> Path | None:
    """Another name of `database` in a folder of its own (None: a name of something else)."""
    place = root / f"alias{len(list(root.glob('alias*')))}"
    place.mkdir()
    link = place / name
    if kind == "symlink":
        link.symlink_to(database)
    elif kind == "relative symlink":
        link.symlink_to(os.path.relpath(database, place))
    elif kind == "hard link":
        if not database.exists():
            return None
        os.link(database, link)
    elif kind == "folder symlink":
        folders = [database.parent, *database.parent.parents]
        folder = folders[min(number, len(folders) - 1)]
        link.symlink_to(folder)
        return link / database.relative_to(folder)
    elif kind == "dot-dot":
        return place / ".." / database.relative_to(root)
    elif kind == "dot":
        return Path(f"{database.parent}/./{database.name}")
    elif kind == "double slash":
        return Path(f"{database.parent}//{database.name}")
    elif kind == "chain" and made:
        link.symlink_to(made[number % len(made)])
    elif kind == "loop":
        link.symlink_to(place / "loop")
        (place / "loop").symlink_to(link)
        return None
    else:  # dangling, or a chain with nothing before it
        link.symlink_to(place / "nothing")
        return None
    return link


def database(case: tuple[list[str], str, bool, list[tuple[str, int, str]]]) -> None:
    """No other name of a results database gets a run lock while one run holds it.

    Nor while it has other hard links (no run gets it then); a different database, given
    the same name elsewhere, is never locked by it. Every refusal is one line.
    """
    from dlbs.results.sqlite_store import DatabaseLock

    folders, name, exists, aliases = case
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        database = root.joinpath("db", *folders, name)
        database.parent.mkdir(parents=True, exist_ok=True)
        if exists:
            database.write_bytes(b"")
        names: list[Path] = []
        for kind, number, alias_name in aliases:
            alias = _alias(root, database, names, kind, number, alias_name)
            if alias is not None:
                names.append(alias)
        holder = DatabaseLock(database)
        try:
            holder.acquire()
        except DlbsError as error:  # a hard link made it two names: nobody gets it
            one_line(error)
            assert "hard link" in error.message, error.message
        other = DatabaseLock(root.joinpath("other", *folders, name))
        other.acquire()  # the same name elsewhere is another database
        other.release()
        try:
            for alias in names:
                lock = DatabaseLock(alias)
                try:
                    lock.acquire()
                except DlbsError as error:
                    one_line(error)
                    continue
                lock.release()
                raise AssertionError(f"{alias} bypassed the lock of {database}")
        finally:
            holder.release()


# -- a store row, as any writer of the store could write it ------------------------------------
SECRET = "s3cret-that-no-page-shows"
ROW_TEXTS = st.one_of(
    st.dictionaries(st.sampled_from(["exp.model", "exp.replica_batch", "exp.id", "results.time",
                                     "results.time_data", "results.end_time", "env.x",
                                     "exp.model_title", "results.trace_file", "host",
                                     "results.use.cpu", "results.use.time", "k"]),
                    VALUES, max_size=6).map(lambda value: json.dumps(value, default=str)),
    VALUES.map(lambda value: json.dumps(value, default=str)),
    st.sampled_from(["", "not json", "{", "null", "[]", '"x"', "1e999", "NaN", "{}"]),
    st.none())
ROW_PATHS = st.one_of(
    st.sampled_from(["{secret}", "{folder}/own.log", "{folder}/other.log", "{folder}/link.log",
                     "{folder}/pipe.log", "{folder}", "own.log", "logs/own.log", "../secret",
                     "/", "/dev/zero", "/proc/self/environ", "", "{folder}/../secret",
                     "{folder}/own.trace.json.gz"]),
    st.none(), st.integers(-3, 3), st.binary(max_size=4), st.text(max_size=12))
ROW_FOLDERS = st.one_of(st.sampled_from(["{folder}", "{home}", "/", "logs", "", "{folder}/"]),
                        st.none(), st.text(max_size=8))
ROW_CASES = st.fixed_dictionaries({
    "params": ROW_TEXTS, "results": ROW_TEXTS, "environment": ROW_TEXTS, "summary": ROW_TEXTS,
    "log_path": ROW_PATHS, "run_folder": ROW_FOLDERS,
    "exp_id": st.one_of(st.sampled_from(["e1", "e2", "", "../x"]), st.integers(0, 2),
                        st.binary(max_size=2)),
    "attempt": st.one_of(st.integers(-1, 3), st.sampled_from(["x", "1", 1.5])),
    "status": st.sampled_from([None, "ok", "failure", "timeout"]),
    "started_at": st.one_of(st.sampled_from(["2026-01-01T00:00:00+00:00", "", "x"]),
                            st.binary(max_size=2)),
    "report_row": st.one_of(st.none(), st.binary(max_size=200)),
    "param_codes": st.one_of(st.none(), st.binary(max_size=40)),
})
_ROW_PLACE: dict[str, Any] = {}


def _row_place() -> dict[str, Any]:
    """A store with two healthy attempts and the files around them, made once per process."""
    if not _ROW_PLACE:
        from dlbs.results.store import Attempt, open_store

        root = Path(tempfile.mkdtemp(prefix="dlbs-fuzz-rows-"))
        folder, home = root / "logs", root / "home"
        folder.mkdir()
        home.mkdir()
        # A secret that even starts like a log of dlbs (of another experiment).
        (home / ".pgpass").write_text(f"# dlbs 0.1.0: experiment e2, attempt 1\n{SECRET}\n")
        for name in ("own", "other"):
            exp_id = "e1" if name == "own" else "e2"
            (folder / f"{name}.log").write_text(
                f"# dlbs 0.1.0: experiment {exp_id}, attempt 1, started t\n"
                f'__exp.id__="{exp_id}"\n# dlbs: the run\'s output follows\nok\n')
        (folder / "link.log").symlink_to(home / ".pgpass")
        os.mkfifo(folder / "pipe.log")
        database = root / "template.db"
        end = "2026-01-01T00:00:30+00:00"
        with open_store(database) as store:
            store.record_attempts([Attempt(
                exp_id, 1, "ok", None, {"exp.model": "m", "exp.replica_batch": batch},
                {"results.time_data": [1.0, 2.0], "results.end_time": end},
                str(folder / f"{name}.log"), {"host": "h"}, None,
                "2026-01-01T00:00:00+00:00", end, run_tag="t", run_host="h",
                run_folder=str(folder)) for exp_id, name, batch in
                (("e1", "own", 2), ("e2", "other", 4))])
        _ROW_PLACE.update(root=root, folder=folder, home=home, template=database.read_bytes())
    return _ROW_PLACE


def _placed(value: Any, place: dict[str, Any]) -> Any:
    """A drawn path with its places filled in ({secret}, {folder}, {home})."""
    if isinstance(value, str):
        for name, path in (("{secret}", place["home"] / ".pgpass"),
                           ("{folder}", place["folder"]), ("{home}", place["home"])):
            value = value.replace(name, str(path))
    return value


def store_row(case: dict[str, Any]) -> None:
    """Every reader of a store whose first row is `case` (see the module).

    One-line errors only, and no page shows a file other than the attempt's own (the secret
    beside the run folder above all).
    """
    import sqlite3

    from dlbs.cli.main import main

    place = _row_place()
    database = place["root"] / "store.db"
    database.write_bytes(place["template"])
    for suffix in ("-wal", "-shm"):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(f"{database}{suffix}")
    values = {key: _placed(value, place) if key in ("log_path", "run_folder") else value
              for key, value in case.items()}
    try:
        with contextlib.closing(sqlite3.connect(database)) as conn, conn:
            conn.execute(f"UPDATE attempts SET {', '.join(f'{k} = ?' for k in values)}, "
                         "ended_at = CASE WHEN ? IS NULL THEN NULL ELSE started_at END "
                         "WHERE exp_id = 'e1'", (*values.values(), values["status"]))
    except (sqlite3.Error, UnicodeEncodeError):
        return   # a row the schema's checks (or SQLite's text) refuse: no writer can store it
    copy = place["root"] / "copy.db"
    with contextlib.suppress(FileNotFoundError):
        copy.unlink()
    location = str(database)
    for argv in (["parse", location], ["report", location, "--format", "json"],
                 ["report", location, "--format", "html"], ["history", location],
                 ["results", "copy", location, str(copy)], ["trace", location, "--id", "e1"],
                 ["parse", str(place["folder"])]):
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            status = main(argv)
        if status != 0:
            lines = err.getvalue().strip().splitlines()
            assert status in (1, 2) and lines and lines[0].startswith("dlbs: error: "), (
                argv, err.getvalue())
            assert len(lines) <= 2 and "Traceback" not in err.getvalue(), (argv, lines)
    _serve_shows_only_its_own(location, place)


def _serve_shows_only_its_own(location: str, place: dict[str, Any]) -> None:
    from dlbs.results.store import open_store
    from dlbs.web.app import _experiment_details

    try:
        with open_store(location, read_only=True) as store:
            attempts = store.attempts("e1")
    except DlbsError as error:
        one_line(error)
        return
    for attempt in attempts:
        details = _experiment_details(attempt, str(place["root"]))
        shown = f"{details.get('log_text')}{details.get('trace_text')}"
        assert SECRET not in shown, attempt
        if details.get("log_text") is not None:
            assert details["log_text"].startswith("# dlbs 0.1.0: experiment e1,"), attempt


# -- what a benchmark prints -------------------------------------------------------------------
PLANNED = {"exp.id": "e1", "exp.model": "resnet18", "exp.replica_batch": 2,
           "exp.log_file": "logs/e1.log", "exp.trace_file": "logs/e1.trace.json.gz",
           "exp.trace_level": "step", "runtime.results_db": "logs/results.db",
           "exp.num_gpus": 1, "exp.model_title": ""}
OUTPUT_KEYS = st.sampled_from([*PLANNED, "results.time", "results.status", "results.end_time",
                               "results.trace_file", "results.use.cpu", "results.log_file",
                               "results.attempt", "exp.model_title", "exp.framework_ver",
                               "dlbs.verdict", "job.monitor.n1", "job.environment.n1",
                               "predict.result", "progress", "user.axis", "results.x"])
OUTPUT_LINES = st.one_of(
    st.builds(lambda prefix, key, value: f"{prefix}__{key}__={value}",
              st.sampled_from(["", "0: ", "[rank0]:", "\r"]), OUTPUT_KEYS, PROTOCOL_VALUES),
    st.sampled_from(["# dlbs: the run's output follows", "# dlbs 9: experiment e2, attempt 1",
                     '__dlbs.verdict__={"status": "ok"}', '__dlbs.verdict__={"status": "x"}',
                     "__results.trace_file__=\"/abs/logs/e1.trace.json.gz\"",
                     "__results.trace_file__=\"/root/.pgpass\"", "__results.time__=5"]),
    st.text(max_size=30))


@st.composite
def backend_outputs(draw: st.DrawFn) -> tuple[bool, bytes]:
    """(whether the log's header ends with its own line, the output after it)."""
    lines = draw(st.lists(OUTPUT_LINES, max_size=12))
    data = "\n".join(lines).encode("utf-8", "surrogatepass")
    if draw(st.booleans()):
        data += draw(st.binary(max_size=30))
    return draw(st.booleans()), data


def backend_output(case: tuple[bool, bytes]) -> None:
    """A log of dlbs with any output after its header: the planner's values stay."""
    from dlbs.results.protocol import (
        HEADER_END,
        backend_owns,
        experiment_from_log,
        parse_lines,
        protocol_line,
    )
    from dlbs.results.sources import with_engine_values
    from dlbs.run.judge import judge
    from dlbs.run.outcome import Outcome

    closed, output = case
    header = ["# dlbs 0.1.0: experiment e1, attempt 1, started t",
              *(protocol_line(key, value) for key, value in PLANNED.items())]
    if closed:
        header.append(HEADER_END)
    data = ("\n".join(header) + "\n").encode() + output
    parsed = parse_lines(data.splitlines(keepends=True), path="/abs/logs/e1.log")
    if not closed and parsed.header != PLANNED:
        return   # an older header glued to output that reads as parameters: best effort
    assert parsed.header == PLANNED, parsed.header
    experiment = experiment_from_log(parsed)
    for key, value in PLANNED.items():
        if key not in ("exp.model_title",):
            assert experiment[key] == value, (key, experiment.get(key))
    trace = experiment.get("results.trace_file")
    assert trace in (None, "/abs/logs/e1.trace.json.gz"), trace
    verdict = judge(Outcome("ok"), parsed.printed, PLANNED, "/abs")
    assert all(backend_owns(key) for key in verdict.results), verdict.results
    assert verdict.results.get("results.trace_file") in (None, "/abs/logs/e1.trace.json.gz")
    record = with_engine_values(experiment, _FULL())
    json.loads(__import__("dlbs.results.output", fromlist=["to_json"]).to_json(
        {"experiments": [record.experiment]}))


TARGETS: dict[str, tuple[Callable[[Any], None], st.SearchStrategy[Any]]] = {
    "spec": (spec, spec_files()),
    "expression": (expression, expressions()),
    "plan": (plan, plan_files()),
    "log": (log, logs()),
    "cli": (cli, argvs()),
    "trace_path": (trace_path, TRACE_CASES),
    "database": (database, database_layouts()),
    "store_row": (store_row, ROW_CASES),
    "backend_output": (backend_output, backend_outputs()),
}
