"""Whether two checkouts plan the same bytes: `dlbs plan` over the bench sweeps and examples.

A change that makes the planner faster must not change a plan: this runs `dlbs plan` of
checkout A and of checkout B over bench/plan_speed.py's sweeps (1,000 and 10,000), every
spec of examples/ (jsonl, and the other formats for a few) and some command-line sweeps of
the other frameworks, and compares their standard output, standard error and exit status.
Both run with one DLBS_ROOT and DLBS_CONFIGS (the first checkout's), since a checkout's own
path is a value of its plans.

    python bench/plan_identity.py /path/to/checkout-a /path/to/checkout-b

With `--ids`, each checkout plans with its own configs and only the experiment ids of the
jsonl plans are compared: a change of the default configs (a new parameter, a new computed
default) must leave every existing experiment's id as it was.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from plan_speed import axes  # noqa: E402

OTHER_SWEEPS = [
    [
        "-P",
        "exp.framework=mxnet",
        "-V",
        'exp.model=["resnet50","vgg16"]',
        "-V",
        'exp.gpus=["","0","0,1"]',
        "-V",
        'exp.phase=["training","inference"]',
    ],
    [
        "-P",
        "exp.framework=onnxruntime",
        "-V",
        'exp.model=["resnet50","alexnet_owt"]',
        "-V",
        "exp.replica_batch=[1,8,64]",
        "-P",
        "exp.phase=inference",
    ],
    ["-P", "exp.framework=dummy", "-V", "exp.replica_batch=[1,2]", "-P", "exp.docker=true"],
    [
        "-V",
        'exp.scenario=["benchmark","accuracy"]',
        "-P",
        "exp.data_dir=/data",
        "-V",
        'exp.phase=["inference"]',
    ],
    ["-P", "exp.docker=true", "-P", "exp.trace_level=layer", "-V", "exp.replica_batch=[1,2]"],
    [
        "-V",
        'exp.gpus=["0, 1","0,1"]',
        "-E",
        '{"condition": {"exp.gpus": "(.*),(.*)"}, '
        '"parameters": {"exp.num_warmup_batches": "${__condition.exp.gpus_1}"}}',
    ],
    # Errors are compared too: a rule's message, and a bad value's.
    ["-P", "exp.framework=onnxruntime", "-V", 'exp.model=["resnet50","alexnet_owt"]'],
    ["-V", 'exp.replica_batch=[1,"x"]'],
]


def cases(repo: Path) -> list[tuple[str, list[str]]]:
    """(a name, the arguments of `dlbs plan`) for each comparison."""
    found: list[tuple[str, list[str]]] = []
    for size in (1000, 10000):
        found.append(
            (
                f"bench sweep {size}",
                [
                    "--format",
                    "jsonl",
                    "-P",
                    "exp.docker=true",
                    *(a for axis in axes(size) for a in ("-V", axis)),
                ],
            )
        )
    for spec in sorted((repo / "examples").iterdir()):
        if spec.suffix in (".yaml", ".yml", ".json"):
            formats = ("jsonl", "json", "csv", "table") if spec.name.startswith("q") else ("jsonl",)
            for fmt in formats:
                found.append((f"{spec.name} {fmt}", ["--format", fmt, "-c", str(spec)]))
    for index, sweep in enumerate(OTHER_SWEEPS):
        found.append((f"command line #{index + 1}", ["--format", "jsonl", *sweep]))
    return found


def run(checkout: Path, arguments: list[str], env: dict[str, str]) -> tuple[int, bytes, bytes]:
    command = [sys.executable, "-m", "dlbs.cli.main", "plan", *arguments]
    child_env = dict(env, PYTHONPATH=f"{checkout}:{checkout / 'python'}")
    done = subprocess.run(command, capture_output=True, cwd=checkout, env=child_env, timeout=600)
    return done.returncode, done.stdout, done.stderr


def ids_of(result: tuple[int, bytes, bytes]) -> tuple[int, bytes, bytes]:
    """A jsonl plan's experiment ids, one a line (other formats and errors: as they are)."""
    status, out, err = result
    try:
        ids = [json.loads(line)["exp.id"] for line in out.splitlines() if line.strip()]
    except (ValueError, KeyError, TypeError):
        return result
    return status, "\n".join(map(str, ids)).encode() + b"\n", b""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("a", type=Path)
    parser.add_argument("b", type=Path)
    parser.add_argument("--ids", action="store_true",
                        help="each checkout's own configs; compare the experiment ids only")
    args = parser.parse_args()
    a, b = args.a.resolve(), args.b.resolve()
    env = dict(os.environ, DLBS_ROOT=str(a), DLBS_CONFIGS=str(a / "configs"))
    env_b = dict(os.environ, DLBS_ROOT=str(a), DLBS_CONFIGS=str(b / "configs")) if args.ids \
        else env
    different = 0
    for name, arguments in cases(a):
        if args.ids and "jsonl" not in arguments:
            continue
        first, second = run(a, arguments, env), run(b, arguments, env_b)
        if args.ids:
            first, second = ids_of(first), ids_of(second)
        same = first == second
        different += not same
        lines = first[1].count(b"\n")
        print(
            f"{'same' if same else 'DIFFERENT':9} {name}: exit {first[0]}, {lines} lines, "
            f"sha256 {hashlib.sha256(first[1]).hexdigest()[:16]}"
            + (
                ""
                if same
                else f" / exit {second[0]}, sha256 {hashlib.sha256(second[1]).hexdigest()[:16]}"
            )
        )
    print(f"{different} of {len(cases(a))} differ")
    return 1 if different else 0


if __name__ == "__main__":
    sys.exit(main())
