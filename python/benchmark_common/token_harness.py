"""LLM generation under MLCommons LoadGen, with its token latencies (docs/llm-serving.md).

`run_token_evaluation(system, options, generation, ...)` runs `options.scenario` (server,
offline or max_qps) against a `GenerationSystem` with LoadGen's `use_token_latencies`: a
request's time to first token (TTFT) is from its issue (server: its scheduled arrival) to
the backend's `FirstTokenComplete`, its time per output token (TPOT) the rest of its latency
over its output tokens less one, and LoadGen reads both from its own clock. The results are
LoadGen's, read back from its detail log (`loadgen_log`).

How the requests are served:
- LoadGen's requests wait in one `RequestQueue` (its fast system under test hands each
  query over as two lists of ints, as in harness.py); every replica of the system (an
  engine on a device) has a thread that serves its slots from it by continuous batching
  (`GenerationSystem.serve`) and tells a `Reporter` of its own when requests have their
  first token and when they are complete, as a stamp on the device's timeline;
- each replica's reporter thread takes those in order, waits until the device has passed
  the stamp (`GenerationSystem.wait`) and calls LoadGen then: the latencies are the device's,
  and the serving thread never waits for a token to be reported;
- offline: one query of every request (tokens per second; LoadGen asks no first token).

Before LoadGen starts, the system prepares everything its run uses (compiles, captures) and
serves two rounds of requests through the same queue, threads and reporters; the faster
round's requests per second sizes LoadGen's run (offline's expected rate, max_qps's first
rate). The count of compilations before and after the run is `results.recompiles`.

max_qps searches the highest server rate whose TTFT and TPOT at `--latency_percentile` both
stay under their bounds (`--ttft_bound_ms`, `--tpot_bound_ms`: LoadGen's own verdict, its
"performance constraints satisfied"), with harness.py's search.
"""

from __future__ import annotations

import gc
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from .generation_options import GenerationOptions
from .harness import (
    SWITCH_INTERVAL_S,
    Tally,
    Trial,
    claim_folder,
    copy_trial_logs,
    guarded,
    import_loadgen,
    performance_settings,
    rename_trial_logs,
    search_peak,
    start_test,
    trial_settings,
)
from .loadgen_log import PERCENTILES, LoadGenLog
from .options import EvaluationOptions
from .protocol import emit_progress
from .sample_queue import SampleQueue
from .timed_marks import TimedMarks, print_line

#: The scenarios of a generating system.
TOKEN_SCENARIOS = ("server", "offline", "max_qps")
#: Calibration: rounds of requests served before LoadGen starts (the fastest counts), each
#: of this many requests per slot of every replica.
CALIBRATION_ROUNDS = 2
CALIBRATION_REQUESTS_PER_SLOT = 2
#: A percentile LoadGen reports -> its name in the results keys (99.0 -> "p99").
PERCENTILE_NAMES = {float(number): name[len("latency_"):] for name, number in PERCENTILES}


class GenerationSystem:
    """A backend's generating engines and their requests, for the token harness.

    Requests are numbered 0 .. total_samples - 1 (all resident); `replicas` engines serve
    them, each from a thread of its own.
    """

    total_samples = 1
    performance_samples = 1
    replicas = 1
    #: Request slots of one replica (the most it decodes at once).
    slots = 1
    #: True where the work runs on a device asynchronously (stamps are device events).
    asynchronous = False

    def output_tokens(self, index: int) -> int:
        """How many tokens request `index` generates (its first included)."""
        raise NotImplementedError

    def prepare(self, say: Callable[[str], None]) -> None:
        """Compile and capture everything serving uses, on every replica."""

    def serve(self, replica: int, queue: RequestQueue, report: Reporter) -> None:
        """Serve requests from `queue` until it is closed and every admitted one is complete.

        `report.first(ids, stamp)` and `report.complete(ids, tokens, stamp)` say which
        requests have their first token, or all their `tokens`, once the device passes
        `stamp`.
        """
        raise NotImplementedError

    def bind_thread(self, replica: int) -> None:
        """Prepare the calling thread to serve `replica` (its device, say)."""

    def wait(self, replica: int, stamp: Any) -> None:
        """Until `replica`'s device has passed `stamp`."""

    def compilations(self) -> int:
        """How many compilations the system has met (a counter)."""
        return 0

    def served(self) -> str:
        """What the replicas served since the last call, for the log."""
        return ""


class RequestQueue:
    """The requests LoadGen issued that no replica has taken yet (thread-safe)."""

    def __init__(self) -> None:
        self._waiting = SampleQueue()
        self._ready = threading.Condition()
        self._closed = False

    def put(self, ids: list[int], indices: list[int]) -> None:
        with self._ready:
            self._waiting.put(ids, indices, time.monotonic())
            self._ready.notify_all()

    def take(self, limit: int, block: bool) -> tuple[list[int], list[int]] | None:
        """Up to `limit` waiting requests (ids, indices); with `block`, once there is one.

        None when the queue is closed and empty; ([], []) when nothing waits and `block`
        is false.
        """
        with self._ready:
            while block and not self._waiting.waiting and not self._closed:
                self._ready.wait()
            if self._waiting.waiting:
                return self._waiting.take(limit)
            return None if self._closed else ([], [])

    def close(self) -> None:
        with self._ready:
            self._closed = True
            self._ready.notify_all()


class Reporter:
    """One replica's milestones, told to a sink in order once its device passes each."""

    def __init__(self, wait: Callable[[Any], None], abort: Callable[[BaseException], None]
                 ) -> None:
        self._wait = wait
        self._abort = abort
        self._pending: deque = deque()
        self._ready = threading.Condition()
        self._stopping = False
        self.sink: Any = None
        self._thread = threading.Thread(target=self._run, name="dlbs-reporter", daemon=True)
        self._thread.start()

    def first(self, ids: list[int], stamp: Any) -> None:
        self._put((stamp, ids, None))

    def complete(self, ids: list[int], tokens: list[int], stamp: Any) -> None:
        self._put((stamp, ids, tokens))

    def _put(self, item: tuple) -> None:
        with self._ready:
            self._pending.append(item)
            self._ready.notify()

    def stop(self) -> None:
        with self._ready:
            self._stopping = True
            self._ready.notify()
        self._thread.join()

    def _run(self) -> None:
        try:
            while True:
                with self._ready:
                    while not self._pending and not self._stopping:
                        self._ready.wait()
                    if not self._pending:
                        return
                    stamp, ids, tokens = self._pending.popleft()
                self._wait(stamp)
                if tokens is None:
                    self.sink.first(ids)
                else:
                    self.sink.complete(ids, tokens)
        except BaseException as error:  # noqa: BLE001 - must not cross LoadGen's C++ code
            self._abort(error)


class _LoadGenSink:
    """Tells LoadGen: FirstTokenComplete (not offline), QuerySamplesComplete with tokens."""

    def __init__(self, lg: Any, first_tokens: bool) -> None:
        self.lg = lg
        self.first_tokens = first_tokens
        self.lock = threading.Lock()
        self.requests = 0
        self.tokens = 0

    def first(self, ids: list[int]) -> None:
        if self.first_tokens:
            response = self.lg.QuerySampleResponse
            self.lg.FirstTokenComplete([response(sample_id, 0, 0) for sample_id in ids])

    def complete(self, ids: list[int], tokens: list[int]) -> None:
        response = self.lg.QuerySampleResponse
        self.lg.QuerySamplesComplete([response(sample_id, 0, 0, count)
                                      for sample_id, count in zip(ids, tokens)])
        with self.lock:
            self.requests += len(ids)
            self.tokens += sum(tokens)


class _CalibrationTally(Tally):
    """Calibration's sink: counts completed requests (harness.Tally)."""

    def first(self, ids: list[int]) -> None:
        pass

    def complete(self, ids: list[int], tokens: list[int]) -> None:
        self.count(len(ids))


def run_token_evaluation(system: GenerationSystem, options: EvaluationOptions,
                         generation: GenerationOptions, *, say: Callable[[str], None],
                         abort: Callable[[BaseException], None]) -> dict[str, Any]:
    """Run `options.scenario` with token latencies; return the `results.*` keys (module doc)."""
    return _TokenHarness(system, options, generation, say, guarded(abort)).run()


class _TokenHarness:
    def __init__(self, system: GenerationSystem, options: EvaluationOptions,
                 generation: GenerationOptions, say: Callable[[str], None],
                 abort: Callable[[BaseException], None]) -> None:
        if options.scenario not in TOKEN_SCENARIOS:
            raise ValueError(f"the token harness runs {', '.join(TOKEN_SCENARIOS)}, not "
                             f"{options.scenario}")
        self.lg = import_loadgen()
        self.system = system
        self.options = options
        self.generation = generation
        self.scenario = options.scenario
        self.say = say
        self.abort = abort
        self.folder = options.loadgen_dir
        self.queue = RequestQueue()
        self.reporters = [Reporter(lambda stamp, r=replica: system.wait(r, stamp), abort)
                          for replica in range(system.replicas)]
        self.sink: Any = None

    # -- the run -----------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        lg, system = self.lg, self.system
        self.folder = claim_folder(self.options.loadgen_dir)
        sut = lg.ConstructFastSUT(self._issue, self._flush)
        qsl = lg.ConstructQSL(system.total_samples, system.performance_samples,
                              self._load, self._unload)
        servers: list[threading.Thread] = []
        switch_interval = sys.getswitchinterval()
        try:
            began = time.perf_counter()
            system.prepare(self.say)
            self.say(f"prepared in {time.perf_counter() - began:.1f} s")
            for replica in range(system.replicas):
                thread = threading.Thread(target=self._serve, args=(replica,),
                                          name=f"dlbs-replica{replica}", daemon=True)
                thread.start()
                servers.append(thread)
            rate = self._calibrate()
            before = system.compilations()
            gc.collect()
            gc.freeze()
            sys.setswitchinterval(SWITCH_INTERVAL_S)
            try:
                if self.scenario == "max_qps":
                    results = self._find_peak(sut, qsl, rate)
                else:
                    emit_progress(f"{self.scenario}: LoadGen runs at least "
                                  f"{self.options.min_duration_s:g} s and "
                                  f"{self.options.min_query_count} queries",
                                  scenario=self.scenario,
                                  min_duration_s=self.options.min_duration_s)
                    marks = TimedMarks.for_this_process(print_line)  # the energy's interval
                    marks.start()
                    self._start(sut, qsl, self._settings(rate))
                    marks.end()
                    self.say(f"served: {system.served()}")
                    results = self._results(LoadGenLog(self.folder))
            finally:
                sys.setswitchinterval(switch_interval)
                gc.unfreeze()
            recompiles = system.compilations() - before
        finally:
            self.queue.close()
            for thread in servers:
                thread.join()
            for reporter in self.reporters:
                reporter.stop()
            lg.DestroyQSL(qsl)
            lg.DestroyFastSUT(sut)
        results["results.recompiles"] = recompiles
        if recompiles:
            warning = (f"results.recompiles: {recompiles} compilation(s) inside LoadGen's timed "
                       "run; its latencies and rates include them")
            results.setdefault("results.stats_warnings", []).append(warning)
            self.say(f"warning: {warning}")
        results["results.loadgen_log_dir"] = self.folder
        return results

    def _start(self, sut: Any, qsl: Any, settings: Any) -> None:
        self.sink = _LoadGenSink(self.lg, first_tokens=self.scenario != "offline")
        for reporter in self.reporters:
            reporter.sink = self.sink
        self.system.served()  # counts from here
        start_test(self.lg, sut, qsl, settings, self.folder, self.scenario)

    # -- calibration ------------------------------------------------------------------------
    def _calibrate(self) -> float:
        """Requests per second of full slots through the serving threads (module doc)."""
        system = self.system
        count = CALIBRATION_REQUESTS_PER_SLOT * system.slots * system.replicas
        rate = 0.0
        for _ in range(CALIBRATION_ROUNDS):
            tally = _CalibrationTally(count)
            for reporter in self.reporters:
                reporter.sink = tally
            began = time.perf_counter()
            self.queue.put([0] * count, [i % system.total_samples for i in range(count)])
            tally.finished.wait()
            # The fastest round: offline's run is sized from it, and a run that ends before
            # its minimum duration is invalid.
            rate = max(rate, count / max(time.perf_counter() - began, 1e-9))
        self.say(f"calibration: {rate:.4g} requests/s ({count} requests, "
                 f"{system.replicas} replica(s) of {system.slots} slots)")
        return rate

    # -- LoadGen's settings ------------------------------------------------------------------
    def _settings(self, rate: float) -> Any:
        lg, options = self.lg, self.options
        settings = performance_settings(lg, options)
        if self.scenario == "offline":
            settings.scenario = lg.TestScenario.Offline
            settings.use_token_latencies = True
            # A little high: LoadGen then issues enough requests for the minimum duration.
            settings.offline_expected_qps = 1.2 * rate
        else:
            self._server(settings, options.target_qps)
        return settings

    def _server(self, settings: Any, rate: float) -> None:
        generation, options = self.generation, self.options
        settings.scenario = self.lg.TestScenario.Server
        settings.use_token_latencies = True
        settings.server_target_qps = rate
        settings.server_target_latency_percentile = options.latency_percentile / 100.0
        settings.ttft_latency = _ns(generation.ttft_bound_ms)
        settings.tpot_latency = _ns(generation.tpot_bound_ms)
        # MLPerf sets no bound on a whole request's latency for LLMs; LoadGen wants one.
        settings.server_target_latency_ns = _ns(generation.ttft_bound_ms)
        settings.server_coalesce_queries = True

    # -- max_qps -----------------------------------------------------------------------------
    def _find_peak(self, sut: Any, qsl: Any, rate: float) -> dict[str, Any]:
        options, generation = self.options, self.generation
        percentile = f"{options.latency_percentile:g}th percentile"
        # The percentile the bound holds, where LoadGen reports it (else its 99th).
        held = PERCENTILE_NAMES.get(options.latency_percentile, "p99")

        def trial(rate: float, number: int) -> Trial:
            settings = trial_settings(self.lg, options)
            self._server(settings, rate)
            self._start(sut, qsl, settings)
            log = LoadGenLog(self.folder)
            rename_trial_logs(self.folder, number)
            found = log.results()
            ttft, tpot = found.get(f"results.ttft_{held}"), found.get(f"results.tpot_{held}")
            shown = f"TTFT {held} {_shown(ttft)}, TPOT {held} {_shown(tpot)}"
            return Trial(log.values.get("result_perf_constraints_met") is True, shown,
                         self.system.served(), log, {f"ttft_{held}": ttft,
                                                     f"tpot_{held}": tpot})

        peak = search_peak(trial, rate, options, self.say,
                           f"{percentile} TTFT or TPOT",
                           f"{generation.ttft_bound_ms:g} ms or "
                           f"{generation.tpot_bound_ms:g} ms bound")
        copy_trial_logs(self.folder, peak.trial)
        results = self._results(peak.payload)
        results["results.max_qps"] = peak.rate
        results["results.target_qps"] = peak.rate
        results["results.max_qps_trials"] = peak.trials
        return results

    # -- results -----------------------------------------------------------------------------
    def _results(self, log: LoadGenLog) -> dict[str, Any]:
        results = log.results()
        if "results.tokens_per_second" in results:
            results["results.throughput"] = results["results.tokens_per_second"]
        if self.scenario in ("server", "max_qps"):
            met = log.values.get("result_perf_constraints_met")
            if isinstance(met, bool):
                results["results.latency_bound_met"] = met
            results["results.ttft_bound_ms"] = self.generation.ttft_bound_ms
            results["results.tpot_bound_ms"] = self.generation.tpot_bound_ms
        if self.scenario == "server":
            results["results.target_qps"] = self.options.target_qps
        return results

    # -- LoadGen's callbacks -----------------------------------------------------------------
    def _load(self, indices: Sequence[int]) -> None:
        pass  # every request is resident

    def _unload(self, indices: Sequence[int]) -> None:
        pass

    def _flush(self) -> None:
        pass

    def _issue(self, ids: list[int], indices: list[int]) -> None:
        try:
            self.queue.put(ids, indices)
        except BaseException as error:  # noqa: BLE001 - must not cross LoadGen's C++ code
            self.abort(error)

    def _serve(self, replica: int) -> None:
        try:
            self.system.bind_thread(replica)
            self.system.serve(replica, self.queue, self.reporters[replica])
        except BaseException as error:  # noqa: BLE001
            self.abort(error)


def _shown(value: Any) -> str:
    return f"{value:.4g} ms" if isinstance(value, float) else "none"


def _ns(milliseconds: float) -> int:
    return max(1, int(round(milliseconds * 1e6)))
