"""MLPerf scenarios driven by MLCommons LoadGen, the backend being the system under test.

`run_evaluation(system, options, ...)` runs `options.scenario` against an `InferenceSystem`
and returns the protocol's `results.*` keys (docs/backends/protocol.md section 4), read from
LoadGen's own log (`loadgen_log`) and, for `accuracy`, from the answers. How each scenario
is served (docs/evaluation.md says the same for users):

- single_stream, multi_stream: LoadGen issues one query at a time (1 and `batch_size`
  samples); the query runs as one batch on LoadGen's thread and completes when it is done.
- offline: one query of all samples, served in batches of `batch_size` (the last one may be
  smaller), each batch completed as soon as it is done.
- server: queries arrive at `target_qps` (Poisson); a thread of their own takes whatever
  waits, up to `batch_size` samples, as one batch.
- max_qps: server under LoadGen's FindPeakPerformance mode, which doubles the rate until
  the latency percentile breaks the bound, then bisects. It must start from a rate that
  passes: one over the measured batch-1 latency, halved until it passes.
- accuracy: LoadGen's AccuracyOnly mode issues every sample once (offline queries, loading
  the dataset in parts); top-1 and top-5 are counted here.

Before LoadGen starts, each batch size the scenario uses is warmed up, and the latencies
that size LoadGen's run (expected latency, expected QPS, the starting rate) are measured.
An exception in a LoadGen callback cannot travel through LoadGen's C++ code: it goes to
`abort`, which reports it and ends the process. So does SIGTERM or SIGINT (a timeout, Ctrl-C):
while LoadGen waits in C++ the main thread runs no Python, so the backend's own handler
would never run; a watcher thread learns of the signal from Python's wakeup fd instead.
"""

from __future__ import annotations

import array
import collections
import os
import signal
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from typing import Any

from .accuracy import AccuracyCounter, read_labels
from .loadgen_log import LoadGenLog
from .options import EvaluationOptions
from .system import InferenceSystem

#: The version dlbs pins (pyproject.toml); another one is used, and named in the log.
LOADGEN_VERSION = "6.0.17"
#: How many times max_qps halves a starting rate that breaks the bound before giving up.
MAX_START_HALVINGS = 10
#: Calibration: timed repetitions of a batch after the warm-up.
CALIBRATION_REPEATS = 5


class EvaluationSetupError(ValueError):
    """An evaluation this machine cannot run as asked (LoadGen missing, a bad labels file)."""


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


def run_evaluation(system: InferenceSystem, options: EvaluationOptions, *, batch_size: int,
                   warmup: int, say: Callable[[str], None],
                   abort: Callable[[BaseException], None]) -> dict[str, Any]:
    """Run `options.scenario`; return the `results.*` keys. See the module doc."""
    abort = _once(abort)
    _watch_signals(abort)
    return _Harness(system, options, batch_size, max(1, warmup), say, abort).run()


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
        self.names: list[str] | None = None
        if options.labels:
            try:
                self.names = read_labels(options.labels, system.num_classes)
            except ValueError as error:
                raise EvaluationSetupError(str(error)) from None
        self.accuracy: AccuracyCounter | None = None
        self.top = 0
        if self.scenario == "accuracy":
            self.accuracy = AccuracyCounter(system.total_samples,
                                            keep_predictions=bool(options.predictions_file))
            self.top = max(5, options.top)
        # The server's queue, served by a thread of its own.
        self._pending: collections.deque = collections.deque()
        self._wake = threading.Condition()
        self._stopping = False

    # -- the run -----------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        lg = self.lg
        folder = self.options.loadgen_dir
        os.makedirs(folder, exist_ok=True)
        for name in os.listdir(folder):  # an earlier attempt's logs: LoadGen's names only
            if "mlperf_log_" in name and os.path.isfile(os.path.join(folder, name)):
                os.remove(os.path.join(folder, name))
        threaded = self.scenario in ("server", "max_qps")
        sut = lg.ConstructSUT(self._issue_to_queue if threaded else self._issue_here,
                              self._flush)
        qsl = lg.ConstructQSL(self.system.total_samples, self.system.performance_samples,
                              self._load, self._unload)
        worker = None
        try:
            if threaded:
                calibrated: dict[str, float] = {}
                ready = threading.Event()
                worker = threading.Thread(target=self._serve_queue, name="dlbs-server",
                                          args=(calibrated, ready), daemon=True)
                worker.start()
                ready.wait()
            else:
                calibrated = self._prepare()
            if self.scenario == "max_qps":
                results = self._find_peak(sut, qsl, calibrated["batch1_ms"])
            else:
                self._start(sut, qsl, self._settings(calibrated))
                results = self._results()
        finally:
            if worker is not None:
                with self._wake:
                    self._stopping = True
                    self._wake.notify_all()
                worker.join()
            lg.DestroyQSL(qsl)
            lg.DestroySUT(sut)
        results["results.loadgen_log_dir"] = folder
        return results

    def _start(self, sut: Any, qsl: Any, settings: Any) -> None:
        log_settings = self.lg.LogSettings()
        log_settings.log_output.outdir = self.options.loadgen_dir
        log_settings.log_output.copy_summary_to_stdout = False
        log_settings.log_output.prefix_with_datetime = False
        # A trace has an event per sample: bounded by the latency (single_stream,
        # multi_stream) or the dataset (accuracy), none per sample for offline; a server at
        # tens of thousands of samples a second (max_qps: for each rate tried) would write
        # gigabytes.
        log_settings.enable_trace = self.scenario not in ("server", "max_qps")
        self.lg.StartTestWithLogSettings(sut, qsl, settings, log_settings, "")

    # -- warm-up and calibration -------------------------------------------------------------
    def _batch_sizes(self) -> list[int]:
        """The batch sizes the scenario issues (the backend prepares these shapes)."""
        if self.scenario == "single_stream":
            return [1]
        if self.scenario in ("server", "max_qps"):
            return bucket_sizes(self.batch)
        return [self.batch]

    def _prepare(self) -> dict[str, float]:
        """Warm up the scenario's batch sizes and time those that size LoadGen's run."""
        system = self.system
        largest = min(self.batch, system.total_samples, system.performance_samples)
        resident = list(range(max(largest, 1)))
        system.load(resident)
        sizes = [size for size in self._batch_sizes() if size <= len(resident)] or [1]
        self.say(f"warm-up: batch sizes {sizes}, {self.warmup} time(s) each")
        system.warm_up(sizes, self.warmup)
        calibrated: dict[str, float] = {}
        if self.scenario in ("single_stream", "max_qps"):
            calibrated["batch1_ms"] = self._median_ms(resident[:1])
        if self.scenario in ("multi_stream", "offline"):
            calibrated["batch_ms"] = self._median_ms(resident[:self.batch])
            calibrated["batch_samples"] = float(len(resident[:self.batch]))
        system.unload(resident)
        if calibrated:
            self.say("calibration: " + ", ".join(f"{k}={v:.4g}" for k, v in calibrated.items()))
        return calibrated

    def _median_ms(self, indices: Sequence[int]) -> float:
        times = []
        for _ in range(CALIBRATION_REPEATS):
            start = time.perf_counter()
            self.system.infer(indices)
            times.append((time.perf_counter() - start) * 1000.0)
        return sorted(times)[len(times) // 2]

    # -- LoadGen's settings ------------------------------------------------------------------
    def _settings(self, calibrated: dict[str, float]) -> Any:
        lg, options = self.lg, self.options
        settings = lg.TestSettings()
        settings.mode = lg.TestMode.PerformanceOnly
        settings.min_duration_ms = max(1, int(round(options.min_duration_s * 1000)))
        settings.min_query_count = options.min_query_count
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
            settings.offline_expected_qps = \
                1.2 * calibrated["batch_samples"] * 1000.0 / max(calibrated["batch_ms"], 1e-6)
        elif self.scenario == "server":
            settings.scenario = lg.TestScenario.Server
            settings.server_target_qps = options.target_qps
            self._bound(settings)
        elif self.scenario == "accuracy":
            settings.scenario = lg.TestScenario.Offline
            settings.mode = lg.TestMode.AccuracyOnly
        return settings

    def _bound(self, settings: Any) -> None:
        settings.server_target_latency_ns = _ns(self.options.latency_bound_ms)
        settings.server_target_latency_percentile = self.options.latency_percentile / 100.0

    # -- max_qps -----------------------------------------------------------------------------
    def _find_peak(self, sut: Any, qsl: Any, batch1_ms: float) -> dict[str, Any]:
        """FindPeakPerformance from one over the batch-1 latency, halved until it passes."""
        lg = self.lg
        rate = 1000.0 / max(batch1_ms, 1e-6)
        for attempt in range(MAX_START_HALVINGS + 1):
            settings = lg.TestSettings()
            settings.scenario = lg.TestScenario.Server
            settings.mode = lg.TestMode.FindPeakPerformance
            settings.min_duration_ms = max(1, int(round(self.options.min_duration_s * 1000)))
            settings.min_query_count = self.options.min_query_count
            settings.server_target_qps = rate
            # Bisect to whole queries per second: each step is one run of min_duration.
            settings.server_find_peak_qps_decimals_of_precision = 0
            settings.server_find_peak_qps_boundary_step_size = 1.0
            self._bound(settings)
            self.say(f"max_qps: FindPeakPerformance from {rate:.6g} queries/s")
            self._start(sut, qsl, settings)
            log = LoadGenLog(self.options.loadgen_dir)
            peak = log.peak_qps()
            if peak is not None:
                results = self._results(log)
                results["results.max_qps"] = peak
                results["results.target_qps"] = rate
                return results
            p99 = log.results().get("results.latency_p99")
            self.say(f"max_qps: {rate:.6g} queries/s breaks the bound (p99 {p99} ms); halving")
            self._set_aside(f"start{attempt + 1}_")
            rate /= 2.0
        raise RuntimeError(f"max_qps: no query rate down to {rate * 2:.3g}/s keeps the "
                           f"{self.options.latency_percentile:g}th percentile latency under "
                           f"{self.options.latency_bound_ms:g} ms")

    def _set_aside(self, prefix: str) -> None:
        """Rename a rejected start's logs so that the next run's keep LoadGen's names."""
        folder = self.options.loadgen_dir
        for name in os.listdir(folder):
            if name.startswith("mlperf_log_"):
                os.replace(os.path.join(folder, name), os.path.join(folder, prefix + name))

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
        log = log or LoadGenLog(self.options.loadgen_dir)
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

    def _issue_here(self, samples: Sequence[Any]) -> None:
        """Serve a query on LoadGen's thread, in batches, two in flight (see `submit`).

        Each batch's samples are completed as soon as it has finished and the next batch
        is started, so the device never waits for the host's bookkeeping. A query of one
        batch (single_stream, multi_stream) is served and completed at once.
        """
        try:
            in_flight = None
            for start in range(0, len(samples), self.batch):
                batch = samples[start:start + self.batch]
                started = (batch, self._submit(batch))
                if in_flight is not None:
                    self._complete(*in_flight)
                in_flight = started
            if in_flight is not None:
                self._complete(*in_flight)
        except BaseException as error:  # noqa: BLE001
            self.abort(error)

    def _issue_to_queue(self, samples: Sequence[Any]) -> None:
        with self._wake:
            self._pending.extend(samples)
            self._wake.notify()

    def _serve_queue(self, calibrated: dict[str, float], ready: threading.Event) -> None:
        """The server's thread: prepare, then batch whatever waits, up to `batch_size`.

        Two batches in flight, as in `_issue_here`: a finished batch is completed right
        after the next one has started, or at once when nothing else waits.
        """
        try:
            self.system.bind_thread()
            calibrated.update(self._prepare())
            ready.set()
            in_flight = None
            while True:
                with self._wake:
                    while not self._pending and not self._stopping and in_flight is None:
                        self._wake.wait()
                    count = min(self.batch, len(self._pending))
                    batch = [self._pending.popleft() for _ in range(count)]
                if not batch and in_flight is None:
                    return  # stopping, and nothing waits or runs
                started = (batch, self._submit(batch)) if batch else None
                if in_flight is not None:
                    self._complete(*in_flight)
                in_flight = started
        except BaseException as error:  # noqa: BLE001
            ready.set()
            self.abort(error)

    def _submit(self, samples: Sequence[Any]) -> Callable[[], Any]:
        return self.system.submit([sample.index for sample in samples], top=self.top)

    def _complete(self, samples: Sequence[Any], wait: Callable[[], Any]) -> None:
        """Wait for a started batch, then complete its samples with LoadGen."""
        answer = wait()
        if self.accuracy is None or answer is None:
            self.lg.QuerySamplesComplete(
                [self.lg.QuerySampleResponse(sample.id, 0, 0) for sample in samples])
            return
        classes, probabilities = answer
        buffers = []
        responses = []
        for sample, best, chances in zip(samples, classes, probabilities):
            self.accuracy.add(sample.index, self.system.label(sample.index), best, chances)
            # The accuracy log (mlperf_log_accuracy.json) keeps each sample's top-5 classes.
            data = array.array("i", [int(c) for c in list(best)[:5]])
            address, length = data.buffer_info()
            buffers.append(data)
            responses.append(self.lg.QuerySampleResponse(sample.id, address,
                                                         length * data.itemsize))
        self.lg.QuerySamplesComplete(responses)
        del buffers  # LoadGen has copied the data


def _ns(milliseconds: float) -> int:
    return max(1, int(round(milliseconds * 1e6)))


def default_abort(error: BaseException) -> None:
    """Print the traceback and end the process at once (LoadGen cannot be unwound)."""
    traceback.print_exception(type(error), error, error.__traceback__)
    os._exit(1)
