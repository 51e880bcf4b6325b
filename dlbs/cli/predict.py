"""`dlbs predict`: the top classes of image files, from a model and its weights.

The framework's backend classifies the images (`--predict`, docs/backends/protocol.md
section 4): dlbs plans a one-experiment spec from the options, builds the backend's command
with the framework's recipe, and runs it on this host as a subprocess, so dlbs itself never
imports a framework. Each image gets its lines; an image that cannot be read gets one
`dlbs: error: IMAGE: reason` line on stderr, and the others still print. A model without
weights is randomly initialised: a warning says so, each image's line is marked, and JSON
says `"weights": "random"`. The exit status is
1 when any image failed, 2 when the backend could not run at all.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from typing import Any

from dlbs.cli.spec_options import spec_from_args
from dlbs.errors import ConfigError, LaunchError
from dlbs.util.terminal import one_line

FRAMEWORKS = ("pytorch", "mxnet", "dummy")
RESULT_KEY = "predict.result"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("images", nargs="+", metavar="IMAGE", help="image files to classify")
    parser.add_argument("--framework", choices=FRAMEWORKS, default="pytorch",
                        help="the backend that runs the model (default: pytorch)")
    parser.add_argument("--model", required=True, help="model id (see `dlbs list models`)")
    parser.add_argument("--weights", default="",
                        help="trained weights (PyTorch state dict, MXNet .params); without "
                             "them the model is randomly initialised")
    parser.add_argument("--labels", default="",
                        help="class names, one a line (line i names class i)")
    parser.add_argument("--top", type=int, default=5, help="classes per image (default: 5)")
    parser.add_argument("--format", choices=("text", "json"), default="text",
                        help="text for people (default), or one JSON document")
    parser.add_argument("-P", dest="params", action="append", default=[],
                        metavar="NAME=VALUE",
                        help="any other parameter, as in `dlbs run` (pytorch.extra_models, "
                             "exp.gpus, exp.dtype, runtime.python, ...)")


def run(args: argparse.Namespace) -> int:
    if args.top < 1:
        raise ConfigError(f"--top must be at least 1, got {args.top}")
    if any(not image for image in args.images):
        # os.path.abspath("") is the current folder: the backend would say "Is a directory".
        raise ConfigError("an image path is empty (\"\")", hint="name image files")
    for path in (args.weights, args.labels):
        if path and not os.path.isfile(path):
            raise ConfigError(f"no such file: {path}")
    experiment = _experiment(args)
    from dlbs.recipes import LOCAL, invocation_for

    invocation = invocation_for(experiment)
    if invocation.target != LOCAL:
        raise LaunchError(f"dlbs predict runs the backend on this host, not through "
                          f"{invocation.target}", hint="leave exp.docker and exp.scheduler "
                                                       "at their defaults")
    images = [os.path.abspath(image) for image in args.images]
    argv = [*invocation.argv, "--predict", *images, "--top", str(args.top)]
    from dlbs.util.credentials import benchmark_environment

    env = benchmark_environment()   # the backend runs model code: no store credentials
    env.update(invocation.env)
    env["CUDA_VISIBLE_DEVICES"] = ",".join(invocation.gpus)
    try:
        done = subprocess.run(argv, env=env, capture_output=True, check=False)
    except OSError as error:
        hint = "set runtime.python to an interpreter that has the framework"
        raise LaunchError(f"cannot start {argv[0]!r}: {error.strerror}", hint=hint) from None
    answers, status_msg = _answers(done.stdout)
    if done.returncode != 0 or len(answers) != len(images):
        reason = status_msg or _last_line(done.stderr) or f"exit status {done.returncode}"
        raise LaunchError(f"the {args.framework} backend failed: {reason}")
    by_path = dict(zip(images, args.images))
    failed = [answer for answer in answers if "error" in answer]
    # The dummy backend has no model to initialise; a framework's model without weights has.
    weights = experiment.get("exp.weights") or (None if args.framework != "dummy" else "")
    if weights is None:
        print(f"dlbs predict: warning: no --weights: {args.model} is randomly initialised, "
              "its classes mean nothing", file=sys.stderr)
    if args.format == "json":
        for answer in answers:
            answer["image"] = by_path.get(answer["image"], answer["image"])
            if weights is None:
                answer["weights"] = "random"
        json.dump(answers, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        for answer in answers:
            shown = one_line(str(by_path.get(answer["image"], answer["image"])))
            if "error" in answer:
                print(f"dlbs: error: {shown}: {one_line(str(answer['error']))}",
                      file=sys.stderr)
                continue
            print(f"{shown}  (random weights)" if weights is None else shown)
            for entry in answer["top"]:
                name = f"  {one_line(str(entry['name']))}" if "name" in entry else ""
                print(f"  {entry['probability']:.4f}  {entry['class']:>5}{name}")
    return 1 if failed else 0


def _experiment(args: argparse.Namespace) -> dict[str, Any]:
    """The one experiment the options describe, planned as `dlbs run` would plan it."""
    from dlbs.plan.builder import Planner

    params = [f"exp.framework={json.dumps(args.framework)}",
              f"exp.model={json.dumps(args.model)}", 'exp.phase="inference"',
              "exp.replica_batch=1", "exp.num_warmup_batches=0"]
    if args.weights:
        params.append(f"exp.weights={json.dumps(os.path.abspath(args.weights))}")
    if args.labels:
        params.append(f"exp.labels={json.dumps(os.path.abspath(args.labels))}")
    spec_args = argparse.Namespace(config=None, no_defaults=False, variables=[],
                                   extensions=[], params=params + list(args.params))
    experiments = list(Planner(spec_from_args(spec_args)).experiments())
    if len(experiments) != 1:
        raise ConfigError(f"dlbs predict runs one model; the parameters make "
                          f"{len(experiments)} experiments")
    return experiments[0]


def _answers(stdout: bytes) -> tuple[list[dict[str, Any]], str]:
    """The backend's answers in order, and its failure message if it printed one."""
    from dlbs.results.protocol import ProtocolParser

    parser = ProtocolParser()
    answers = []
    for line in stdout.splitlines():
        parser.feed(line)
        answer = parser.result.values.pop(RESULT_KEY, None)
        if isinstance(answer, dict) and "image" in answer:
            answers.append(answer)
    message = parser.result.values.get("results.status_msg")
    return answers, str(message) if message else ""


def _last_line(stderr: bytes) -> str:
    lines = [line.strip() for line in stderr.decode(errors="replace").splitlines()
             if line.strip()]
    return lines[-1] if lines else ""
