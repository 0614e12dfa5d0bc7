#!/usr/bin/env python3
"""bench/native.py -- latency and throughput of the native (nvrtc) path on one GPU.

usage: KGYM_BUILDDIR=build bench/native.py [--tasks 200] [--workers 1,2,4]
                                           [--gpu 0] [--repeat 5] [--json FILE]

Builds nothing; needs a GPU and the nvrtc, kernelbench and kernel_simple
plugins in the build directory.  Starts a private kgymd per configuration
(one GPU, cpu_workers = 4) and prints two tables:

 1. Latency of one small elementwise task (vector_add, N = 2^20: 4 MiB per
    tensor) on a warm worker, median of --repeat runs, from the client's
    clock and the result's metadata: queue_ms (accepted to started),
    compile_job_ms (the CPU compile job, of which compile_ms is NVRTC;
    every run's candidate source is new, as in training, while the
    reference cubin is found in memory after the first), evaluate_job_ms (the GPU
    job: load, allocate, correctness trials, then timing.elapsed_ms of
    timing), and end to end.  "worker start" is the one-off cost a cold GPU
    worker pays before its first job (CUDA context, NVRTC of kgymd's helper
    kernels), measured from daemon start to the slot being idle.
    Target: <= 0.5 s end to end.
 2. Throughput: --tasks tasks of a mix (the fast, slow, wrong,
    compile_error and crash examples of the bandwidth-bound problems; every
    8th task a probe, vector_add-fast) submitted at once, with
    workers_per_gpu = each of --workers: wall time, tasks per minute, the
    verdicts, and the timing spread: the probe's median kernel time across
    the run (spread = (max - min) / median) and the median of every timed
    task's 95% interval relative to its median.  Target: throughput rising
    with workers per GPU while the spread stays <= 0.5%.
"""
import argparse
import copy
import json
import os
import statistics
import sys
import time

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "tests", "integration"))
os.environ.setdefault("KGYM_BUILDDIR", os.path.abspath(os.path.join(here, "..", "build")))
import kgymtest as k  # noqa: E402
import test_native as tn  # noqa: E402

MIX_PROBLEMS = ("vector_add", "row_sum", "softmax", "layernorm", "transpose", "scan")
MIX_VARIANTS = ("fast", "slow", "wrong", "compile_error", "crash")
WORKERS_CONF = ("cpu_workers = 4\ncompile_deadline = 60\ncorrectness_deadline = 120\n"
                "timing_deadline = 300\njob_deadline = 600")


def example(problem, variant):
    return tn.load(os.path.join(tn.EXAMPLES, problem, variant + ".task.json"))


def daemon(gpu, workers_per_gpu):
    return tn.NativeDaemon(tn.WORKFLOWS + ("nvrtc",), gpus=str(gpu),
                           kgymd_conf="workers_per_gpu = %d" % workers_per_gpu,
                           workers_conf=WORKERS_CONF)


def wait_idle(d, timeout=300):
    deadline = time.time() + timeout
    while time.time() < deadline:
        w = d.request({"op": "workers"})
        states = [x["state"] for x in w["cpu_workers"]] + \
            [x["state"] for g in w["gpus"] for x in g["workers"]]
        if states and all(s == "idle" for s in states):
            return
        time.sleep(0.05)
    raise RuntimeError("workers did not start")


def uid():
    return "%x" % int(time.time() * 1e6)


def fresh(task, tid):
    """`task` as a new candidate: its own id, and a source no cache has seen
    (as in training, where every candidate differs), so compiles are real."""
    t = copy.deepcopy(task)
    t["task_id"] = tid
    t["payload"]["solution"]["source"] += "\n// %s\n" % tid
    return t


def table(header, rows):
    widths = [max(len(str(r[i])) for r in [header] + rows) for i in range(len(header))]
    print("  ".join("%-*s" % (w, h) for w, h in zip(widths, header)).rstrip())
    print("  ".join("-" * w for w in widths))
    for r in rows:
        print("  ".join("%-*s" % (w, c) for w, c in zip(widths, r)).rstrip())


def latency(gpu, repeat):
    task = example("vector_add", "fast")
    task["payload"]["problem"]["sizes"]["N"] = 1 << 20
    samples = []
    t0 = time.time()
    with daemon(gpu, 1) as d:
        wait_idle(d)
        start = time.time() - t0
        tn.submit_wait(d, [fresh(task, "warm-" + uid())])	# the reference cubin too
        for _ in range(repeat):
            tid = "lat-" + uid()
            t = fresh(task, tid)
            t1 = time.time()
            r = tn.submit_wait(d, [t])[tid]["result"]
            e2e = (time.time() - t1) * 1e3
            if not r.get("correctness"):
                raise RuntimeError("the latency task failed: %s %s" % (r.get("error_code"),
                                                                       r.get("error_message")))
            m = r.get("metadata", {})
            timing = (r.get("timing") or {}).get("elapsed_ms")
            samples.append({
                "queue_ms": m.get("queue_ms"), "compile_job_ms": m.get("compile_job_ms"),
                "compile_ms": m.get("compile_ms"), "evaluate_job_ms": m.get("evaluate_job_ms"),
                "timing_ms": timing,
                "load+correctness_ms": (m["evaluate_job_ms"] - timing)
                if isinstance(timing, (int, float)) and "evaluate_job_ms" in m else None,
                "run_ms": m.get("run_ms"), "end_to_end_ms": e2e,
                "kernel_ms": r.get("kernel_runtime"), "timing_trials":
                    ((r.get("timing") or {}).get("kernel") or {}).get("trials")})
    rows = []
    for key in ("queue_ms", "compile_job_ms", "compile_ms", "evaluate_job_ms",
                "load+correctness_ms", "timing_ms", "run_ms", "end_to_end_ms"):
        vals = [s[key] for s in samples if isinstance(s[key], (int, float))]
        rows.append([key, "%.1f" % statistics.median(vals) if vals else "-",
                     "%.1f" % min(vals) if vals else "-", "%.1f" % max(vals) if vals else "-"])
    rows.append(["worker start (once)", "%.0f" % (start * 1e3), "", ""])
    print("\n1. One small elementwise task (vector_add, N = 2^20), warm worker, %d runs" % repeat)
    table(["phase", "median ms", "min", "max"], rows)
    e2e = statistics.median(s["end_to_end_ms"] for s in samples)
    print("end to end %.0f ms: %s the 500 ms target" % (e2e, "within" if e2e <= 500 else "MISSES"))
    return {"worker_start_ms": start * 1e3, "samples": samples, "missed": e2e > 500}


def mix(n):
    base = [(p, v) for p in MIX_PROBLEMS for v in MIX_VARIANTS]
    tasks, i = [], 0
    for j in range(n):
        if j % 8 == 0:
            p, v = "vector_add", "fast"
        else:
            p, v = base[i % len(base)]
            i += 1
        t = fresh(example(p, v), "%s-%s-%d-%s" % (p, v, j, uid()))
        t["probe"] = j % 8 == 0
        tasks.append(t)
    return tasks


def throughput(gpu, n, wpg):
    tasks = mix(n)
    probes = {t["task_id"] for t in tasks if t.pop("probe")}
    with daemon(gpu, wpg) as d:
        wait_idle(d)
        t0 = time.time()
        events = tn.submit_wait(d, tasks, timeout=7200)
        wall = time.time() - t0
    verdicts = {}
    probe_ms, rel_ci = [], []
    for t in tasks:
        r = events[t["task_id"]]["result"]
        v = r.get("error_code") or ("correct" if r.get("correctness") else "incorrect")
        verdicts[v] = verdicts.get(v, 0) + 1
        kern = (r.get("timing") or {}).get("kernel") or {}
        if isinstance(kern.get("ci95_rel"), (int, float)):
            rel_ci.append(kern["ci95_rel"])
        elif isinstance(kern.get("median_ms"), (int, float)) and kern["median_ms"] > 0 and \
                isinstance(kern.get("ci95_ms"), (list, tuple)) and len(kern["ci95_ms"]) == 2:
            lo, hi = kern["ci95_ms"]
            rel_ci.append(max(kern["median_ms"] - lo, hi - kern["median_ms"]) / kern["median_ms"])
        if t["task_id"] in probes and r.get("correctness"):
            probe_ms.append(r["kernel_runtime"])
    mid = statistics.median(probe_ms) if probe_ms else None
    return {"workers_per_gpu": wpg, "tasks": n, "wall_s": wall, "tasks_per_min": n / wall * 60,
            "verdicts": verdicts, "probe_median_ms": mid, "probes": len(probe_ms),
            "probe_spread": (max(probe_ms) - min(probe_ms)) / mid if probe_ms else None,
            "median_ci95_rel": statistics.median(rel_ci) if rel_ci else None}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tasks", type=int, default=200)
    ap.add_argument("--workers", default="1,2,4")
    ap.add_argument("--gpu", default="0")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", help="write the raw figures here")
    ap.add_argument("--skip-latency", action="store_true")
    ap.add_argument("--report-only", action="store_true",
                    help="exit 0 even when a target is missed (default: exit 1)")
    args = ap.parse_args()
    if not (os.path.isdir("/proc/driver/nvidia/gpus") and os.listdir("/proc/driver/nvidia/gpus")):
        print("bench/native: needs an NVIDIA GPU")
        return k.SKIP
    if not tn.have_nvrtc():
        print("bench/native: the nvrtc plugin was not built (%s)" % tn.plugin_path("nvrtc"))
        return k.SKIP
    out = {}
    if not args.skip_latency:
        out["latency"] = latency(args.gpu, args.repeat)
    runs = []
    for w in [int(x) for x in args.workers.split(",")]:
        runs.append(throughput(args.gpu, args.tasks, w))
        r = runs[-1]
        print("  workers_per_gpu=%d: %d tasks in %.1f s" % (w, r["tasks"], r["wall_s"]), flush=True)
    print("\n2. Throughput: %d mixed tasks (%s x %s; every 8th vector_add-fast as a probe), one GPU"
          % (args.tasks, "/".join(MIX_PROBLEMS), "/".join(MIX_VARIANTS)))
    rows = []
    for r in runs:
        rows.append([r["workers_per_gpu"], "%.1f" % r["wall_s"], "%.1f" % r["tasks_per_min"],
                     " ".join("%s:%d" % kv for kv in sorted(r["verdicts"].items())),
                     "%.4f" % r["probe_median_ms"] if r["probe_median_ms"] else "-",
                     "%.2f%% (%d)" % (100 * r["probe_spread"], r["probes"])
                     if r["probe_spread"] is not None else "-",
                     "%.2f%%" % (100 * r["median_ci95_rel"]) if r["median_ci95_rel"] else "-"])
    table(["workers/GPU", "wall s", "tasks/min", "verdicts", "probe median ms",
           "probe spread (n)", "median ci95/median"], rows)
    out["throughput"] = runs
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    if (out.get("latency") or {}).get("missed"):
        print("bench/native: a target was missed%s" % (" (--report-only)" if args.report_only else ""))
        return 0 if args.report_only else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
