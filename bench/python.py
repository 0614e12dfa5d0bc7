#!/usr/bin/env python3
"""bench/python.py -- throughput and latency of the KernelBench-format path
(python backend: zygote + sandboxed reference and candidate processes)
against a fresh Python process per task running the same harness.

usage: KGYM_BUILDDIR=build bench/python.py [--device cpu|cuda] [--tasks 50]
           [--workers 1,4] [--problem relu] [--variant torch_correct]
           [--perf-trials 10] [--python /usr/bin/python3] [--json FILE]

For each worker count W of --workers:
  kgymd     a private kgymd (kernelbench + python plugins from the build
            tree) with W workers -- cpu_workers = W for --device cpu,
            workers_per_gpu = W on GPU 0 for --device cuda; after a warm-up
            task per worker (the zygotes' start is reported separately),
            --tasks tasks are submitted at once.  Each task's kernel_code is
            the example's with a unique comment, as in training where no two
            candidates are alike.  Before that, 5 tasks one at a time give
            the end-to-end latency of a lone task on a warm daemon.
  baseline  the same tasks, each run by a fresh `python -I -B kgym_harness.py
            --once` (Python start, torch import -- and on a GPU, CUDA and
            triton start -- then the same job code and sandbox), W at a time;
            on a GPU the processes share a flock as kgymd's jobs share the
            GPU's lock (shared to run, exclusive to time), so that their
            timings do not overlap (--baseline-no-lock: they do).
Printed per row: wall seconds, tasks per minute, per-task latency p50/p95
(kgymd: the job's service time in the worker, metadata.backend_ms, without
queueing; baseline: the process's wall time), verdicts, and the ratios of
kgymd's tasks/minute to the baseline's at the same W and to the baseline at
W=1 (one fresh process at a time on the GPU); then, per
W, the p50 of each harness phase, of the wait for the GPU lock, and of the
steps inside them.  --baseline-tasks N runs fewer baseline tasks (a rate is
a rate); --no-baseline skips them.  kgymd caches the reference's timing per
problem (the baseline cannot), which is part of the design; --force-refresh
turns that off to show the zygote's share alone.  The target (on one
GPU, 50 Triton tasks): kgymd >= 5x the baseline.

On a machine without a GPU use --device cpu (torch candidates); the lead
runs --device cuda --variant triton_correct on the GPU machine.  CPU timings
are informative only; what this measures is the evaluation pipeline.
Standard library only; needs torch in --python.
"""
import argparse
import concurrent.futures
import json
import os
import statistics
import subprocess
import sys
import time

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "tests", "integration"))
os.environ.setdefault("KGYM_BUILDDIR", os.path.abspath(os.path.join(here, "..", "build")))
import test_python as tp  # noqa: E402


def make_tasks(args, n, tag):
    tasks = []
    for i in range(n):
        t = tp.example(args.problem, args.variant, task_id="%s-%d-%s" % (tag, i, os.urandom(4).hex()),
                       device=args.device, num_perf_trials=args.perf_trials, num_warmup=1)
        t["payload"]["backend"] = args.backend
        if args.force_refresh:
            t["payload"]["force_refresh"] = True
        t["payload"]["kernel_code"] += "\n# candidate %d of %s\n" % (i, tag)
        tasks.append(t)
    return tasks


def pct(values, q):
    v = sorted(values)
    if not v:
        return float("nan")
    return v[min(len(v) - 1, int(round(q * (len(v) - 1))))]


def run_kgymd(args, w):
    conf = "cpu_workers = %d\ncompile_deadline = 600\ncorrectness_deadline = 600\n" \
           "timing_deadline = 600\njob_deadline = 600\nstart_timeout = 120" % (w if args.device == "cpu" else 1)
    kw = {"workers_conf": conf}
    if args.device == "cuda":
        kw.update(gpus="0", kgymd_conf="workers_per_gpu = %d" % w)
    conf = {"correctness_timeout": "300", "timing_timeout": "300", "interpreter": args.python}
    if args.harness:
        conf["harness"] = os.path.abspath(args.harness)
    if args.threads is not None:
        conf["threads"] = str(args.threads)
    d = tp.PyDaemon(python_conf=conf, **kw)
    try:
        d.start()
        t0 = time.monotonic()
        warm = tp.run_tasks(d, make_tasks(args, w, "warm%d" % w), timeout=900)
        start_ms = [r["metadata"].get("zygote_start_ms") or 0 for r in warm.values()]
        # Latency: one task at a time on the warm daemon, client's clock.
        e2e = []
        for t in make_tasks(args, 5, "lat%d" % w):
            t0 = time.monotonic()
            tp.run_tasks(d, [t], timeout=900)
            e2e.append((time.monotonic() - t0) * 1e3)
        tasks = make_tasks(args, args.tasks, "kgymd%d" % w)
        t0 = time.monotonic()
        res = tp.run_tasks(d, tasks, timeout=3600)
        wall = time.monotonic() - t0
        d.stop()
    finally:
        d.cleanup()
    lat = [r["metadata"].get("backend_ms", 0) for r in res.values()]
    # Where a task's service time goes: p50 of each harness phase and of
    # the wait for the GPU lock (the timing phase's exclusive hold).
    phases = {}
    for r in res.values():
        for name, ms in (r["metadata"].get("phases_ms") or {}).items():
            phases.setdefault(name, []).append(ms)
        phases.setdefault("gpu_lock_wait", []).append(r["metadata"].get("gpu_lock_wait_ms") or 0.0)
    # Inside the phases: the candidate's first call (Triton's JIT), its
    # trials, timed and profiled calls, its exit before the answer; both
    # children's set-up steps (CUDA, sandbox, CUPTI, loading the code).
    detail = {}
    for r in res.values():
        for key in ("candidate_first_call_ms", "candidate_trials_ms", "candidate_timed_ms",
                    "candidate_profile_ms", "candidate_exit_ms", "reference_ms"):
            if isinstance(r["metadata"].get(key), (int, float)):
                detail.setdefault(key.replace("candidate_", "cand_")[:-3], []).append(r["metadata"][key])
        for role in ("candidate", "reference"):
            for step, ms in (r["metadata"].get(role + "_setup_ms") or {}).items():
                detail.setdefault("%s_%s" % (role[:4], step), []).append(ms)
    precomputed = sum(1 for r in res.values() if r["metadata"].get("timed_outputs_precomputed"))
    reused = sum(1 for r in res.values() if r["metadata"].get("reference_process") == "reused")
    verdicts, examples = {}, {}
    for r in res.values():
        key = "%s/%s" % (r.get("correctness"), r.get("error_code"))
        verdicts[key] = verdicts.get(key, 0) + 1
        if r.get("error_code"):
            examples.setdefault(key, (r.get("error_message") or "")[:400])
    for key, msg in examples.items():
        print("W=%d: a %s: %s" % (w, key, msg), file=sys.stderr)
    return {"mode": "kgymd", "workers": w, "tasks": len(res), "wall_s": wall,
            "tasks_per_min": 60.0 * len(res) / wall, "p50_ms": pct(lat, 0.5), "p95_ms": pct(lat, 0.95),
            "verdicts": verdicts, "zygote_start_ms": max(start_ms) if start_ms else None,
            "single_ms": statistics.median(e2e),
            "phases_p50_ms": {name: pct(v, 0.5) for name, v in sorted(phases.items())},
            "detail_p50_ms": {name: pct(v, 0.5) for name, v in sorted(detail.items())},
            "precomputed": precomputed, "reused": reused}


def run_baseline(args, w):
    limits = {"memory_bytes": 16 << 30, "max_output_bytes": 256 << 20, "correctness_timeout": 300,
              "timing_timeout": 300, "compile_timeout": 300}
    tasks = make_tasks(args, args.baseline_tasks or args.tasks, "base%d" % w)
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8",
           "CUDA_VISIBLE_DEVICES": "0" if args.device == "cuda" else ""}
    lock = []
    if args.device == "cuda" and not args.baseline_no_lock:
        # Side by side, the processes time under the same discipline as
        # kgymd's jobs (a shared hold, exclusive to time): else their
        # timings overlap and are worthless, and the rate flatters them.
        fd, path = tp.tempfile.mkstemp(prefix="kgym-bench-gpu-lock-")
        os.close(fd)
        lock = ["--gpu-lock", path]

    def one(t):
        wd = tp.tempfile.mkdtemp(prefix="kgym-bench-")
        req = dict(t["payload"], seed=os.urandom(8).hex(), perf_seed="bench")
        t0 = time.monotonic()
        p = subprocess.run([args.python, "-I", "-B", tp.HARNESS, "--once", "--sandbox-lib", tp.sandbox_lib()] + lock,
                           input=json.dumps({"request": req, "limits": limits}), capture_output=True,
                           text=True, cwd=wd, env=dict(env, HOME=wd, TMPDIR=wd), timeout=1800)
        ms = (time.monotonic() - t0) * 1e3
        tp.shutil.rmtree(wd, ignore_errors=True)
        try:
            r = json.loads(p.stdout)
        except ValueError:
            r = {"correctness": None, "error_code": "BENCH: %s" % p.stderr[-300:]}
        return ms, r

    t0 = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(max_workers=w) as ex:
        out = list(ex.map(one, tasks))
    wall = time.monotonic() - t0
    verdicts = {}
    for _, r in out:
        key = "%s/%s" % (r.get("correctness"), r.get("error_code"))
        verdicts[key] = verdicts.get(key, 0) + 1
    lat = [ms for ms, _ in out]
    return {"mode": "baseline", "workers": w, "tasks": len(out), "wall_s": wall,
            "tasks_per_min": 60.0 * len(out) / wall, "p50_ms": pct(lat, 0.5), "p95_ms": pct(lat, 0.95),
            "verdicts": verdicts}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--tasks", type=int, default=50)
    ap.add_argument("--workers", default="1,4")
    ap.add_argument("--problem", default="relu")
    ap.add_argument("--variant", default=None, help="default: torch_correct (cpu), triton_correct (cuda)")
    ap.add_argument("--perf-trials", type=int, default=10)
    ap.add_argument("--python", default=tp.PY)
    ap.add_argument("--harness", default=None, help="kgymd rows: this kgym_harness.py (default: the source tree's)")
    ap.add_argument("--force-refresh", action="store_true",
                    help="bypass kgymd's reference timing cache (the baseline has none)")
    ap.add_argument("--baseline-tasks", type=int, default=0,
                    help="tasks for the baseline rows (default --tasks; its rate is per minute either way)")
    ap.add_argument("--threads", type=int, default=None,
                    help="[plugin.python] threads for kgymd's job processes (default: the plugin's)")
    ap.add_argument("--no-baseline", action="store_true", help="kgymd rows only (no ratio)")
    ap.add_argument("--baseline-no-lock", action="store_true",
                    help="baseline processes side by side time without a GPU lock (overlapping timings)")
    ap.add_argument("--json", metavar="FILE")
    ap.add_argument("--report-only", action="store_true",
                    help="exit 0 even when the target (GPU: kgymd >= 5x the baseline) is missed")
    args = ap.parse_args()
    args.variant = args.variant or ("torch_correct" if args.device == "cpu" else "triton_correct")
    args.backend = args.variant.split("_")[0]
    tp.PY = args.python
    if not tp.have_torch():
        print("bench/python: %s cannot import torch" % args.python)
        return 2
    rows = []
    for w in [int(x) for x in args.workers.split(",")]:
        kg = run_kgymd(args, w)
        rows.append(kg)
        print("W=%d: kgymd %.1f tasks/min" % (w, kg["tasks_per_min"]), file=sys.stderr)
        if args.no_baseline:
            continue
        base = run_baseline(args, w)
        kg["ratio"] = kg["tasks_per_min"] / base["tasks_per_min"] if base["tasks_per_min"] else None
        rows.append(base)
        print("W=%d: baseline %.1f tasks/min" % (w, base["tasks_per_min"]), file=sys.stderr)
    print("\nbench/python: %d x %s/%s on %s (num_perf_trials %d)\n" % (args.tasks, args.problem, args.variant,
                                                                      args.device, args.perf_trials))
    # Two ratios: against the baseline at the same W, and against one fresh
    # process at a time on the GPU (a subprocess per task, one by one).
    base1 = [b["tasks_per_min"] for b in rows if b["mode"] == "baseline" and b["workers"] == 1]
    hdr = ("mode", "W", "tasks", "wall s", "tasks/min", "p50 ms", "p95 ms", "vs base W", "vs base 1", "verdicts")
    print("%-9s %3s %6s %8s %10s %9s %9s %10s %10s  %s" % hdr)
    for r in rows:
        vs1 = r["tasks_per_min"] / base1[0] if base1 and r["mode"] == "kgymd" else None
        print("%-9s %3d %6d %8.1f %10.1f %9.0f %9.0f %10s %10s  %s" % (
            r["mode"], r["workers"], r["tasks"], r["wall_s"], r["tasks_per_min"], r["p50_ms"], r["p95_ms"],
            "%.1fx" % r["ratio"] if r.get("ratio") else "", "%.1fx" % vs1 if vs1 else "",
            json.dumps(r["verdicts"], sort_keys=True)))
    # A lone task: kgymd's warm worker against a fresh process with nothing
    # beside it (the baseline's least contended row).
    base_lone = min([b["p50_ms"] for b in rows if b["mode"] == "baseline"] or [float("nan")])
    for r in rows:
        if r.get("single_ms"):
            print("\none task alone, end to end (client's clock, median of 5), W=%d: kgymd %.0f ms; "
                  "a fresh process: %.0f ms" % (r["workers"], r["single_ms"], base_lone))
    for r in rows:
        if r.get("phases_p50_ms"):
            print("\nW=%d, where a task's time goes (p50 ms): %s" % (r["workers"], ", ".join(
                "%s %.0f" % kv for kv in r["phases_p50_ms"].items())))
            print("  inside (p50 ms): %s" % ", ".join("%s %.0f" % kv for kv in r["detail_p50_ms"].items()))
            print("  timed calls' expected outputs made before the timing: %d of %d tasks; reference server "
                  "reused: %d of %d" % (r["precomputed"], r["tasks"], r["reused"], r["tasks"]))
    starts = [r["zygote_start_ms"] for r in rows if r.get("zygote_start_ms")]
    if starts:
        print("\nzygote start (fork to ready, once per worker): %.0f ms" % max(starts))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    # The target, on a GPU: kgymd >= 5x the baseline at the same W.
    missed = [r for r in rows if args.device == "cuda" and r["mode"] == "kgymd" and r.get("ratio") is not None
              and r["ratio"] < 5.0]
    if missed:
        print("\nbench/python: target missed (kgymd >= 5x the baseline): %s%s" % (
            ", ".join("W=%d %.2fx" % (r["workers"], r["ratio"]) for r in missed),
            " (--report-only)" if args.report_only else ""))
        return 0 if args.report_only else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
