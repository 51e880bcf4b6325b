"""Transformer training through `dlbs run` beside the plain reference (reference.py), one run.

    python bench/transformers/run_on_device.py --out OUT            # on the GPU machine
    python bench/transformers/run_on_device.py --out OUT --smoke    # the CPU rehearsal

The cases, each measured by dlbs and then by the reference with the same knobs (bfloat16,
per-block torch.compile, fused AdamW, no activation checkpointing, the same sequence,
batch, warm-up and timed steps), most wanted first; a case starts only if the deadline
leaves it time, and a case that would run past it is cut:
- >= 4 GPUs visible: Llama 3.1 8B, sequence 8192, batch 1 a GPU, FSDP2 over GPUs 0-3 (8B does
  not fit one H200: 16 bytes a parameter of float32 weights, gradients and AdamW states is
  128 GB before any activation), then Llama 3.2 1B over 4 GPUs (weak scaling);
- 2 or 3 GPUs: Llama 3.2 1B over 2 (weak scaling measured on two);
- always: Llama 3.2 1B on one GPU (sequence 8192, batch 2), BERT-Large on one GPU
  (sequence 512, batch 32).
After each case OUT gets results.json, results.csv and results.md (every row, the ratios
dlbs / reference, the issue's targets) and logs.tgz (dlbs's logs), so a call cut short still
returns what it measured. `--smoke` runs the same steps on the CPU with the debug flavours
(sequence 128, batch 2, a few steps, eager unless --compile), the 1B-over-several case as
2 processes of the reference beside one dlbs process (dlbs has one replica per node on a
CPU).
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import subprocess
import sys
import tarfile
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO))

from dlbs.results.efficiency import summarize, table_peak  # noqa: E402
from dlbs.results.protocol import parse_log  # noqa: E402

#: The issue's targets (issue 31, "Speed").
TARGET_8B_TOKENS_PER_GPU = 9500
TARGET_8B_MFU = 0.55
TARGET_RATIO = 1.0
TARGET_WEAK_SCALING = 0.95
FIELDS = ("case", "tool", "model", "seq_len", "batch", "gpus", "tokens_per_second",
          "tokens_per_second_per_gpu", "mfu", "step_ms", "peak_memory_gib", "status", "note")


@dataclass(frozen=True)
class Case:
    """One measurement, made by dlbs and by the reference."""

    name: str
    model: str
    seq_len: int
    batch: int
    gpus: int


def plan_cases(visible: int, smoke: bool) -> list[Case]:
    """The cases for `visible` GPUs, most wanted first (see the module doc)."""
    llama_1b, llama_8b, bert_large = ("llama3_debug", "llama3_debug", "bert_debug") if smoke \
        else ("llama3_1b", "llama3_8b", "bert_large")
    long, bert_seq = (128, 128) if smoke else (8192, 512)
    one_b = Case("1b_1gpu", llama_1b, long, 2, 1)
    bert_case = Case("bert_large_1gpu", bert_large, bert_seq, 2 if smoke else 32, 1)
    if visible >= 4:
        return [Case("8b_4gpu", llama_8b, long, 1, 4), Case("1b_4gpu", llama_1b, long, 2, 4),
                one_b, bert_case]
    if visible >= 2:
        return [one_b, Case("1b_2gpu", llama_1b, long, 2, 2), bert_case]
    return [one_b, bert_case]


class Runner:
    """Runs the cases against a deadline and writes what they measured after each."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.out = Path(args.out).resolve()
        self.work = Path(args.work).resolve() if args.work else self.out.parent / "tf-work"
        self.out.mkdir(parents=True, exist_ok=True)
        self.work.mkdir(parents=True, exist_ok=True)
        self.began = time.time()
        self.rows: list[dict] = []
        self.gpu_name = ""
        self.peak_tflops = 0.0
        if not args.smoke:
            import torch

            self.gpu_name = torch.cuda.get_device_name(0)
            found = table_peak(self.gpu_name, "bf16")
            self.peak_tflops = found[0] if isinstance(found, tuple) else 0.0

    def left(self) -> float:
        """Seconds a step may still take (20 s are kept to write the results)."""
        return self.args.deadline_s - (time.time() - self.began) - 20

    def run(self, command: list[str], cwd: Path) -> int | None:
        """Run `command`, cut at the deadline (SIGTERM, which dlbs passes on); its status."""
        limit = self.left()
        if limit < 30:
            print(f"(skipped, no time left: {' '.join(command[:6])} ...)", flush=True)
            return None
        print("+", " ".join(command), flush=True)
        began = time.time()
        with subprocess.Popen(command, cwd=cwd, text=True, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT) as process:
            try:
                output, _ = process.communicate(timeout=limit)
            except subprocess.TimeoutExpired:
                process.terminate()
                try:
                    output, _ = process.communicate(timeout=30)
                except subprocess.TimeoutExpired:
                    process.kill()
                    output, _ = process.communicate()
                print(f"(cut after {limit:.0f} s)", flush=True)
        print(output[-4000:], f"({time.time() - began:.0f} s)", flush=True)
        return process.returncode

    def dlbs(self, case: Case) -> dict:
        """The case through `dlbs run`; its row from the log (MFU as the store computes it)."""
        log_dir = self.work / f"{case.name}_dlbs"
        gpus = "" if self.args.smoke else ",".join(str(gpu) for gpu in range(case.gpus))
        params = {"exp.model": case.model, "exp.seq_len": case.seq_len,
                  "exp.replica_batch": case.batch, "exp.gpus": gpus,
                  "exp.num_warmup_batches": self.args.warmup,
                  "exp.num_batches": self.args.steps, "exp.log_dir": str(log_dir),
                  "pytorch.compile": self.args.compile}
        if self.args.smoke:
            params["pytorch.num_threads"] = 1
        command = [sys.executable, "-m", "dlbs.cli.main", "run"]
        for name, value in params.items():
            command += ["-P", f"{name}={str(value).lower() if isinstance(value, bool) else value}"]
        status = self.run(command, self.work)
        logs = sorted(log_dir.glob("*.log"))
        if status is None or not logs:
            return self.row(case, "dlbs", status="not run" if status is None else "no log")
        values = parse_log(logs[-1]).values
        throughput = values.get("results.throughput")
        derived = summarize(values, values, throughput)
        memory = values.get("results.mem_peak")
        return self.row(
            case, "dlbs", tokens_per_second=values.get("results.tokens_per_second"),
            tokens_per_second_per_gpu=values.get("results.tokens_per_second_per_gpu",
                                                 values.get("results.tokens_per_second")),
            mfu=derived.get("results.mfu"), step_ms=values.get("results.time"),
            peak_memory_gib=memory / 1024 if isinstance(memory, float | int) else None,
            status=values.get("results.status", "no status"),
            note=values.get("results.status_msg", ""))

    def reference(self, case: Case) -> dict:
        """The case through reference.py (torchrun over several GPUs or CPU processes)."""
        result = self.work / f"{case.name}_reference.json"
        result.unlink(missing_ok=True)
        launcher = [sys.executable]
        if case.gpus > 1:
            launcher += ["-m", "torch.distributed.run", "--standalone",
                         f"--nproc_per_node={case.gpus if not self.args.smoke else 2}"]
        command = [*launcher, str(HERE / "reference.py"), "--model", case.model,
                   "--seq_len", str(case.seq_len), "--batch", str(case.batch),
                   "--steps", str(self.args.steps), "--warmup", str(self.args.warmup),
                   "--device", "cpu" if self.args.smoke else "cuda",
                   "--peak_tflops", str(self.peak_tflops), "--out", str(result),
                   "--compile" if self.args.compile else "--no-compile"]
        status = self.run(command, REPO)
        if not result.is_file():
            return self.row(case, "reference",
                            status="not run" if status is None else f"failed ({status})")
        measured = json.loads(result.read_text())
        return self.row(case, "reference", status="ok", **{
            key: measured.get(key) for key in ("tokens_per_second", "tokens_per_second_per_gpu",
                                               "mfu", "step_ms", "peak_memory_gib")})

    @staticmethod
    def row(case: Case, tool: str, **values: object) -> dict:
        return {"case": case.name, "tool": tool, "model": case.model, "seq_len": case.seq_len,
                "batch": case.batch, "gpus": case.gpus, **values}

    def measure(self, case: Case) -> None:
        for tool in (self.dlbs, self.reference):
            self.rows.append(tool(case))
            self.write()

    def comparisons(self) -> list[dict]:
        """The ratios: dlbs / reference per case, the 8B targets, the 1B model's weak scaling."""
        def per_gpu(case: str, tool: str) -> float | None:
            for row in self.rows:
                value = row.get("tokens_per_second_per_gpu")
                if row["case"] == case and row["tool"] == tool and row.get("status") == "ok" \
                        and isinstance(value, float | int):
                    return float(value)
            return None

        def compare(name: str, value: float | None, base: float | None, target: str,
                    least: float) -> dict:
            ratio = value / base if value is not None and base else None
            return {"comparison": name, "measured": value, "reference": base, "ratio": ratio,
                    "target": target,
                    "verdict": "" if ratio is None else "met" if ratio >= least else "NOT met"}

        found = []
        for case in sorted({row["case"] for row in self.rows}):
            found.append(compare(f"{case}: dlbs / reference tokens/s per GPU",
                                 per_gpu(case, "dlbs"), per_gpu(case, "reference"),
                                 f">= {TARGET_RATIO}x", TARGET_RATIO))
        for row in self.rows:
            if row["case"] == "8b_4gpu" and row["tool"] == "dlbs" and row.get("status") == "ok":
                found.append(compare("8b_4gpu: dlbs tokens/s per GPU",
                                     row.get("tokens_per_second_per_gpu"),
                                     TARGET_8B_TOKENS_PER_GPU, f">= {TARGET_8B_TOKENS_PER_GPU}",
                                     1.0))
                found.append(compare("8b_4gpu: dlbs MFU", row.get("mfu"), TARGET_8B_MFU,
                                     f">= {TARGET_8B_MFU}", 1.0))
        for many in ("1b_4gpu", "1b_2gpu"):
            for tool in ("dlbs", "reference"):
                found.append(compare(f"{many}: {tool} weak scaling (per GPU vs one GPU)",
                                     per_gpu(many, tool), per_gpu("1b_1gpu", tool),
                                     f">= {TARGET_WEAK_SCALING:.0%}", TARGET_WEAK_SCALING))
        return [row for row in found if row["measured"] is not None or
                row["comparison"].endswith("tokens/s per GPU")]

    def write(self) -> None:
        """results.json, results.csv, results.md and logs.tgz, each replaced whole."""
        comparisons = self.comparisons()
        settings = {**vars(self.args), "gpu": self.gpu_name, "peak_tflops": self.peak_tflops}
        replace(self.out / "results.json", json.dumps(
            {"settings": settings, "seconds": time.time() - self.began,
             "comparisons": comparisons, "rows": self.rows}, indent=2) + "\n")
        text = io.StringIO()
        writer = csv.DictWriter(text, fieldnames=FIELDS, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(self.rows)
        replace(self.out / "results.csv", text.getvalue())

        def shown(value: object) -> str:
            return f"{value:.4g}" if isinstance(value, float) else "" if value is None \
                else str(value)

        lines = ["| comparison | measured | reference | ratio | target | verdict |",
                 "|---|---|---|---|---|---|"]
        lines += ["| " + " | ".join(shown(row[key]) for key in (
            "comparison", "measured", "reference", "ratio", "target", "verdict")) + " |"
            for row in comparisons]
        lines += ["", "| " + " | ".join(FIELDS) + " |", "|" + "---|" * len(FIELDS)]
        lines += ["| " + " | ".join(shown(row.get(key)) for key in FIELDS) + " |"
                  for row in self.rows]
        replace(self.out / "results.md", "\n".join(lines) + "\n")
        with tarfile.open(self.out / "logs.tgz.part", "w:gz") as archive:
            for folder in sorted(self.work.glob("*_dlbs")):
                for log in sorted(folder.glob("*.log")):
                    archive.add(log, arcname=f"logs/{folder.name}/{log.name}")
        os.replace(self.out / "logs.tgz.part", self.out / "logs.tgz")
        print("\n".join(lines), flush=True)


def replace(path: Path, text: str) -> None:
    part = path.with_name(path.name + ".part")
    part.write_text(text)
    os.replace(part, path)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--work", default="", help="work folder (default: OUT/../tf-work)")
    parser.add_argument("--deadline_s", type=float, default=510,
                        help="no step starts or runs past this many seconds after the start")
    parser.add_argument("--steps", type=int, default=20, help="timed steps of each run")
    parser.add_argument("--warmup", type=int, default=5, help="untimed steps first")
    parser.add_argument("--smoke", action="store_true", help="the CPU rehearsal")
    parser.add_argument("--compile", action=argparse.BooleanOptionalAction, default=None,
                        help="per-block torch.compile (default: on a GPU, not in --smoke)")
    parser.add_argument("--gpus", type=int, default=-1,
                        help="GPUs to plan for (default: those visible; --smoke: 1)")
    args = parser.parse_args()
    if args.compile is None:
        args.compile = not args.smoke
    if args.gpus < 0:
        if args.smoke:
            args.gpus = 1
        else:
            import torch

            args.gpus = torch.cuda.device_count()
    runner = Runner(args)
    for case in plan_cases(args.gpus, args.smoke):
        runner.measure(case)
    print(f"({time.time() - runner.began:.0f} s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
