"""DLBS specs from its tutorials and docs plan as DLBS planned them (issue 23, items 13-16).

Each test holds what DLBS's own code did (python/dlbs/configs/base.json, the framework
configs, Processor and Builder), and what docs/from-dlbs.md says of it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dlbs.config.loader import load_spec
from dlbs.errors import ConfigError
from dlbs.plan.builder import Planner
from dlbs.plan.checks import check_plan
from dlbs.plan.unused import unused_parameters
from tests.unit.test_from_dlbs import DISTRIBUTED, ENV, planned, write_spec

DOCS = Path(__file__).resolve().parents[2] / "docs" / "from-dlbs.md"

# DLBS's tutorials/recipes/multi_gpu_compute_scaling/config.json, with PyTorch for nvcnn:
# it names its image and relies on DLBS's default exp.docker (true).
COMPUTE_SCALING = {
    "parameters": {
        "exp.framework": "pytorch",
        "exp.docker_image": "nvcr.io/nvidia/pytorch:18.04-py3",
        "exp.num_warmup_batches": 10,
        "exp.num_batches": 40,
        "exp.log_file": "${BENCH_ROOT}/logs/${exp.num_gpus}_${exp.model}_"
                        "${exp.effective_batch}.log",
        "exp.dtype": "float16",
        "exp.model": "resnet50",
        "exp.replica_batch": 128,
    },
    "variables": {"exp.gpus": ["0", "0,1", "0,1,2,3", "0,1,2,3,4,5,6,7"]},
}


# ---- item 13: DLBS's descriptive base parameters ----------------------------------------------

DESCRIPTIVE = ("exp.framework_title", "exp.framework_family", "exp.model_title",
               "exp.model_opts", "exp.proj", "exp.node_id")


@pytest.mark.parametrize("name", DESCRIPTIVE)
def test_dlbs_base_parameters_are_declared_outside_the_id(name):
    definition = load_spec().params[name]
    assert definition.type == "str" and definition.desc
    assert definition.host  # identity: false
    (default,) = planned()
    (changed,) = planned(params=[f"{name}=something else"])
    assert changed[name] == "something else" and changed["exp.id"] == default["exp.id"]


def test_their_values_are_dlbs_values():
    experiments = planned(params=["exp.phase=inference"],
                          variables=['exp.framework=["pytorch", "mxnet", "onnxruntime", '
                                     '"dummy"]'])
    assert [e["exp.framework_title"] for e in experiments] == [
        "PyTorch", "MXNet", "ONNX Runtime", "Dummy"]
    for experiment in experiments:
        assert experiment["exp.framework_family"] == experiment["exp.framework"]
        assert experiment["exp.model_title"] == "" and experiment["exp.model_opts"] == "{}"
        assert experiment["exp.proj"] == "" and experiment["exp.node_id"] == ""


def test_a_log_path_built_from_titles_plans(tmp_path):
    spec = write_spec(tmp_path, {"parameters": {
        "exp.proj": "scaling", "exp.node_id": "apollo6500",
        "exp.log_file": "${BENCH_ROOT}/${exp.proj}/${exp.node_id}/${exp.framework_title}/"
                        "${exp.framework_family}_${exp.model}${exp.model_title}.log"},
        "variables": {"exp.framework": ["pytorch", "mxnet"]}})
    assert [e["exp.log_file"] for e in planned(spec)] == [
        "/bench/scaling/apollo6500/PyTorch/pytorch_resnet50.log",
        "/bench/scaling/apollo6500/MXNet/mxnet_resnet50.log"]
    assert unused_parameters(load_spec(spec)) == []


def test_model_options_are_recorded_and_said_to_be_unread():
    (experiment,) = planned(params=['exp.model_opts={"num_layers": 50}'])
    assert experiment["exp.model_opts"] == '{"num_layers":50}'  # a JSON object, as text
    report = check_plan(Planner(load_spec(params=['exp.model_opts={"num_layers": 50}']), ENV))
    assert report.problems == []
    assert [w for w in report.warnings if "model_opts" in w] == [
        "exp.model_opts is set in 1 experiments, but no backend of dlbs reads model options "
        "(DLBS's MXNet backend did): it is only recorded, and experiments that differ only "
        "in it are one experiment"]
    assert not [w for w in check_plan(Planner(load_spec(), ENV)).warnings if "model_opts" in w]


def test_the_undefined_name_hint_names_each_candidate_once(tmp_path):
    # An axis over exp.framework made it a candidate twice (a parameter and an override).
    spec = write_spec(tmp_path, {"parameters": {"exp.log_file": "${exp.framework_tittle}.log"},
                                 "variables": {"exp.framework": ["pytorch"]}})
    with pytest.raises(ConfigError) as caught:
        planned(spec)
    hint = caught.value.hint
    assert hint == ("did you mean 'exp.framework_title' or 'exp.framework_ver' or "
                    "'exp.framework_family'?")


# ---- item 14: "0, 1" is two GPUs, as in DLBS ---------------------------------------------------

@pytest.mark.parametrize("written", ["0, 1", "0 ,1", " 0,1 ", "0 , 1"])
def test_blanks_in_a_gpu_list_are_dropped(written):
    (spaced,) = planned(params=[f"exp.gpus={written}"])
    (plain,) = planned(params=["exp.gpus=0,1"])
    assert spaced["exp.gpus"] == "0,1" and spaced["exp.num_local_gpus"] == 2
    assert spaced["runtime.visible_gpus"] == "0,1" and spaced["exp.num_replicas"] == 2
    assert spaced["exp.id"] == plain["exp.id"]


def test_blanks_in_a_gpu_sweep_merge_with_the_plain_spelling(tmp_path):
    spec = write_spec(tmp_path, {"variables": {"exp.gpus": ["0", "0, 1", "0,1", "0:1, 2:3"]}})
    planner = Planner(load_spec(spec), ENV)
    experiments = list(planner.experiments())
    assert [e["exp.gpus"] for e in experiments] == ["0", "0,1", "0:1,2:3"]
    assert planner.duplicates == 1


def test_a_blank_between_two_ids_is_still_refused():
    with pytest.raises(ConfigError, match="exp.gpus.*does not match the regex"):
        planned(params=["exp.gpus=0 1"])


# ---- item 15: an image without exp.docker --------------------------------------------------

def test_a_recipe_that_names_an_image_without_docker_is_warned(tmp_path):
    config = write_spec(tmp_path, COMPUTE_SCALING)
    warnings = unused_parameters(load_spec(config))
    assert warnings == [
        f"{config}: exp.docker_image names an image, but exp.docker is false in every "
        f"experiment: they run on bare metal and the image is unused (DLBS ran containers by "
        f"default; set exp.docker: true to run in it)"]
    assert {e["exp.docker"] for e in planned(config)} == {False}
    # The distributed PyTorch recipe does the same.
    distributed = write_spec(tmp_path, DISTRIBUTED, "distributed.json")
    assert [w for w in unused_parameters(load_spec(distributed)) if "image is unused" in w]


@pytest.mark.parametrize("docker", [
    ["exp.docker=true"], ['exp.docker="yes"'], ["exp.docker=$(True)$"]])
def test_no_warning_when_the_image_may_be_used(tmp_path, docker):
    config = write_spec(tmp_path, COMPUTE_SCALING)
    assert unused_parameters(load_spec(config, params=docker)) == []


def test_an_axis_or_extension_that_may_run_containers_counts(tmp_path):
    config = write_spec(tmp_path, COMPUTE_SCALING)
    assert unused_parameters(load_spec(config, variables=["exp.docker=[false, true]"])) == []
    extension = '{"condition": {"exp.gpus": "0"}, "parameters": {"exp.docker": true}}'
    assert unused_parameters(load_spec(config, extensions=[extension])) == []


def test_framework_images_count_and_default_images_do_not():
    assert unused_parameters(load_spec()) == []
    warnings = unused_parameters(load_spec(params=["mxnet.docker_image=dlbs/mxnet:18.11"]))
    assert len(warnings) == 1 and warnings[0].startswith(
        "<command line>: mxnet.docker_image names an image, but exp.docker is false")
    extension = '{"condition": {"exp.model": "resnet50"}, "parameters": {"exp.docker_image": "x"}}'
    (line,) = unused_parameters(load_spec(extensions=[extension]))
    assert line.startswith("<command line>: -E #1: exp.docker_image names an image")


# ---- item 16: what docs/from-dlbs.md says of DLBS ---------------------------------------------

def test_the_docs_describe_dlbs_as_its_code_was():
    text = DOCS.read_text()
    assert "`Processor.cast_variable`: `\"2048\"` became 2048" in text
    assert '"2048"` stayed a string' not in text
    assert "nn.DataParallel" not in text
    assert "`torch.distributed.launch` and apex's `DistributedDataParallel`" in text
    assert "MXNET_CUDNN_AUTOTUNE_DEFAULT=$(1 if '${mxnet.cudnn_autotune}' == 'true' else 0)$" \
        in text
    assert "reached backends as `True`" not in text
    assert "Condition must not use parameter that's not a constant" in text
    assert "exp.docker: true" in text and "exp.framework_title" in text


def test_a_condition_on_a_computed_value_applies():
    # DLBS refused it (Builder.assert_match_is_corrent); the docs say it is allowed here.
    extension = json.dumps({"condition": {"exp.num_gpus": "[2-8]"},
                            "parameters": {"exp.replica_batch": 8}})
    experiments = planned(variables=['exp.gpus=["0", "0,1"]'], extensions=[extension])
    assert [e["exp.replica_batch"] for e in experiments] == [16, 8]


# ---- issue 30: what docs/from-dlbs.md says DLBS refused, kept as text, or took -----------------

def test_a_spec_value_of_another_json_type_than_the_default_plans(tmp_path):
    """DLBS's ConfigurationLoader.update refused these ('expecting value types to be same')."""
    spec = write_spec(tmp_path, {"parameters": {
        "global_batch": 64, "exp.gpus": "0,1",
        "exp.replica_batch": "$(${global_batch} // ${exp.num_replicas})$",
        "exp.docker_args": ["--rm", "--ipc=host"]}})
    (experiment,) = planned(spec)
    assert experiment["exp.replica_batch"] == 32
    assert experiment["exp.docker_args"] == ["--rm", "--ipc=host"]


def test_computed_helpers_keep_their_type_and_lists_join_with_spaces_in_text():
    """DLBS kept "3" and "[0, 1]" (str of the result) unless the parameter was typed."""
    (experiment,) = planned(params=["n=$(len('a,b,c'.split(',')))$", "ids=$([0, 1])$",
                                    "text=gpus ${ids} of ${n}"], defaults=False)
    assert (experiment["n"], experiment["ids"]) == (3, [0, 1])
    assert experiment["text"] == "gpus 0 1 of 3"


def test_a_json_scalar_given_to_v_is_a_one_item_axis_as_in_dlbs():
    one = planned(variables=['exp.model="resnet50"'])
    text = planned(variables=["exp.model=resnet50"])
    assert [e["exp.model"] for e in one] == [e["exp.model"] for e in text] == ["resnet50"]


@pytest.mark.parametrize(("expression", "said"), [
    ("uuid.uuid4()", "unknown name in expression: 'uuid' is not defined"),
    ("sys.version", "unknown name in expression: 'sys' is not defined"),
    ("json.dumps(1)", "unknown name in expression: 'json' is not defined"),
    ("os.getcwd()", "not allowed in an expression"),
])
def test_what_dlbs_s_eval_reached_is_refused(expression, said):
    with pytest.raises(ConfigError, match=said.replace("(", r"\(")):
        planned(params=[f"a=$({expression})$"], defaults=False)
    (experiment,) = planned(params=["a=$(math.floor(math.sqrt(10)))$"], defaults=False)
    assert experiment["a"] == 3


def test_dlbs_s_frameworks_that_are_gone_are_refused_and_their_names_are_the_spec_s_own():
    with pytest.raises(ConfigError, match="'exp.framework': value 'tensorflow' is not one of"):
        planned(params=["exp.framework=tensorflow"])
    (experiment,) = planned(params=["tensorflow.var_update=replicated"])
    assert experiment["tensorflow.var_update"] == "replicated"
