#!/usr/bin/env python3
"""bench/judge_clock.py -- the judge's go/done clock against CUDA events, and
its repeatability across independent evaluations.  Needs a GPU.

usage: KGYM_BUILDDIR=build bench/judge_clock.py [--python PY] [--runs 5] [--fail-over PCT] [--only SUBSTR]
                                                [--warmup N[,N...]]

For each case (an element-wise op or a matmul sized for ~10 us, ~100 us and
~1 ms on an H100), --runs independent evaluations through
`kgym_harness.py --once` (a fresh judge, reference and candidate executor
each time; the candidate is the reference's own op in a ModelNew), then,
in this process, plain CUDA events around the same op with L2 flushed
before every call (what an in-process harness would report).  Printed per
case: the judge's net median (after the calibrated handshake cost) of each
run, their spread ((max - min) / median), the handshake cost subtracted,
the events' median, and judge / events.

Exit status 1 when a case of >= 100 us spreads by more than --fail-over
percent (default 1), unless --report-only.  --warmup 5,200 runs every case
once per value of the request's num_warmup (the judge's minimum of warm-up
calls), side by side; --calls-per-round 1,0 once with one call per "go"
and once with the judge's own rounds (0: its choice; column k).
--arena on,off runs every case with the judge's output arena and without
(limits.output_arena false: the executors copy their outputs, and that copy
is part of the subtracted handshake), side by side.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("KGYM_BUILDDIR", os.path.join(ROOT, "build"))

REF = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, *xs):
        return {op}


def get_inputs():
    return {inputs}


def get_init_inputs():
    return []
'''
CAND = '''import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, *xs):
        return {op}
'''
CASES = [  # name, op on xs, inputs
    ("relu 1024x1024 (~10 us)", "torch.relu(xs[0])", "[torch.randn(1024, 1024)]"),
    ("relu 4096x8192 (~100 us)", "torch.relu(xs[0])", "[torch.randn(4096, 8192)]"),
    ("matmul 4096^3 (~1 ms)", "xs[0] @ xs[1]", "[torch.randn(4096, 4096), torch.randn(4096, 4096)]"),
]


def evaluate(py, ref, cand, harness_dir, warmup=5, calls_per_round=0, arena=True):
    job = {"request": {"reference_code": ref, "kernel_code": cand, "backend": "torch", "device": "cuda",
                       "num_correct_trials": 5, "num_perf_trials": 100, "num_warmup": warmup,
                       "timing_rel_precision": 0.002, "clock_trace": True},
           "limits": {"memory_bytes": 64 << 30, "max_files": 256, "max_processes": 1024,
                      "max_file_bytes": 64 << 20, "compile_timeout": 300, "correctness_timeout": 200,
                      "timing_timeout": 300, "output_arena": arena}}
    if calls_per_round:
        job["request"]["calls_per_round"] = calls_per_round
    d = tempfile.mkdtemp(prefix="kgym-clock-")
    env = dict(os.environ, HOME=d, TMPDIR=d, CUDA_VISIBLE_DEVICES=os.environ.get("CUDA_VISIBLE_DEVICES", "0"))
    p = subprocess.run([py, "-I", "-B", os.path.join(harness_dir, "kgym_harness.py"), "--once",
                        "--sandbox-lib", os.path.join(BUILD, "plugins", "python", ".libs", "libkgym_sandbox.so")],
                       input=json.dumps(job), capture_output=True, text=True, cwd=d, env=env, timeout=900)
    r = json.loads(p.stdout)
    if r.get("correctness") is not True:
        raise SystemExit("the evaluation failed: %s %s" % (r.get("error_code"), r.get("error_message")))
    t = dict(r["timing"]["kernel"])
    t["executor_events"] = r["metadata"].get("candidate_events_ms_p50")
    t["ref_median"] = r["timing"]["reference"]["median_ms"]
    t["trace"] = r["metadata"].get("clock_trace")
    t["calls_per_round"] = r["metadata"].get("calls_per_round")
    t["output_arena"] = r["metadata"].get("output_arena")
    return t


def events_median(op, inputs, n=100):
    import torch
    with torch.device("cuda"):
        xs = eval(inputs, {"torch": torch})  # noqa: S307 - this file's own literals
    fn = eval("lambda *xs: " + op, {"torch": torch})  # noqa: S307
    flush = torch.empty(2 * torch.cuda.get_device_properties(0).L2_cache_size // 4, dtype=torch.int32, device="cuda")
    times = []
    for i in range(n + 5):
        flush.zero_()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        s.record()
        fn(*xs)
        e.record()
        torch.cuda.synchronize()
        if i >= 5:
            times.append(s.elapsed_time(e))
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--fail-over", type=float, default=1.0)
    ap.add_argument("--report-only", action="store_true")
    ap.add_argument("--only", metavar="SUBSTR", help="the cases whose name contains SUBSTR (a,b: either)")
    ap.add_argument("--harness-dir", default=os.path.join(ROOT, "plugins", "python"),
                    help="where kgym_harness.py and its modules are (to compare a variant side by side)")
    ap.add_argument("--warmup", default="5", help="the request's num_warmup; a,b: each case once per value")
    ap.add_argument("--calls-per-round", default="0",
                    help="the request's calls_per_round (0: the judge's choice); a,b: each case once per value")
    ap.add_argument("--arena", default="on", help="the judge's output arena: on, off, or on,off: both")
    ap.add_argument("--json", metavar="FILE", help="every run's timing and metadata.clock_trace (all samples)")
    args = ap.parse_args()
    dump = []
    rows, bad = [], []
    ws, ks, arenas = args.warmup.split(","), args.calls_per_round.split(","), args.arena.split(",")
    cases = [(name + ("" if len(ws) == 1 else ", warm-up %s" % w) +
              ("" if len(ks) == 1 else ", k=%s" % ("auto" if c == "0" else c)) +
              ("" if len(arenas) == 1 else ", arena %s" % a), op, inputs, int(w), int(c), a == "on")
             for name, op, inputs in CASES for w in ws for c in ks for a in arenas]
    for name, op, inputs, warmup, cpr, arena in cases:
        if args.only and not any(x in name for x in args.only.split(",")):
            continue
        runs = [evaluate(args.python, REF.format(op=op, inputs=inputs), CAND.format(op=op), args.harness_dir,
                         warmup, cpr, arena) for _ in range(args.runs)]
        dump.append({"case": name, "runs": runs})
        med = [r["median_ms"] for r in runs]
        mid = statistics.median(med)
        spread = (max(med) - min(med)) / mid * 100
        ev = events_median(op, inputs)
        rows.append((name, ",".join(sorted({str(r["output_arena"]) for r in runs})),
                     " ".join("%.4f" % m for m in med), "%.2f%%" % spread,
                     ",".join(sorted({str(r["calls_per_round"]) for r in runs})),
                     "%.4f" % statistics.median(r["overhead_ms"] for r in runs),
                     "%.4f" % statistics.median(r["executor_events"] or 0 for r in runs),
                     "%.4f" % statistics.median(r["ref_median"] for r in runs),
                     "%.4f" % ev, "%.3f" % (mid / ev)))
        if mid >= 0.1 and spread > args.fail_over:
            bad.append(name)
    head = ("case", "arena", "judge net median per run (ms)", "spread", "k", "handshake (ms)", "executor events (ms)",
            "reference net (ms)", "events (ms)", "judge/events")
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows)]
    for row in [head] + rows:
        print("  ".join(str(x).ljust(w) for x, w in zip(row, widths)))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dump, f)
    if bad and not args.report_only:
        print("FAIL: the median of a >= 100 us case spread beyond %.1f%%: %s" % (args.fail_over, ", ".join(bad)))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
