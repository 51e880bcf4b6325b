"""Plan-time rules: extensions with `error`, the default configs' rules, repeated flags.

Invalid combinations of backend flags (a graph backend in training, CUDA graphs on the CPU,
ONNX Runtime training, a declared flag repeated in extra_args) fail when the plan is made,
with one clear line, not in the backend after a container started (docs/language.md
section 7; docs/backends/*.md).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import pytest

from dlbs.config.loader import load_spec
from dlbs.errors import ConfigError, PlanError
from dlbs.plan.builder import Planner
from dlbs.plan.checks import check_plan
from dlbs.plan.repeated_flags import flag_names, flag_parameters, repeated_flags
from dlbs.recipes.tracing import TRACE_FLAGS  # rendered by the recipe from exp.trace_*
from tests.unit.planning import plan_doc

REPO = Path(__file__).resolve().parents[2]
ENV = {"DLBS_ROOT": "/opt/dlbs", "HOME": "/root"}
PYTHON_DIR = REPO / "python"


def plan_defaults(*params: str, variables: tuple[str, ...] = (),
                  extensions: tuple[str, ...] = ()) -> list[dict]:
    spec = load_spec(None, params=list(params), variables=list(variables),
                     extensions=list(extensions))
    return list(Planner(spec, ENV).experiments())


# -- the mechanism ------------------------------------------------------------------------

RULE = {"condition": {"fw": "mx", "phase": "training"}, "error": "no training here"}


def test_a_rule_refuses_what_it_matches_with_its_message_and_the_tested_values():
    with pytest.raises(PlanError) as caught:
        plan_doc({"parameters": {"fw": "mx"}, "variables": {"phase": ["inference", "training"]},
                  "extensions": [RULE]})
    assert caught.value.message == "no training here (fw=mx, phase=training)"
    assert "spec.yaml: extension #1" in caught.value.hint


def test_a_rule_passes_what_it_does_not_match():
    plan = plan_doc({"parameters": {"fw": "mx", "phase": "inference"}, "extensions": [RULE]})
    assert plan == [{"fw": "mx", "phase": "inference"}]


def test_a_rule_sees_the_finished_experiment_after_later_extensions():
    # The rule comes first (a default config), the user's extension that fixes the phase
    # comes later: the experiment is judged as it finally is.
    plan = plan_doc({"parameters": {"fw": "mx", "phase": "training"},
                     "extensions": [RULE, {"condition": {"fw": "mx"},
                                           "parameters": {"phase": "inference"}}]})
    assert plan[0]["phase"] == "inference"


def test_a_rule_names_the_other_swept_values_of_the_experiment():
    with pytest.raises(PlanError, match=r"\(fw=mx, phase=training; experiment: batch=2\)"):
        plan_doc({"parameters": {"fw": "mx", "phase": "training"},
                  "variables": {"batch": [2]}, "extensions": [RULE]})


@pytest.mark.parametrize("extension, message", [
    ({"condition": {"a": 1}, "error": ""}, "'error' must be a message"),
    ({"condition": {"a": 1}, "error": 3}, "'error' must be a message"),
    ({"condition": {"a": 1}, "error": "x", "parameters": {"b": 1}}, "cannot also set"),
])
def test_malformed_rules_are_refused_when_the_spec_loads(extension, message):
    with pytest.raises(ConfigError, match=message):
        plan_doc({"parameters": {"a": 1}, "extensions": [extension]})


def test_print_config_keeps_a_rule_as_a_rule():
    from dlbs.config.loader import SpecBuilder

    builder = SpecBuilder()
    builder.add_layer({"extensions": [RULE]}, "spec.yaml")
    assert builder.spec.to_document()["extensions"] == [
        {"condition": RULE["condition"], "error": "no training here"}]


# -- the default configs' rules -----------------------------------------------------------

@pytest.mark.parametrize("params, message", [
    (["exp.framework=pytorch", "pytorch.cuda_graphs=true", "exp.phase=inference"],
     "pytorch.cuda_graphs needs a GPU"),
    (["exp.framework=pytorch", "pytorch.cuda_graphs=true", "exp.gpus=0", "exp.dtype=float16",
      "pytorch.optimizer_impl=foreach"], "needs pytorch.optimizer_impl fused"),
    (["exp.framework=pytorch", "pytorch.decode=gpu"],
     "pytorch.decode gpu decodes JPEG files on a GPU"),
    (["exp.framework=pytorch", "pytorch.decode=gpu", "exp.gpus=0", "exp.data_dir=/data"],
     "reads the JPEG files of an image_folder"),
    (["exp.framework=pytorch", 'pytorch.inductor_options=["coordinate_descent_tuning=true"]'],
     "pytorch.inductor_options configure torch.compile"),
    (["exp.framework=pytorch", "pytorch.compile_mode=max-autotune"],
     "pytorch.compile_mode has no effect without pytorch.compile"),
    (["exp.framework=pytorch", "pytorch.timing=events"], "the CPU has sync only"),
    (["exp.framework=pytorch", "pytorch.synthetic_data_location=pinned_host"],
     "pinned_host copies batches to a GPU"),
    (["exp.framework=mxnet", "mxnet.graph_backend=onednn"],
     "mxnet.graph_backend onednn partitions an inference graph"),
    (["exp.framework=mxnet", "mxnet.graph_backend=onednn", "exp.phase=inference",
      "exp.gpus=0"], "MXNet's CPU fusion"),
    (["exp.framework=mxnet", "mxnet.graph_backend=onednn", "exp.phase=inference",
      "mxnet.hybridize=false", "mxnet.static_graph=false"], "partitions the hybridized graph"),
    (["exp.framework=mxnet", "mxnet.hybridize=false", "mxnet.static_graph=true"],
     "mxnet.static_graph needs a hybridized graph"),
    (["exp.framework=mxnet", "mxnet.cpu_contexts=2", "exp.gpus=0"],
     "mxnet.cpu_contexts is for the CPU"),
    (["exp.framework=onnxruntime"], "onnxruntime runs inference only"),
    (["exp.framework=onnxruntime", "exp.phase=inference", "onnxruntime.execution_provider=cuda"],
     "cuda and tensorrt need a GPU"),
    (["exp.framework=onnxruntime", "exp.phase=inference", "exp.gpus=0",
      "onnxruntime.execution_provider=cpu"], "execution_provider cpu runs on the CPU"),
    (["exp.framework=onnxruntime", "exp.phase=inference", "exp.gpus=0,1"],
     "one session on one GPU"),
    (["exp.framework=onnxruntime", "exp.phase=inference", "exp.num_nodes=2"],
     "onnxruntime runs on one node"),
    (["exp.framework=onnxruntime", "exp.phase=inference", "exp.data_dir=/data"],
     "synthetic data only"),
    (["exp.framework=onnxruntime", "exp.phase=inference", "onnxruntime.inter_op_threads=2"],
     "execution_mode parallel"),
])
def test_the_default_configs_refuse_combinations_the_backends_cannot_run(params, message):
    with pytest.raises(PlanError) as caught:
        plan_defaults(*params)
    assert message in caught.value.message
    assert "\n" not in caught.value.message


@pytest.mark.parametrize("params", [
    ["exp.framework=pytorch", "pytorch.cuda_graphs=true", "exp.gpus=0", "exp.phase=inference"],
    ["exp.framework=pytorch", "pytorch.cuda_graphs=true", "exp.gpus=0", "exp.dtype=float16"],
    ["exp.framework=pytorch", "pytorch.decode=gpu", "exp.gpus=0", "exp.data_dir=/data",
     "pytorch.data_backend=image_folder"],
    ["exp.framework=pytorch", "pytorch.compile=true", "pytorch.compile_mode=max-autotune"],
    ["exp.framework=pytorch", "pytorch.timing=events", "exp.gpus=0"],
    ["exp.framework=mxnet", "mxnet.graph_backend=onednn", "exp.phase=inference"],
    ["exp.framework=mxnet", "mxnet.hybridize=false"],
    ["exp.framework=mxnet", "mxnet.cpu_contexts=2"],
    ["exp.framework=onnxruntime", "exp.phase=inference"],
    ["exp.framework=onnxruntime", "exp.phase=inference", "exp.gpus=0"],
    ["exp.framework=onnxruntime", "exp.phase=inference", "onnxruntime.inter_op_threads=2",
     "onnxruntime.execution_mode=parallel"],
])
def test_the_valid_neighbours_of_each_rule_plan(params):
    assert len(plan_defaults(*params)) == 1


def test_imperative_mxnet_turns_the_static_graph_off_by_itself():
    (experiment,) = plan_defaults("exp.framework=mxnet", "mxnet.hybridize=false")
    assert experiment["mxnet.static_graph"] is False
    assert "--hybridize false" in experiment["mxnet.args"]
    assert "--static_graph false" in experiment["mxnet.args"]


def test_cpu_contexts_are_replicas_of_the_global_batch():
    (experiment,) = plan_defaults("exp.framework=mxnet", "mxnet.cpu_contexts=2",
                                  "exp.replica_batch=8")
    assert experiment["exp.num_replicas"] == 2 and experiment["exp.effective_batch"] == 16


def test_a_rule_fails_dlbs_plan_with_one_line(dlbs_cli):
    result = dlbs_cli("plan", "-P", "exp.framework=mxnet", "-P", "mxnet.graph_backend=onednn",
                      "-V", 'exp.replica_batch=[1, 2]')
    assert result.returncode == 2 and result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert lines[0].startswith("dlbs: error: mxnet.graph_backend onednn partitions an "
                               "inference graph")
    assert "experiment: exp.replica_batch=1" in lines[0]
    assert len(lines) == 2 and lines[1].startswith("hint: the rule is ")
    assert "Traceback" not in result.stderr


# -- repeated flags -----------------------------------------------------------------------

def test_flag_names_read_both_spellings():
    assert flag_names(["--a 1", "--b=2 --c", "x --d-e"]) == ["--a", "--b", "--c", "--d-e"]
    assert flag_names(None) == [] and flag_names("") == []


def test_flag_parameters_map_flags_to_what_renders_them():
    assert flag_parameters(["--compile ${pytorch.compile}", "--x $(1)$", "${extra}", 3,
                            "--y $<a.b>"]) == {"--compile": "pytorch.compile", "--y": "a.b"}


@pytest.mark.parametrize("framework, extra, parameter", [
    ("pytorch", "--compile true", "pytorch.compile"),
    ("pytorch", "--channels_last=true", "pytorch.channels_last"),
    ("mxnet", "--graph_backend onednn", "mxnet.graph_backend"),
    ("mxnet", "--hybridize false", "mxnet.hybridize"),
    ("onnxruntime", "--graph_optimization_level basic", "onnxruntime.graph_optimization_level"),
])
def test_a_declared_flag_repeated_in_extra_args_is_a_problem(framework, extra, parameter):
    spec = load_spec(None, params=[f"exp.framework={framework}", "exp.phase=inference",
                                   f'{framework}.extra_args=["{extra}"]'])
    report = check_plan(Planner(spec, ENV))
    assert len(report.problems) == 1
    assert f"{framework}.extra_args repeats {extra.split()[0].split('=')[0]}" \
        in report.problems[0]
    assert f"set {parameter} instead" in report.problems[0]


def test_a_flag_given_twice_in_extra_args_is_a_problem_too():
    experiment = {"x.extra_args": ["--z 1", "--z 2"], "x.args": ["--z 1", "--z 2"]}
    assert repeated_flags(experiment, "x") == ["x.extra_args gives --z 2 times"]


def test_validate_refuses_a_repeated_flag_in_one_line(dlbs_cli):
    result = dlbs_cli("validate", "-P", "exp.framework=pytorch",
                      "-P", 'pytorch.extra_args=["--compile true"]')
    assert result.returncode == 2
    assert "pytorch.extra_args repeats --compile" in result.stderr
    assert "Traceback" not in result.stderr


# -- every backend flag has a parameter ---------------------------------------------------

def _backend_parser(module: str) -> argparse.ArgumentParser:
    if str(PYTHON_DIR) not in sys.path:
        sys.path.insert(0, str(PYTHON_DIR))
    import importlib

    return importlib.import_module(module).build_parser()


@pytest.mark.parametrize("framework, module", [
    ("pytorch", "pytorch_benchmarks.cli"),
    ("mxnet", "mxnet_benchmarks.options"),
    ("onnxruntime", "onnxruntime_benchmarks.options"),
])
def test_every_backend_flag_is_rendered_from_the_config(framework, module):
    """A flag the backend's --help shows but `<fw>.args` never renders has no parameter."""
    params = load_spec().params
    template = params[f"{framework}.args"].value
    if "${exp.evaluation_args}" in template:  # the evaluation flags every backend shares
        template = [*template, *params["exp.evaluation_args"].value]
    text = " ".join(str(item) for item in template)
    # Set by the recipe (where a scenario writes) and by `dlbs predict`, not by parameters.
    rendered = set(re.findall(r"--[a-z0-9_]+", text)) | {
        "--loadgen_dir", "--predictions_file", "--predict", "--top"} | set(TRACE_FLAGS)
    missing = []
    for action in _backend_parser(module)._actions:
        flags = [f for f in action.option_strings if f.startswith("--")]
        if flags and "--help" not in flags and not rendered & set(flags):
            missing.append(flags[0])
    assert missing == [], f"{framework}: flags without a parameter: {missing}"
