"""MLPerf scenarios driven by MLCommons LoadGen, the backend being the system under test.

`run_evaluation(system, options, ...)` runs `options.scenario` against an `InferenceSystem`
and returns the protocol's `results.*` keys (docs/backends/protocol.md section 4), read from
LoadGen's own log (`loadgen_log`) and, for `accuracy`, from the answers. docs/evaluation.md
says the same for users ("How the backends serve LoadGen", "Getting the GPU's real numbers").

Before LoadGen starts, everything its run will use is made ready, so that nothing compiles,
autotunes or captures inside it:
- every batch size the scenario can form is prepared on every lane of the system (a stream
  of a device; `InferenceSystem.prepare`): single_stream 1; multi_stream, offline and
  accuracy `batch_size` (a shorter last batch is padded up to it); server and max_qps 1, 2,
  4, ... up to `batch_size` (`bucket_sizes`: a batch in between is padded up to the next);
- the numbers that size LoadGen's run are measured on the path that will serve: the batch-1
  and full-batch latencies on lane 0, the rate of full batches through the lanes' threads;
- Python's garbage collector is frozen over what preparing made (a collection inside the
  run then scans only what the run makes) and the thread switch interval is shortened
  (`SWITCH_INTERVAL_S`), so that LoadGen's thread, which needs the interpreter to issue each
  query, never waits long for a thread that launches a batch.
The system's count of compilations is read before and after the run: the difference is
`results.recompiles`, and more than 0 adds a warning (`results.stats_warnings`). On a
device that runs asynchronously, the share of each batch's time spent launching it is
`results.launch_fraction`; above `HOST_BOUND_FRACTION` the host, not the device, set the
pace, and a warning says so.

Serving:
- single_stream, multi_stream: LoadGen issues one query at a time; it runs as one batch on
  lane 0, on LoadGen's thread, and completes when it is done.
- offline, accuracy, server, max_qps: the samples of every query wait in one queue
  (`SampleQueue`); each lane has a thread that, whenever its lane is free, takes up to
  `batch_size` waiting samples as one batch, runs it, and completes its samples. server and
  max_qps: a batch that is not full waits until its first sample has waited
  `max_queue_delay_ms` (0: it never waits).
- The host's work per sample is kept to a few C-level list operations, so that one Python
  process keeps several GPUs fed (docs/evaluation.md, "Several GPUs"): LoadGen's fast system
  under test hands each query over as two lists of ints (response ids, sample indices), not
  an object per sample; a batch is a slice of them; and each lane completes its samples with
  `batch_size` response objects of its own, made before LoadGen's run, whose ids it sets.
- max_qps: server runs at rates the harness searches (`_find_peak`): from 0.9 of the
  calibrated rate, up while the latency percentile keeps the bound and down while it
  breaks it, then bisecting to `MAX_QPS_PRECISION`; bounded (`MAX_QPS_TRIALS`, trials cut at
  `MAX_QPS_TRIAL_STRETCH` x the minimum duration, no rate too low to fill one).
- accuracy: LoadGen's AccuracyOnly mode issues every sample once (offline queries, loading
  the dataset in parts); top-1 and top-5 are counted here.

Progress: before LoadGen's run, and after each max_qps trial (its rate and verdict), the
harness prints a progress note (`__progress__=`, docs/backends/protocol.md section 3), which
`dlbs run` shows while the experiment runs: a max_qps search can take many minutes.

An exception in a LoadGen callback cannot travel through LoadGen's C++ code: it goes to
`abort`, which reports it and ends the process. So does SIGTERM or SIGINT (a timeout, Ctrl-C):
while LoadGen waits in C++ the main thread runs no Python, so the backend's own handler
would never run; a watcher thread learns of the signal from Python's wakeup fd instead.
"""

from __future__ import annotations

import array
import bisect
import gc
import math
import os
import shutil
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from .accuracy import AccuracyCounter, read_labels
from .loadgen_log import LoadGenLog
from .options import EvaluationOptions
from .protocol import emit_progress
from .sample_queue import SampleQueue
from .system import InferenceSystem
from .timed_marks import TimedMarks, print_line

#: The version dlbs pins (pyproject.toml); another one is used, and named in the log.
LOADGEN_VERSION = "6.0.17"
#: Calibration: timed repetitions of a batch on lane 0 after the warm-up.
CALIBRATION_REPEATS = 5
#: Calibration of the rate: timed rounds of full batches through the lanes (after one
#: untimed round), each of this many batches per lane.
RATE_ROUNDS = 3
RATE_BATCHES_PER_LANE = 4
#: Python's thread switch interval while LoadGen runs, s (Python's default is 5 ms: a thread
#: that launches a batch would hold LoadGen's issuing thread up to that long per query).
SWITCH_INTERVAL_S = 0.0005
#: The scenarios whose samples wait in the queue the lanes' threads serve.
QUEUED_SCENARIOS = ("offline", "accuracy", "server", "max_qps")
#: max_qps: the first rate tried, as a fraction of the calibrated rate of full batches.
MAX_QPS_FIRST_RATE = 0.9
#: max_qps ends when the lowest rate that broke the bound is within this fraction above
#: the highest that kept it.
MAX_QPS_PRECISION = 0.02
#: max_qps: a rate that broke the bound, with none kept yet, is followed by this fraction
#: of it; a rate that kept it, with none broken yet, by 1.12 times it, then 1.25, 1.5, 2.
MAX_QPS_STEP_DOWN = 0.6
MAX_QPS_FIRST_STEP_UP = 1.12
#: max_qps: at most this many trials; each is cut at this many times exp.min_duration_s, and
#: no rate is tried that cannot fill such a trial with exp.min_query_count queries.
MAX_QPS_TRIALS = 16
MAX_QPS_TRIAL_STRETCH = 2.0
#: A run whose batches spent more than this share of their time being launched (on a device
#: that runs asynchronously) carries a warning: the host set its pace, not the device.
HOST_BOUND_FRACTION = 0.5
#: How many `<root>.attemptN<ext>` names `claim_folder` tries beside a taken LoadGen folder.
MAX_FOLDER_NAMES = 10_000


class EvaluationSetupError(ValueError):
    """An evaluation this machine cannot run as asked (LoadGen missing, a bad labels file)."""


class BoundNotMet(RuntimeError):
    """max_qps: no rate tried kept the latency percentile under the bound."""


def import_loadgen():
    """The `mlperf_loadgen` module, or an EvaluationSetupError saying how to install it."""
    try:
        import mlperf_loadgen
    except ImportError:
        raise EvaluationSetupError(
            "the scenarios need MLCommons LoadGen, which this Python lacks: pip install "
            f"mlcommons-loadgen=={LOADGEN_VERSION} (in the container image, for exp.docker "
            "runs)") from None
    return mlperf_loadgen


def bucket_sizes(batch_size: int) -> list[int]:
    """1, 2, 4, ... up to `batch_size` (included): the batches a server may form."""
    sizes, size = [], 1
    while size < batch_size:
        sizes.append(size)
        size *= 2
    return sizes + [batch_size]


def padded_size(sizes: Sequence[int], count: int) -> int:
    """The prepared size (ascending `sizes`) a batch of `count` samples is padded up to."""
    at = bisect.bisect_left(sizes, count)
    return sizes[at] if at < len(sizes) else count


def claim_folder(path: str) -> str:
    """A folder of this run's own for LoadGen's logs: `path`, else the next free name.

    Beside a taken `path` (an earlier attempt's folder, or anything else), the names are
    `<root>.attempt2<ext>`, `<root>.attempt3<ext>`, ... as the run loop names an attempt's
    log: each run keeps its evidence. Created with mkdir, which never follows or reuses
    what is already there.
    """
    parent = os.path.dirname(os.path.abspath(path))
    try:
        os.makedirs(parent, exist_ok=True)
    except OSError as error:
        raise EvaluationSetupError(f"--loadgen_dir {path}: cannot make its folder: "
                                   f"{error.strerror or error}") from None
    root, ext = os.path.splitext(path)
    for number in range(1, MAX_FOLDER_NAMES + 1):
        candidate = path if number == 1 else f"{root}.attempt{number}{ext}"
        try:
            os.mkdir(candidate)
        except FileExistsError:
            continue
        except OSError as error:
            raise EvaluationSetupError(f"--loadgen_dir {candidate}: cannot make it: "
                                       f"{error.strerror or error}") from None
        return candidate
    raise EvaluationSetupError(f"--loadgen_dir {path}: {MAX_FOLDER_NAMES} names beside it "
                               "are taken")


def run_evaluation(system: InferenceSystem, options: EvaluationOptions, *, batch_size: int,
                   warmup: int, say: Callable[[str], None],
                   abort: Callable[[BaseException], None]) -> dict[str, Any]:
    """Run `options.scenario`; return the `results.*` keys. See the module doc."""
    return _Harness(system, options, batch_size, max(1, warmup), say, guarded(abort)).run()


def guarded(abort: Callable[[BaseException], None]) -> Callable[[BaseException], None]:
    """`abort` for the first failure only, and SIGTERM and SIGINT reported through it.

    LoadGen's C++ code cannot be unwound: a failure in a callback or a signal while it runs
    ends the process through `abort` (the module doc).
    """
    abort = _once(abort)
    _watch_signals(abort)
    return abort


def _once(abort: Callable[[BaseException], None]) -> Callable[[BaseException], None]:
    """`abort` for the first failure only (a signal and a callback may both report one)."""
    lock = threading.Lock()

    def first(error: BaseException) -> None:
        if lock.acquire(blocking=False):
            abort(error)
        else:  # another thread is reporting; it ends the process
            threading.Event().wait()

    return first


def _watch_signals(abort: Callable[[BaseException], None]) -> None:
    """Report SIGTERM and SIGINT from a thread of their own (see the module doc).

    The backend's handlers stay installed (they make Python write the signal's number to the
    wakeup fd, whichever thread the signal reaches); with no Python handler, the signal's
    default action ends the process as before.
    """
    if threading.current_thread() is not threading.main_thread():
        return  # set_wakeup_fd belongs to the main thread
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    signal.set_wakeup_fd(write_end)

    def watch() -> None:
        data = os.read(read_end, 1)
        number = data[0] if data else signal.SIGTERM
        abort(InterruptedError(f"terminated by {signal.Signals(number).name}"))

    threading.Thread(target=watch, name="dlbs-signals", daemon=True).start()


class Tally:
    """Counts completed samples; `finished` is set once `expected` are (calibration's sink)."""

    def __init__(self, expected: int) -> None:
        self.expected = expected
        self.done = 0
        self.lock = threading.Lock()
        self.finished = threading.Event()

    def count(self, done: int) -> None:
        with self.lock:
            self.done += done
            if self.done >= self.expected:
                self.finished.set()

    def add(self, ids: Sequence[int], indices: Sequence[int], answer: Any, lane: int) -> None:
        """A lane's completed batch (the harness's `_respond`)."""
        self.count(len(ids))

    def wait(self) -> None:
        self.finished.wait()


class _Serving:
    """What the lanes served in one LoadGen run: batches, samples, padding, host and wall time.

    `launch_s` is the time spent starting batches (`submit`), `busy_s` from each start to its
    answer: on a device that runs asynchronously, a launch that takes most of a batch's time
    means the host, not the device, set the pace.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.batches = 0
        self.samples = 0
        self.computed = 0
        self.launch_s = 0.0
        self.busy_s = 0.0

    def add(self, count: int, padded: int, launch_s: float, busy_s: float) -> None:
        with self.lock:
            self.batches += 1
            self.samples += count
            self.computed += padded
            self.launch_s += launch_s
            self.busy_s += busy_s

    def line(self) -> str:
        if not self.batches:
            return "served no batch"
        return (f"served {self.batches} batches, {self.samples / self.batches:.1f} samples "
                f"each on average, {100.0 * (self.computed - self.samples) / self.computed:.1f}%"
                f" of the computed rows padding, {1000.0 * self.launch_s / self.batches:.3g} ms"
                f" of {1000.0 * self.busy_s / self.batches:.3g} ms per batch launching it")

    def launch_fraction(self) -> float | None:
        """The share of the batches' time spent launching them (None: no batch served)."""
        return self.launch_s / self.busy_s if self.batches and self.busy_s > 0 else None


class _Harness:
    def __init__(self, system: InferenceSystem, options: EvaluationOptions, batch_size: int,
                 warmup: int, say: Callable[[str], None],
                 abort: Callable[[BaseException], None]) -> None:
        self.lg = import_loadgen()
        self.system = system
        self.options = options
        self.scenario = options.scenario
        self.batch = batch_size
        self.warmup = warmup
        self.say = say
        self.abort = abort
        self.folder = options.loadgen_dir
        self.names: list[str] | None = None
        if options.labels:
            try:
                self.names = read_labels(options.labels, system.num_classes)
            except ValueError as error:
                raise EvaluationSetupError(str(error)) from None
        self.accuracy: AccuracyCounter | None = None
        self.accuracy_lock = threading.Lock()
        self.top = 0
        if self.scenario == "accuracy":
            self.accuracy = AccuracyCounter(system.total_samples,
                                            keep_predictions=bool(options.predictions_file),
                                            num_classes=system.num_classes)
            self.top = max(5, options.top)
        self.sizes = self._batch_sizes()
        # The queue of the queued scenarios, served by the lanes' threads.
        self.queued = self.scenario in QUEUED_SCENARIOS
        self.delay_s = options.max_queue_delay_ms / 1000.0 \
            if self.scenario in ("server", "max_qps") else 0.0
        self._queue = SampleQueue()
        self._wake = threading.Condition()
        self._stopping = False
        self._respond: Callable[[list[int], list[int], Any, int], None] = self._complete
        # Per lane, `batch_size` QuerySampleResponse objects made before LoadGen's run and
        # reused for every batch the lane completes (a new object per sample costs several
        # times as much as setting its id: pybind11 allocates and registers each one).
        self._responses: list[list[Any]] = []
        self._serving = _Serving()

    # -- the run -----------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        lg = self.lg
        self.folder = claim_folder(self.options.loadgen_dir)
        # The fast system under test: each query comes as two lists of ints (ids, indices),
        # not as a QuerySample object per sample, which an offline query of a million
        # samples would spend seconds of its timed run making.
        sut = lg.ConstructFastSUT(self._issue_to_queue if self.queued else self._issue_here,
                                  self._flush)
        qsl = lg.ConstructQSL(self.system.total_samples, self.system.performance_samples,
                              self._load, self._unload)
        lanes: list[threading.Thread] = []
        switch_interval = sys.getswitchinterval()
        try:
            calibrated = self._prepare(lanes)
            before = self.system.compilations()
            gc.collect()
            gc.freeze()
            sys.setswitchinterval(SWITCH_INTERVAL_S)
            try:
                if self.scenario == "max_qps":
                    results, serving = self._find_peak(sut, qsl, calibrated["rate_qps"])
                else:
                    settings = self._settings(calibrated)
                    self._announce()
                    marks = TimedMarks.for_this_process(print_line)  # the energy's interval
                    marks.start()
                    self._start(sut, qsl, settings)
                    marks.end()
                    serving = self._serving
                    self.say(serving.line())
                    results = self._results()
            finally:
                sys.setswitchinterval(switch_interval)
                gc.unfreeze()
            recompiles = self.system.compilations() - before
        finally:
            with self._wake:
                self._stopping = True
                self._wake.notify_all()
            for lane in lanes:
                lane.join()
            lg.DestroyQSL(qsl)
            lg.DestroyFastSUT(sut)
        results["results.recompiles"] = recompiles
        warnings = []
        if recompiles:
            warnings.append(f"results.recompiles: {recompiles} compilation(s), graph capture(s) "
                            "or unprepared batch shape(s) inside LoadGen's timed run; its "
                            "latencies and rates include them")
        fraction = serving.launch_fraction()
        if self.system.asynchronous and fraction is not None:
            results["results.launch_fraction"] = fraction
            if fraction > HOST_BOUND_FRACTION:
                warnings.append(
                    f"results.launch_fraction: launching a batch took {100 * fraction:.0f}% of "
                    "its time from start to answer: the host's launches, not the device, set "
                    "this run's pace (CUDA graphs launch a whole batch at once)")
        if warnings:
            results["results.stats_warnings"] = warnings
            for warning in warnings:
                self.say(f"warning: {warning}")
        results["results.loadgen_log_dir"] = self.folder
        return results

    def _announce(self) -> None:
        """The progress note of a LoadGen run about to start, and how long it may take."""
        options = self.options
        if self.scenario == "accuracy":
            emit_progress(f"accuracy: LoadGen issues each of {self.system.total_samples} "
                          "samples once", scenario=self.scenario)
        else:
            emit_progress(f"{self.scenario}: LoadGen runs at least {options.min_duration_s:g} s "
                          f"and {options.min_query_count} queries", scenario=self.scenario,
                          min_duration_s=options.min_duration_s)

    def _start(self, sut: Any, qsl: Any, settings: Any) -> None:
        self._serving = _Serving()
        start_test(self.lg, sut, qsl, settings, self.folder, self.scenario)

    # -- preparation and calibration ---------------------------------------------------------
    def _batch_sizes(self) -> list[int]:
        """The batch sizes the scenario forms, padded up to (the system prepares these)."""
        if self.scenario == "single_stream":
            return [1]
        if self.scenario in ("server", "max_qps"):
            return bucket_sizes(self.batch)
        return [self.batch]

    def _prepare(self, lanes: list[threading.Thread]) -> dict[str, float]:
        """Prepare every batch size on every lane, start the lanes, measure the calibration."""
        system = self.system
        largest = min(self.batch, system.total_samples, system.performance_samples)
        resident = list(range(max(largest, 1)))
        system.load(resident)
        self.say(f"prepare: batch sizes {self.sizes} on {system.lanes} lane(s), "
                 f"{self.warmup} time(s) each")
        began = time.perf_counter()
        system.prepare(self.sizes, self.warmup, resident)
        self.say(f"prepared in {time.perf_counter() - began:.1f} s")
        self._responses = [[self.lg.QuerySampleResponse(0, 0, 0) for _ in range(self.batch)]
                           for _ in range(system.lanes)]
        calibrated: dict[str, float] = {}
        if self.scenario == "single_stream":
            calibrated["batch1_ms"] = self._median_ms(resident[:1])
        if self.scenario == "multi_stream":
            calibrated["batch_ms"] = self._median_ms(
                [resident[i % len(resident)] for i in range(self.batch)])
        if self.queued:
            for lane in range(system.lanes):
                thread = threading.Thread(target=self._serve, args=(lane,),
                                          name=f"dlbs-lane{lane}", daemon=True)
                thread.start()
                lanes.append(thread)
            if self.scenario in ("offline", "max_qps"):
                calibrated["rate_qps"] = self._measure_rate(resident)
        system.unload(resident)
        if calibrated:
            self.say("calibration: " + ", ".join(f"{k}={v:.4g}" for k, v in calibrated.items()))
        return calibrated

    def _median_ms(self, indices: Sequence[int]) -> float:
        """The median time of one batch on lane 0 (the path single and multi stream serve)."""
        times = []
        for _ in range(CALIBRATION_REPEATS):
            start = time.perf_counter()
            self.system.infer(indices)
            times.append((time.perf_counter() - start) * 1000.0)
        return sorted(times)[len(times) // 2]

    def _measure_rate(self, resident: Sequence[int]) -> float:
        """Samples per second of full batches served by the lanes' threads, as LoadGen's are.

        One untimed round, then `RATE_ROUNDS` timed ones; the median round's rate.
        """
        count = RATE_BATCHES_PER_LANE * self.system.lanes * self.batch
        rates = []
        try:
            for round_number in range(RATE_ROUNDS + 1):
                tally = Tally(count)
                self._respond = tally.add
                start = time.perf_counter()
                self._enqueue([0] * count, [resident[i % len(resident)] for i in range(count)])
                tally.wait()
                if round_number:
                    rates.append(count / max(time.perf_counter() - start, 1e-9))
        finally:
            self._respond = self._complete
        return sorted(rates)[len(rates) // 2]

    # -- LoadGen's settings ------------------------------------------------------------------
    def _settings(self, calibrated: dict[str, float]) -> Any:
        lg, options = self.lg, self.options
        settings = performance_settings(lg, options)
        # Expected latencies a little low and rates a little high: LoadGen then generates
        # more queries than the minimum duration needs, never fewer (which would make the
        # run end early and invalid).
        if self.scenario == "single_stream":
            settings.scenario = lg.TestScenario.SingleStream
            settings.single_stream_expected_latency_ns = _ns(calibrated["batch1_ms"] * 0.5)
        elif self.scenario == "multi_stream":
            settings.scenario = lg.TestScenario.MultiStream
            settings.multi_stream_samples_per_query = self.batch
            settings.multi_stream_expected_latency_ns = _ns(calibrated["batch_ms"] * 0.5)
        elif self.scenario == "offline":
            settings.scenario = lg.TestScenario.Offline
            settings.offline_expected_qps = 1.2 * calibrated["rate_qps"]
        elif self.scenario == "server":
            self._server(settings, options.target_qps)
        elif self.scenario == "accuracy":
            settings.scenario = lg.TestScenario.Offline
            settings.mode = lg.TestMode.AccuracyOnly
        return settings

    def _server(self, settings: Any, rate: float) -> None:
        settings.scenario = self.lg.TestScenario.Server
        settings.server_target_qps = rate
        settings.server_target_latency_ns = _ns(self.options.latency_bound_ms)
        settings.server_target_latency_percentile = self.options.latency_percentile / 100.0
        # Queries that are due while LoadGen's thread waits for the interpreter are issued
        # together; their latencies still count from when each was due.
        settings.server_coalesce_queries = True

    # -- max_qps -----------------------------------------------------------------------------
    def _find_peak(self, sut: Any, qsl: Any, rate_qps: float) -> tuple[dict[str, Any], _Serving]:
        """The highest server rate whose latency percentile keeps the bound (module doc).

        Every trial is a server run of its own (its logs kept as `trial<N>_mlperf_log_*`);
        the reported one's are also copied to LoadGen's own names.
        """
        options = self.options

        def trial(rate: float, number: int) -> Trial:
            log = self._trial(sut, qsl, rate, number)
            p99 = log.results().get("results.latency_p99")
            shown = f"p99 {p99:.4g} ms" if isinstance(p99, float) else "no p99"
            return Trial(log.values.get("result_perf_constraints_met") is True, shown,
                         self._serving.line(), (log, self._serving), {"latency_p99": p99})

        peak = search_peak(trial, rate_qps, options, self.say,
                           f"{options.latency_percentile:g}th percentile latency",
                           f"{options.latency_bound_ms:g} ms bound")
        best_log, serving = peak.payload
        copy_trial_logs(self.folder, peak.trial)
        results = self._results(best_log)
        results["results.max_qps"] = peak.rate
        results["results.target_qps"] = peak.rate
        results["results.max_qps_trials"] = peak.trials
        return results, serving

    def _trial(self, sut: Any, qsl: Any, rate: float, trial: int) -> LoadGenLog:
        """One server run at `rate` for max_qps; its logs renamed `trial<N>_mlperf_log_*`."""
        settings = trial_settings(self.lg, self.options)
        self._server(settings, rate)
        self._start(sut, qsl, settings)
        log = LoadGenLog(self.folder)
        rename_trial_logs(self.folder, trial)
        return log

    # -- results -----------------------------------------------------------------------------
    def _results(self, log: LoadGenLog | None = None) -> dict[str, Any]:
        if self.accuracy is not None:
            self.accuracy.check_each_once()
            results: dict[str, Any] = self.accuracy.results()
            if self.options.predictions_file:
                self.accuracy.write_predictions(self.options.predictions_file, self.options.top,
                                                self.names, self.system.sample_name)
                results["results.predictions_file"] = self.options.predictions_file
            return results
        log = log or LoadGenLog(self.folder)
        results = log.results()
        if "results.qps" in results:
            results["results.throughput"] = results["results.qps"]
        if self.scenario in ("server", "max_qps"):
            met = log.values.get("result_perf_constraints_met")
            if isinstance(met, bool):
                results["results.latency_bound_met"] = met
        if self.scenario == "server":
            results["results.target_qps"] = self.options.target_qps
        return results

    # -- LoadGen's callbacks -----------------------------------------------------------------
    def _load(self, indices: Sequence[int]) -> None:
        try:
            self.system.load(sorted(set(indices)))
        except BaseException as error:  # noqa: BLE001 - must not cross LoadGen's C++ code
            self.abort(error)

    def _unload(self, indices: Sequence[int]) -> None:
        try:
            self.system.unload(sorted(set(indices)))
        except BaseException as error:  # noqa: BLE001
            self.abort(error)

    def _flush(self) -> None:
        pass

    def _issue_here(self, ids: list[int], indices: list[int]) -> None:
        """single_stream, multi_stream: the query as one batch on lane 0, on this thread."""
        try:
            for start in range(0, len(ids), self.batch):
                batch = indices[start:start + self.batch]
                self._complete(ids[start:start + self.batch], batch, self._run(batch, 0), 0)
        except BaseException as error:  # noqa: BLE001
            self.abort(error)

    def _issue_to_queue(self, ids: list[int], indices: list[int]) -> None:
        try:
            self._enqueue(ids, indices)
        except BaseException as error:  # noqa: BLE001
            self.abort(error)

    def _enqueue(self, ids: list[int], indices: list[int]) -> None:
        with self._wake:
            self._queue.put(ids, indices, time.monotonic())
            self._wake.notify(min(len(ids), self.system.lanes))

    # -- the lanes ---------------------------------------------------------------------------
    def _serve(self, lane: int) -> None:
        """A lane's thread: take a batch when one is ready, run it, complete its samples."""
        try:
            self.system.bind_thread(lane)
            while True:
                batch = self._take()
                if batch is None:
                    return
                ids, indices = batch
                self._respond(ids, indices, self._run(indices, lane), lane)
        except BaseException as error:  # noqa: BLE001
            self.abort(error)

    def _run(self, indices: list[int], lane: int) -> Any:
        """Start a batch on a lane, wait for its answer, and count it (`_Serving`)."""
        start = time.perf_counter()
        wait = self.system.submit(indices, self.top, lane)
        launched = time.perf_counter()
        answer = wait()
        self._serving.add(len(indices), padded_size(self.sizes, len(indices)),
                          launched - start, time.perf_counter() - start)
        return answer

    def _take(self) -> tuple[list[int], list[int]] | None:
        """Up to `batch` waiting samples (ids, indices), once ready (module doc); None: stop."""
        queue = self._queue
        with self._wake:
            while True:
                if queue.waiting:
                    if queue.waiting >= self.batch or self.delay_s <= 0 or self._stopping:
                        break
                    remaining = queue.oldest_arrival() + self.delay_s - time.monotonic()
                    if remaining <= 0:
                        break
                    self._wake.wait(remaining)
                elif self._stopping:
                    return None
                else:
                    self._wake.wait()
            batch = queue.take(self.batch)
            if queue.waiting:
                self._wake.notify()  # another free lane may take the rest
            return batch

    def _complete(self, ids: list[int], indices: list[int], answer: Any, lane: int) -> None:
        """Complete a finished batch's samples with LoadGen (accuracy: count the answers)."""
        if self.accuracy is None or answer is None:
            # The lane's own response objects, their ids set (LoadGen copies them).
            responses = self._responses[lane]
            if len(ids) != len(responses):
                responses = responses[:len(ids)]
            for response, sample_id in zip(responses, ids):
                response.id = sample_id
            self.lg.QuerySamplesComplete(responses)
            return
        classes, probabilities = answer
        buffers = []
        responses = []
        with self.accuracy_lock:
            for sample_id, index, best, chances in zip(ids, indices, classes, probabilities):
                self.accuracy.add(index, self.system.label(index), best, chances)
                # The accuracy log (mlperf_log_accuracy.json) keeps each sample's top-5.
                data = array.array("i", [int(c) for c in list(best)[:5]])
                address, length = data.buffer_info()
                buffers.append(data)
                responses.append(self.lg.QuerySampleResponse(sample_id, address,
                                                             length * data.itemsize))
        self.lg.QuerySamplesComplete(responses)
        del buffers  # LoadGen has copied the data


def start_test(lg: Any, sut: Any, qsl: Any, settings: Any, folder: str, scenario: str) -> None:
    """One LoadGen run, its logs in `folder` (LoadGen's names); returns when it is over."""
    log_settings = lg.LogSettings()
    log_settings.log_output.outdir = folder
    log_settings.log_output.copy_summary_to_stdout = False
    log_settings.log_output.prefix_with_datetime = False
    # A trace has events per sample (about 270 bytes a sample): bounded by the latency
    # (single_stream, multi_stream), the dataset (accuracy) or the one query (offline:
    # 57 MB for 210,000 samples); a server at tens of thousands of samples a second
    # (max_qps: for each rate tried) would write gigabytes.
    log_settings.enable_trace = scenario not in ("server", "max_qps")
    lg.StartTestWithLogSettings(sut, qsl, settings, log_settings, "")


def performance_settings(lg: Any, options: EvaluationOptions) -> Any:
    """LoadGen's settings of a performance run but its scenario (duration, query count)."""
    settings = lg.TestSettings()
    settings.mode = lg.TestMode.PerformanceOnly
    settings.min_duration_ms = max(1, int(round(options.min_duration_s * 1000)))
    settings.min_query_count = options.min_query_count
    return settings


def trial_settings(lg: Any, options: EvaluationOptions) -> Any:
    """The settings of a max_qps trial but its rate: performance mode, its duration bounds."""
    settings = performance_settings(lg, options)
    settings.max_duration_ms = max(settings.min_duration_ms + 1, int(round(
        MAX_QPS_TRIAL_STRETCH * options.min_duration_s * 1000)))
    return settings


def rename_trial_logs(folder: str, trial: int) -> None:
    """A max_qps trial's logs (LoadGen's names) renamed `trial<N>_mlperf_log_*`."""
    for name in os.listdir(folder):
        if name.startswith("mlperf_log_"):
            os.replace(os.path.join(folder, name), os.path.join(folder, f"trial{trial}_{name}"))


def copy_trial_logs(folder: str, trial: int) -> None:
    """The reported trial's logs under LoadGen's own names too (its summary, say)."""
    prefix = f"trial{trial}_"
    for name in os.listdir(folder):
        if name.startswith(prefix + "mlperf_log_"):
            shutil.copyfile(os.path.join(folder, name), os.path.join(folder, name[len(prefix):]))


class Trial(NamedTuple):
    """One max_qps trial, as `search_peak` reads it."""

    #: Whether it kept the bound.
    met: bool
    #: A few words on its latency, for its progress note and the log ("p99 4.1 ms").
    shown: str
    #: A few words on how it was served, for the log.
    served: str
    #: What the caller keeps of it (its log, say).
    payload: Any
    #: The progress note's fields for programs ({"latency_p99": 4.1}).
    fields: dict


class Peak:
    """What `search_peak` found.

    The highest rate that kept the bound, its trial's number and payload, and how many
    trials the search made.
    """

    def __init__(self, rate: float, trial: int, payload: Any, trials: int) -> None:
        self.rate = rate
        self.trial = trial
        self.payload = payload
        self.trials = trials


def search_peak(trial: Callable[[float, int], Trial], calibrated: float,
                options: EvaluationOptions, say: Callable[[str], None], what: str,
                bound: str) -> Peak:
    """The highest server rate whose trial keeps the bound (module doc, max_qps).

    `trial(rate, number)` runs one server trial (a `Trial`). Raises BoundNotMet when no
    rate tried keeps the bound. `what` and `bound` name them in messages ("99th percentile
    latency", "15 ms bound").
    """
    duration_s = max(options.min_duration_s, 1e-3)
    floor = options.min_query_count / (MAX_QPS_TRIAL_STRETCH * duration_s)
    rate = MAX_QPS_FIRST_RATE * calibrated
    if rate < floor:
        raise BoundNotMet(
            f"max_qps: {MAX_QPS_FIRST_RATE:g} of the measured rate ({rate:.4g} queries/s) "
            f"cannot fill a trial of {MAX_QPS_TRIAL_STRETCH:g} x exp.min_duration_s with "
            f"exp.min_query_count ({options.min_query_count}) queries: raise "
            "exp.min_duration_s or lower exp.min_query_count")
    step_up = MAX_QPS_FIRST_STEP_UP
    kept: tuple[float, int, Any] | None = None
    broken: float | None = None
    tried: list[float] = []
    emit_progress(f"max_qps: server trials from {rate:.4g} queries/s, each "
                  f"{duration_s:g} to {MAX_QPS_TRIAL_STRETCH * duration_s:g} s, at most "
                  f"{MAX_QPS_TRIALS}", scenario="max_qps", first_rate_qps=rate)
    for number in range(1, MAX_QPS_TRIALS + 1):
        found = trial(rate, number)
        met, payload = found.met, found.payload
        tried.append(rate)
        verdict = f"{rate:.6g} queries/s, {found.shown}: bound {'kept' if met else 'broken'}"
        say(f"max_qps: trial {number}: {verdict}; {found.served}")
        emit_progress(f"max_qps trial {number}: {verdict}", scenario="max_qps", trial=number,
                      rate_qps=rate, **found.fields, bound_met=met)
        if met and (kept is None or rate > kept[0]):
            kept = (rate, number, payload)
        if not met and (broken is None or rate < broken):
            broken = rate
        if kept is None:
            assert broken is not None
            rate = broken * MAX_QPS_STEP_DOWN
            if rate < floor:
                raise BoundNotMet(
                    f"max_qps: the {what} broke the {bound} at every rate tried ({number} "
                    f"trial(s), {max(tried):.4g} down to {min(tried):.4g} queries/s; a lower "
                    f"rate cannot fill a trial of {MAX_QPS_TRIAL_STRETCH:g} x "
                    f"exp.min_duration_s with exp.min_query_count queries): the bound cannot "
                    "be met")
        elif broken is None:
            rate = kept[0] * step_up
            step_up = min(2.0, 1.0 + 2.0 * (step_up - 1.0))
        elif broken <= kept[0] * (1.0 + MAX_QPS_PRECISION):
            break
        else:
            rate = math.sqrt(kept[0] * broken)
    else:
        if kept is None:
            raise BoundNotMet(f"max_qps: the {what} broke the {bound} at every rate tried "
                              f"({MAX_QPS_TRIALS} trials): the bound cannot be met")
        say(f"max_qps: the search stopped after {MAX_QPS_TRIALS} trials; the highest rate that "
            "kept the bound is reported"
            + (f" (the lowest that broke it: {broken:.6g})" if broken else " (none broke it)"))
    return Peak(kept[0], kept[1], kept[2], len(tried))


def _ns(milliseconds: float) -> int:
    return max(1, int(round(milliseconds * 1e6)))


def default_abort(error: BaseException) -> None:
    """Print the traceback and end the process at once (LoadGen cannot be unwound)."""
    traceback.print_exception(type(error), error, error.__traceback__)
    os._exit(1)
