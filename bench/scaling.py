#!/usr/bin/env python3
"""bench/scaling.py -- kgymd's throughput on 1, 2 and 4 GPUs of one host, for
native (nvrtc) tasks and for KernelBench-format Triton tasks, and the timing
repeatability of one fixed kernel across the GPUs (issue 21).

usage: KGYM_BUILDDIR=build bench/scaling.py --python /opt/torch/.venv/bin/python3
           [--gpus 1,2,4] [--tasks 200] [--window-s 20] [--full]
           [--kinds native,kernelbench] [--workers-per-gpu N] [--cpu-workers N]
           [--repeat 4] [--dry-run] [--report-only] [--json FILE]

For each GPU count n of --gpus that the machine has (GPUs 0..n-1), a
private kgymd with gpus = 0,...,n-1 and the kernelbench workflow with both
backends (nvrtc and python, the plugins of KGYM_BUILDDIR); workers_per_gpu
and cpu_workers are the daemon's defaults unless given.  For each kind:

  native       the "fast" (correct) examples of examples/native's
               bandwidth-bound problems in turn (vector_add, row_sum,
               softmax, layernorm, transpose, scan);
  kernelbench  the Triton candidates of examples/kernelbench (relu, softmax,
               layernorm, matmul, conv2d_relu, mlp) in turn, 5 correctness
               and 20 timed trials;

--tasks of them (default 200), every candidate unique (a constant in its
source is the task's number, so no cache has seen it), after one warm-up
task per worker slot, are submitted at once.  Tasks per minute are counted
over a window of --window-s seconds that starts at the first result (the
pipeline full) -- or ends at the last, if the batch runs out first -- then
what is left is cancelled; --full waits for the whole batch instead and
counts it from submission to the last result.  Per GPU
(metadata.gpu_index, which kgymd adds to every result of a GPU job): tasks,
and busy share = the jobs' time in the worker (metadata.gpu_job_ms for
native tasks, backend_ms for Triton ones) over the window times the GPU's
worker slots, counting the tasks of the window.  The ratio is tasks/minute
over one GPU's.

Repeatability: on the daemon with the most GPUs, --repeat copies per GPU of
one fixed task (examples/native softmax "fast", 8192 x 8192: a kernel of
>= 100 us) submitted at once; per GPU the median of their kernel_runtime,
and the spread (max - min) / min across GPUs of the same name.

Targets (exit 1 when one is missed, unless --report-only; 2 when it could
not run): for both kinds, >= 1.85x one GPU's tasks/minute on 2 GPUs and
>= 3.6x on 4; every GPU of a run got tasks; every result names its GPU; the
fixed kernel's medians within 1% across GPUs of the same model.  A machine
with one GPU gives the one-GPU row and the repeatability of that GPU, and
says that the rest was not run.

Runtime (defaults, 4 GPUs): per GPU count a daemon start, per kind a
warm-up (the Python zygotes: ~10-20 s), a window of 20 s and the cancel
(the killed workers restart), then the repeatability run: about 4 to 4.5
minutes (1.5 on one GPU); --full depends on kgymd's speed.  A window's
count is shown beside its rate: a rate from a dozen tasks is a rough one,
and the closing figures should come from --full.

--dry-run checks the script without a GPU: "GPUs" 0..n-1 configured but
absent (kgymd then runs on them only jobs that need no CUDA), selftest
tasks standing in for both kinds (a 200 ms exclusive hold of the GPU lock
each, as timing holds it, so that a lock shared across GPUs by mistake
shows), small counts; no repeatability.
"""
import argparse
import json
import os
import shutil
import statistics
import sys
import time

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "tests", "integration"))
os.environ.setdefault("KGYM_BUILDDIR", os.path.abspath(os.path.join(here, "..", "build")))
import kgymtest as k  # noqa: E402
import test_native as tn  # noqa: E402
import test_python as tp  # noqa: E402

NATIVE = ("vector_add", "row_sum", "softmax", "layernorm", "transpose", "scan")
KB = ("relu", "softmax", "layernorm", "matmul", "conv2d_relu", "mlp")
FIXED = ("softmax", "fast")
GOAL = {2: 1.85, 4: 3.6}
DRY_HOLD_MS = 200
SPREAD = 0.01
T0 = time.monotonic()


def log(msg):
    print("[%7.1f s] %s" % (time.monotonic() - T0, msg), file=sys.stderr, flush=True)


def visible_gpus():
    d = "/proc/driver/nvidia/gpus"
    return len(os.listdir(d)) if os.path.isdir(d) else 0


# ------------------------------------------------------------------ tasks

def native_task(i, tag, problem=None, variant="fast"):
    problem = problem or NATIVE[i % len(NATIVE)]
    t = tn.load(os.path.join(tn.EXAMPLES, problem, variant + ".task.json"))
    t["task_id"] = "nat-%s-%d-%s" % (tag, i, os.urandom(3).hex())
    # A unique candidate: a constant no cache has seen (the compile cache
    # keys on the source), unused by the kernel.
    t["payload"]["solution"]["source"] += "\n__device__ const int kgym_bench_candidate = %d;\n" % i
    return t


def kb_task(i, tag):
    problem = KB[i % len(KB)]
    t = tp.example(problem, "triton_correct", task_id="kb-%s-%d-%s" % (tag, i, os.urandom(3).hex()),
                   device="cuda", num_perf_trials=20, num_correct_trials=5)
    t["payload"]["backend"] = "triton"
    t["payload"]["kernel_code"] += "\nKGYM_BENCH_CANDIDATE = %d\n" % i
    t["timeout_s"] = 1800
    return t


def dry_task(i, tag):
    t = k.selftest_task(0, action="gpu_exclusive", task_id="dry-%s-%d-%s" % (tag, i, os.urandom(3).hex()))
    t["payload"].update(device="gpu", hold_ms=DRY_HOLD_MS)
    return t


def make_tasks(args, kind, n, tag):
    if args.dry_run:
        return [dry_task(i, "%s-%s" % (kind, tag)) for i in range(n)]
    return [(native_task if kind == "native" else kb_task)(i, tag) for i in range(n)]


def busy_ms(kind, r):
    m = r.get("metadata") or {}
    v = m.get("gpu_job_ms", m.get("evaluate_job_ms")) if kind == "native" else m.get("backend_ms")
    if v is None and kind.startswith("dry-"):
        v = DRY_HOLD_MS           # a stand-in's job: its hold of the GPU
    return v if isinstance(v, (int, float)) else 0.0


def timing_sample(r):
    """Where one task's time went (for --json): the task (its id names the
    problem's turn), its GPU and every figure of its metadata in ms."""
    m = r.get("metadata") or {}
    out = {"task_id": r.get("task_id"), "gpu": m.get("gpu_index")}
    for key, v in m.items():
        if key.endswith("_ms") and isinstance(v, (int, float, dict)):
            out[key] = v
    return out


# ------------------------------------------------------------------ the daemon

def daemon(args, n):
    gl = ",".join(str(i) for i in range(n))
    kconf = ["max_running_tasks = 4096", "max_queued_tasks = 100000"]
    if args.workers_per_gpu:
        kconf.append("workers_per_gpu = %d" % args.workers_per_gpu)
    wconf = ["compile_deadline = 600", "correctness_deadline = 600", "timing_deadline = 600",
             "job_deadline = 900", "start_timeout = 300"]
    if args.cpu_workers is not None:
        wconf.append("cpu_workers = %d" % args.cpu_workers)
    if args.dry_run:
        return k.Daemon(gpus=gl, kgymd_conf="\n".join(kconf), workers_conf="\n".join(wconf))
    conf = {"interpreter": args.python, "compile_timeout": "300", "correctness_timeout": "300",
            "timing_timeout": "300"}
    d = tp.PyDaemon(python_conf=conf, gpus=gl, kgymd_conf="\n".join(kconf), workers_conf="\n".join(wconf))
    # The native backend (and its toolkits) beside the python one, in the same
    # plugin directory.
    for name in tn.with_toolkits(["nvrtc"]):
        dst = os.path.join(d.pdir, name + ".so")
        shutil.copyfile(tn.plugin_path(name), dst)
        os.chmod(dst, 0o755)
    return d


def workers(d):
    return d.request({"op": "workers"})


def wait_idle(d, timeout=600):
    deadline = time.time() + timeout
    while time.time() < deadline:
        w = workers(d)
        states = [x["state"] for x in w["cpu_workers"]] + [x["state"] for g in w["gpus"] for x in g["workers"]]
        if states and all(s == "idle" for s in states):
            return w
        time.sleep(0.2)
    raise RuntimeError("kgymd's workers were not idle within %d s: %s" % (timeout, json.dumps(workers(d))[:1500]))


def run_batch(d, tasks, window_s, what):
    """Submit all; collect results for window_s after the first (or all, if
    window_s is None); cancel the rest.  (every [(t_rel_s, result)], those
    counted, the span they are counted over in seconds)."""
    c = d.connect()
    c.sock.settimeout(3600)
    try:
        r = c.request({"op": "submit", "tasks": tasks})
        if not r.get("ok") or r.get("rejected"):
            raise RuntimeError("kgymd rejected tasks: %s" % json.dumps(r)[:1500])
        ids = [a["task_id"] for a in r["accepted"]]
        t0 = time.monotonic()
        rid = c.send({"op": "wait", "task_ids": ids, "timeout_ms": 3600 * 1000})
        got, first, last_log = [], None, t0
        while True:
            if window_s is not None and first is not None:
                left = first + window_s - time.monotonic()
                if left <= 0:
                    break
                c.sock.settimeout(left)
            try:
                msg = c.read_for(rid)
            except OSError:     # the window's end while waiting
                break
            if msg is None:
                raise RuntimeError("kgymd closed the connection")
            if msg.get("event") == "result":
                now = time.monotonic()
                first = first or now
                got.append((now - t0, msg["result"]))
                if now - last_log > 5:
                    log("%s: %d results" % (what, len(got)))
                    last_log = now
            elif msg.get("done") or msg.get("ok") is False:
                break
        end = time.monotonic()
    finally:
        c.close()
    if window_s is None:
        return got, got, end - t0
    # Counted: results after the first one, within the window -- or up to
    # the last one, if the batch ran out first.
    done = {r.get("task_id") for _, r in got}
    pending = [i for i in ids if i not in done]
    t_first = got[0][0] if got else 0.0
    span = window_s if pending else max(got[-1][0] - t_first, 1e-3)
    counted = [(t, r) for t, r in got[1:] if t - t_first <= span]
    if pending:
        c = d.connect()
        c.sock.settimeout(120)
        try:
            for tid in pending:
                c.send({"op": "cancel", "task_id": tid})
            for _ in pending:
                c.read_line()
        finally:
            c.close()
    return got, counted, span


def run_kind(args, d, n, kind, nslots, ngpu_slots):
    warm = make_tasks(args, kind, nslots, "warm%d" % n)
    run_batch(d, warm, None, "%d GPU(s) %s warm-up" % (n, kind))
    tasks = make_tasks(args, kind, args.tasks, "g%d" % n)
    log("%d GPU(s), %s: %d tasks submitted at once" % (n, kind, len(tasks)))
    got, counted, span = run_batch(d, tasks, None if args.full else args.window_s, "%d GPU(s) %s" % (n, kind))
    wait_idle(d)
    per_gpu, verdicts, unnamed = {}, {}, 0
    for _, r in counted:
        m = r.get("metadata") or {}
        v = r.get("error_code") or ("correct" if r.get("correctness") else "incorrect")
        verdicts[v] = verdicts.get(v, 0) + 1
        g = m.get("gpu_index")
        if not isinstance(g, int):
            unnamed += 1
            continue
        p = per_gpu.setdefault(g, {"tasks": 0, "busy_ms": 0.0, "name": m.get("gpu")})
        p["tasks"] += 1
        p["busy_ms"] += busy_ms("dry-" + kind if args.dry_run else kind, r)
    for g, p in per_gpu.items():
        p["busy_share"] = p["busy_ms"] / 1e3 / (span * ngpu_slots.get(g, 1))
    row = {"gpus": n, "kind": kind, "submitted": len(tasks), "results": len(got), "counted": len(counted),
           "span_s": span, "tasks_per_min": len(counted) / span * 60.0, "per_gpu": per_gpu,
           "verdicts": verdicts, "unnamed": unnamed,
           "samples": [timing_sample(r) for _, r in counted]}
    log("%d GPU(s), %s: %.1f tasks/min (%d counted in %.1f s), verdicts %s" % (
        n, kind, row["tasks_per_min"], len(counted), span, json.dumps(verdicts, sort_keys=True)))
    return row


def repeatability(args, d, n, ngpu_slots):
    tasks = []
    for i in range(args.repeat * n):
        tasks.append(native_task(i, "fixed", FIXED[0], FIXED[1]))
    got, _, _ = run_batch(d, tasks, None, "repeatability")
    per = {}
    for _, r in got:
        m = r.get("metadata") or {}
        if r.get("correctness") and isinstance(r.get("kernel_runtime"), (int, float)) and \
                isinstance(m.get("gpu_index"), int):
            per.setdefault(m["gpu_index"], {"name": m.get("gpu"), "ms": []})["ms"].append(r["kernel_runtime"])
    for p in per.values():
        p["median_ms"] = statistics.median(p["ms"])
    return {"gpus": n, "per_gpu": per, "submitted": len(tasks), "results": len(got)}


# ------------------------------------------------------------------ report

def table(header, rows):
    widths = [max(len(str(r[i])) for r in [header] + rows) for i in range(len(header))]
    print("  ".join("%-*s" % (w, h) for w, h in zip(widths, header)).rstrip())
    print("  ".join("-" * w for w in widths))
    for r in rows:
        print("  ".join("%-*s" % (w, c) for w, c in zip(widths, r)).rstrip())


def report(args, rows, rep, counts, have, device):
    misses, notes = [], []
    print("\nbench/scaling: %s; %s tasks per kind, %s\n" % (
        device, args.tasks, "whole batch (--full)" if args.full else "counted over a %.0f s window" % args.window_s))
    one = {r["kind"]: r["tasks_per_min"] for r in rows if r["gpus"] == 1}
    out = []
    for r in rows:
        ratio = r["tasks_per_min"] / one[r["kind"]] if one.get(r["kind"]) else None
        goal = GOAL.get(r["gpus"])
        per = " ".join("gpu%d:%d/%.0f%%" % (g, p["tasks"], 100 * p["busy_share"])
                       for g, p in sorted(r["per_gpu"].items()))
        out.append([r["kind"], r["gpus"], r["submitted"], r["counted"], "%.1f" % r["span_s"],
                    "%.1f" % r["tasks_per_min"], "%.2fx" % ratio if ratio else "-",
                    ">= %.2fx" % goal if goal else "-", per,
                    " ".join("%s:%d" % kv for kv in sorted(r["verdicts"].items()))])
        if goal and ratio is not None and ratio < goal and not args.dry_run:
            misses.append("%s on %d GPUs: %.2fx one GPU's tasks/minute (goal >= %.2fx)" % (
                r["kind"], r["gpus"], ratio, goal))
        idle = [g for g in range(r["gpus"]) if g not in r["per_gpu"]]
        if idle:
            misses.append("%s on %d GPUs: GPU %s got no task" % (r["kind"], r["gpus"], ",".join(map(str, idle))))
        if r["unnamed"]:
            misses.append("%s on %d GPUs: %d results do not name their GPU (metadata.gpu_index)" % (
                r["kind"], r["gpus"], r["unnamed"]))
    table(["kind", "GPUs", "submitted", "counted", "window s", "tasks/min", "vs 1 GPU", "goal",
           "per GPU: tasks/busy share", "verdicts"], out)
    print("\nbusy share: the jobs' time in the worker (native: gpu_job_ms; Triton: backend_ms) over the "
          "window times the GPU's worker slots.")
    if rep:
        print("\nRepeatability: examples/native %s-%s (%d copies per GPU, on %d GPUs at once)" % (
            FIXED[0], FIXED[1], args.repeat, rep["gpus"]))
        prow, by_name = [], {}
        for g, p in sorted(rep["per_gpu"].items()):
            prow.append([g, p["name"] or "?", len(p["ms"]), "%.4f" % p["median_ms"],
                         "%.4f" % min(p["ms"]), "%.4f" % max(p["ms"])])
            by_name.setdefault(p["name"], []).append(p["median_ms"])
        table(["GPU", "name", "runs", "median ms", "min ms", "max ms"], prow)
        for name, meds in by_name.items():
            spread = (max(meds) - min(meds)) / min(meds)
            print("%s: medians spread %.2f%% across %d GPU(s) (goal <= %.0f%%)" % (name, 100 * spread, len(meds),
                                                                                  100 * SPREAD))
            if spread > SPREAD:
                misses.append("repeatability on %s: medians spread %.2f%% > %.0f%%" % (name, 100 * spread,
                                                                                   100 * SPREAD))
        missing = [g for g in range(rep["gpus"]) if g not in rep["per_gpu"]]
        if missing:
            misses.append("repeatability: no correct timed result from GPU %s" % ",".join(map(str, missing)))
    skipped = [n for n in counts if n > have]
    if skipped:
        notes.append("not run: %s GPU(s) -- this machine has %d" % (",".join(map(str, skipped)), have))
    for n in notes:
        print("\n" + n)
    return misses


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gpus", default="1,2,4", help="GPU counts to run (those the machine has)")
    ap.add_argument("--tasks", type=int, default=200, help="tasks per kind and GPU count (200)")
    ap.add_argument("--window-s", type=float, default=20.0)
    ap.add_argument("--full", action="store_true", help="wait for the whole batch instead of a window")
    ap.add_argument("--kinds", default="native,kernelbench")
    ap.add_argument("--workers-per-gpu", type=int, default=None)
    ap.add_argument("--cpu-workers", type=int, default=None)
    ap.add_argument("--repeat", type=int, default=4, help="copies of the fixed task per GPU (0: none)")
    ap.add_argument("--python", default="/opt/torch/.venv/bin/python3")
    ap.add_argument("--dry-run", action="store_true", help="no GPU: fake GPUs and selftest stand-ins")
    ap.add_argument("--report-only", action="store_true")
    ap.add_argument("--json", metavar="FILE")
    args = ap.parse_args()
    counts = sorted({int(x) for x in args.gpus.split(",") if x.strip()})
    kinds = [x.strip() for x in args.kinds.split(",") if x.strip()]
    if any(kd not in ("native", "kernelbench") for kd in kinds):
        print("bench/scaling: --kinds: expected native and/or kernelbench, got %r" % args.kinds)
        return 2
    if args.dry_run:
        have = max(counts)
        device = "dry run: %d configured, absent GPUs; selftest stand-ins" % have
    else:
        have = visible_gpus()
        if have == 0:
            print("bench/scaling: no NVIDIA GPU here (--dry-run checks the script without one)")
            return 2
        if "native" in kinds and not tn.have_nvrtc():
            print("bench/scaling: the nvrtc plugin was not built (%s)" % tn.plugin_path("nvrtc"))
            return 2
        tp.PY = args.python
        if "kernelbench" in kinds and not tp.have_torch():
            print("bench/scaling: %s cannot import torch" % args.python)
            return 2
        device = None
    run_counts = [n for n in counts if n <= have]
    rows, rep = [], None
    try:
        for n in run_counts:
            d = daemon(args, n)
            try:
                d.start()
                w = wait_idle(d)
                ngpu_slots = {g["index"]: len(g["workers"]) for g in w["gpus"]}
                nslots = sum(ngpu_slots.values())
                if device is None:
                    names = [g.get("name") or "?" for g in w["gpus"]]
                    device = "%s (%d visible); %d worker(s) per GPU, %d CPU worker(s)" % (
                        ", ".join(sorted(set(names))), have, nslots // max(1, n), len(w["cpu_workers"]))
                log("%d GPU(s): %d GPU worker slots ready" % (n, nslots))
                for kind in kinds:
                    rows.append(run_kind(args, d, n, kind, nslots, ngpu_slots))
                if n == run_counts[-1] and args.repeat and not args.dry_run:
                    rep = repeatability(args, d, n, ngpu_slots)
                d.stop()
            except Exception:
                sys.stderr.write("--- kgymd log (tail) ---\n%s\n" % d.read_log()[-6000:])
                raise
            finally:
                d.cleanup()
    except (RuntimeError, OSError, AssertionError, k.Skip) as e:
        print("bench/scaling: could not run: %s" % e)
        return 2
    misses = report(args, rows, rep, counts, have, device)
    log("total %.0f s" % (time.monotonic() - T0))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": device, "rows": rows, "repeatability": rep}, f, indent=1, default=str)
    if misses:
        print("\nbench/scaling: %d target(s) missed%s:" % (len(misses), " (--report-only)" if args.report_only else ""))
        for m in misses:
            print("  - " + m)
        return 0 if args.report_only else 1
    print("\nbench/scaling: every target met%s" % (" (blocked: fewer GPUs than asked for)" if
                                                   [n for n in counts if n > have] else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
