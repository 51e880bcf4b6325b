"""What `dlbs run` shows while it runs, and the names it gives (issue 23 item 9).

Seen before: a terminal's bar labelled with the model alone; piped output of seven
scenarios in seven identical lines; single_stream shown as "batch 8"; log and LoadGen folder
names without the scenario; a max_qps search silent for minutes.
"""

from __future__ import annotations

import io
import json
import re
import sqlite3
import threading
import time
from pathlib import Path

import pytest

from dlbs.cli.run import BarReporter, LineReporter, _Terminal
from dlbs.config.loader import load_spec
from dlbs.errors import ConfigError
from dlbs.plan.builder import Planner
from dlbs.plan.checks import check_plan
from dlbs.results.protocol import ProtocolParser, parse_log
from dlbs.run.follow import MAX_READ, LogFollower, ProgressNote, note_text

ENV = {"DLBS_ROOT": "/opt/dlbs", "HOME": "/root"}
SCENARIOS = ["benchmark", "single_stream", "multi_stream", "server", "offline", "max_qps",
             "accuracy"]


def seven_scenarios(*params: str) -> list[dict]:
    spec = load_spec(params=["exp.framework=dummy", "exp.replica_batch=8",
                             "exp.target_qps=10", "exp.data_dir=/data", *params],
                     variables=[f"exp.scenario={json.dumps(SCENARIOS)}"])
    planner = Planner(spec, ENV)
    experiments = list(planner.experiments())
    assert check_plan(planner, experiments).problems == []  # no two logs collide
    return experiments


def test_log_names_say_the_scenario_and_the_batch_as_run():
    by_scenario = {e["exp.scenario"]: e for e in seven_scenarios()}
    names = {s: Path(e["exp.log_file"]).name for s, e in by_scenario.items()}
    identity = {s: e["exp.id"] for s, e in by_scenario.items()}
    # benchmark keeps the name it always had; a scenario adds itself and its batch as run.
    assert names["benchmark"] == f"dummy_cpu_resnet50_8_{identity['benchmark']}.log"
    assert names["single_stream"] == \
        f"dummy_cpu_resnet50_single_stream_1_{identity['single_stream']}.log"
    for scenario in ("multi_stream", "server", "offline", "max_qps", "accuracy"):
        assert names[scenario] == f"dummy_cpu_resnet50_{scenario}_8_{identity[scenario]}.log"
    assert [e["exp.run_batch"] for e in by_scenario.values()] == [8, 1, 8, 8, 8, 8, 8]


def test_two_replicas_run_the_effective_batch_but_one_stream_one_sample():
    by_scenario = {e["exp.scenario"]: e for e in seven_scenarios("exp.num_replicas=2",
                                                                  "exp.gpus=0,1")}
    assert by_scenario["benchmark"]["exp.run_batch"] == 16
    assert by_scenario["offline"]["exp.run_batch"] == 16
    assert by_scenario["multi_stream"]["exp.run_batch"] == 8
    assert by_scenario["single_stream"]["exp.run_batch"] == 1


def test_the_run_batch_and_the_log_name_leave_ids_as_they_were():
    # exp.log_file is not part of the id, and exp.run_batch is declared identity: false.
    spec = load_spec()
    assert spec.params["exp.run_batch"].host
    (experiment,) = Planner(spec, ENV).experiments()
    (again,) = Planner(load_spec(params=["exp.log_file=logs/elsewhere.log"]), ENV).experiments()
    assert experiment["exp.id"] == again["exp.id"]


def lines_of(reporter_type, experiments, notes=()):
    stream = io.StringIO()
    reporter = reporter_type(_Terminal(stream))
    reporter.planned(len(experiments))
    for experiment in experiments:
        reporter.started(experiment, experiment["exp.log_file"])
        for note in notes:
            reporter.progress(experiment, note)
        reporter.finished(experiment, "ok", None, experiment["exp.log_file"], 1.0)
    reporter.close()
    return stream.getvalue().splitlines(), reporter


def test_piped_lines_tell_the_scenarios_apart_and_say_the_batch_as_run():
    lines, _ = lines_of(LineReporter, seven_scenarios())
    assert len(lines) == 7
    # Without their ids (which differ anyway), the seven lines still say seven things.
    described = [re.match(r"\[\d/7\] ok +(.*) \[[0-9a-f]{12}\] 1\.0s ", line).group(1)
                 for line in lines]
    assert len(set(described)) == 7
    assert " batch 8 x1 [" in lines[0]  # benchmark: replica batch x replicas, as before
    assert " single_stream batch 1 [" in lines[1]
    for line, scenario in zip(lines[2:], SCENARIOS[2:]):
        assert f" {scenario} batch 8 [" in line


def test_a_progress_note_is_a_running_line_of_its_experiment():
    (max_qps,) = [e for e in seven_scenarios() if e["exp.scenario"] == "max_qps"]
    lines, _ = lines_of(LineReporter, [max_qps], ["max_qps trial 1: 90 queries/s, p99 12 ms: "
                                                  "bound kept"])
    assert lines[0] == (f"      running     dummy resnet50 inference float32 max_qps batch 8 "
                        f"[{max_qps['exp.id']}]: max_qps trial 1: 90 queries/s, p99 12 ms: "
                        "bound kept")
    assert lines[1].startswith("[1/1] ok ")


def test_the_bar_is_labelled_with_the_scenario_and_prints_notes_above_it():
    (single,) = [e for e in seven_scenarios() if e["exp.scenario"] == "single_stream"]
    stream = io.StringIO()
    reporter = BarReporter(_Terminal(stream))
    reporter.planned(1)
    reporter.started(single, single["exp.log_file"])
    assert reporter.bar.tasks[0].description == "resnet50 single_stream batch 1"
    reporter.progress(single, "single_stream: LoadGen runs at least 60 s and 100 queries")
    reporter.close()
    assert "resnet50 single_stream batch 1: single_stream: LoadGen runs at least 60 s" in \
        stream.getvalue()


@pytest.mark.parametrize("as_bytes", [False, True])
def test_log_readers_keep_no_progress_note(as_bytes):
    lines = ['__results.status__="ok"', '__progress__={"message": "trial 1", "trial": 1}',
             '0: __progress__="two"', '__progress__=not json']
    notes = []
    parser = ProtocolParser(on_progress=notes.append)
    parser.feed_lines([line.encode() if as_bytes else line for line in lines])
    assert parser.result.values == {"results.status": "ok"}
    assert notes == [{"message": "trial 1", "trial": 1}, "two"]
    assert parser.result.unparsable == 1


def test_no_parameter_may_be_named_progress():
    with pytest.raises(ConfigError, match="'progress' cannot be a parameter name"):
        load_spec(params=["progress=1"])


def test_a_note_is_one_bounded_line():
    assert note_text({"message": "a\nb", "trial": 2}) == "a b"
    assert note_text("plain") == "plain"
    assert note_text({"trial": 2}) == '{"trial": 2}'
    assert len(note_text("x" * 1000)) == 300


def test_the_follower_relays_notes_as_the_log_grows(tmp_path):
    log = tmp_path / "a.log"
    log.write_bytes(b'__progress__="from the header: not relayed"\n')
    notes: list[ProgressNote] = []
    arrived = threading.Event()

    def on_note(note):
        notes.append(note)
        arrived.set()

    with LogFollower(str(log), on_note, poll_s=0.05), open(log, "ab") as out:
        out.write(b"chatter\n" + b"y" * (MAX_READ + 10) + b"\n")
        out.write(b'__progress__={"message": "trial 1: kept"}\n__progress__="half')
        out.flush()
        assert arrived.wait(10)
        time.sleep(0.2)  # the half line waits for its end, or for the process's end
        assert [n.text for n in notes] == ["trial 1: kept"]
        out.write(b' a line"')
    assert [n.text for n in notes] == ["trial 1: kept", "half a line"]


@pytest.mark.slow
def test_a_max_qps_search_reports_each_trial_while_it_runs(dlbs_cli, tmp_path):
    run = dlbs_cli("run", "-P", "exp.framework=dummy", "-P", "dummy.sleep=0.02",
                   "-P", "exp.replica_batch=4", "-P", "exp.min_duration_s=0.3",
                   "-P", "exp.min_query_count=10", "-P", "exp.latency_bound_ms=200",
                   "-P", "exp.scenario=max_qps", "--progress", "lines", cwd=tmp_path,
                   timeout=300)
    assert run.returncode == 0, run.stderr
    lines = run.stderr.splitlines()
    trials = [line for line in lines if ": max_qps trial " in line]
    assert trials and all(" running     dummy resnet50 inference float32 max_qps batch 4 [" in
                          line and ("bound kept" in line or "bound broken" in line)
                          for line in trials)
    assert any(": max_qps: server trials from " in line for line in lines)
    (log,) = (tmp_path / "logs").glob("dummy_cpu_resnet50_max_qps_4_*.log")
    assert log.with_suffix(".loadgen").is_dir()
    values = parse_log(log).values
    assert values["results.max_qps_trials"] == len(trials)
    assert "progress" not in values
    with sqlite3.connect(tmp_path / "logs" / "results.db") as db:
        (results,) = db.execute("SELECT results FROM attempts").fetchone()
    assert "progress" not in json.loads(results)
