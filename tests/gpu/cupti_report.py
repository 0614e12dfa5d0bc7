#!/usr/bin/env python3
"""tests/gpu/cupti_report.py -- CUPTI's view of every correct native example.

usage: KGYM_BUILDDIR=build tests/gpu/cupti_report.py

Builds nothing; needs a GPU and the native plugins.  Runs the fast and slow
solutions of every example problem twice -- once with CUPTI profiling on
(the default) and once with `[plugin.nvrtc] profile = no` -- and prints one
row per task: events median, CUPTI kernel time, their ratio, CUPTI's own
cost measured inside the job (cupti_overhead.ratio), the median with and
without CUPTI across the two daemons, the kernels CUPTI attributed to the
solution, and the custom-kernel coverage.  It checks that no correct
example is flagged (no REWARD_HACK, no hack metadata) and that every
single-kernel plan of >= 100 us has events within 5% of CUPTI.
Without a GPU it reports SKIP (exit 77).
"""
import os
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "integration"))
os.environ.setdefault("KGYM_BUILDDIR", os.path.abspath(os.path.join(here, "..", "..", "build")))
import kgymtest as k  # noqa: E402
import test_native as tn  # noqa: E402

PROBLEMS = ("vector_add", "row_sum", "softmax", "layernorm", "matmul_fp32", "matmul_bf16",
            "transpose", "scan", "conv1d")
WORKERS = ("cpu_workers = 2\ncompile_deadline = 60\ncorrectness_deadline = 120\n"
           "timing_deadline = 300\njob_deadline = 600")


def run(profile):
    extra = "" if profile else "[plugin.nvrtc]\nprofile = no\n"
    tasks = []
    for p in PROBLEMS:
        for v in ("fast", "slow"):
            t = tn.load(os.path.join(tn.EXAMPLES, p, v + ".task.json"))
            t["task_id"] = "%s-%s-%s" % (p, v, "cupti" if profile else "plain")
            tasks.append(t)
    with tn.NativeDaemon(tn.WORKFLOWS + ("nvrtc",), gpus="0", workers_conf=WORKERS,
                         extra_conf=extra) as d:
        events = tn.submit_wait(d, tasks, timeout=1800)
    return {t["task_id"].rsplit("-", 1)[0]: events[t["task_id"]]["result"] for t in tasks}


def main():
    if not (os.path.isdir("/proc/driver/nvidia/gpus") and os.listdir("/proc/driver/nvidia/gpus")):
        print("SKIP: no NVIDIA GPU")
        return k.SKIP
    on, off = run(True), run(False)
    rows, bad = [], []
    for key in sorted(on):
        r, q = on[key], off.get(key, {})
        m = r.get("metadata") or {}
        kern = (r.get("timing") or {}).get("kernel") or {}
        over = m.get("cupti_overhead") or {}
        prof = [p for p in (r.get("profile") or []) if p.get("module") == "solution"]
        evc = m.get("events_vs_cupti")
        if r.get("error_code") == "REWARD_HACK" or m.get("hack") or not r.get("correctness"):
            bad.append("%s: %s %s" % (key, r.get("error_code"), m.get("hack")))
        single = len({p["name"] for p in prof}) == 1
        med = kern.get("median_ms") or 0
        if single and med >= 0.1 and isinstance(evc, (int, float)) and abs(evc - 1) > 0.05:
            bad.append("%s: events vs CUPTI %.3f" % (key, evc))
        plain = q.get("kernel_runtime")
        rows.append([key, m.get("profiling"), "%.4f" % med,
                     "%.4f" % (kern.get("gpu_time_ms") or -1),
                     "%.3f" % evc if isinstance(evc, (int, float)) else "-",
                     "%.4f" % over["ratio"] if isinstance(over.get("ratio"), (int, float)) else "-",
                     "%.4f" % plain if isinstance(plain, (int, float)) else "-",
                     "%+.2f%%" % ((med / plain - 1) * 100) if plain and med else "-",
                     ",".join(sorted({p["name"] for p in prof})),
                     "%.2f" % (m.get("custom_kernel_time_coverage") or -1)])
    head = ["task", "profiling", "events ms", "cupti ms", "ev/cupti", "in-job ratio",
            "no-cupti ms", "cupti cost", "solution kernels", "coverage"]
    w = [max(len(str(x)) for x in col) for col in zip(head, *rows)]
    for row in [head] + rows:
        print("  ".join(str(x).ljust(n) for x, n in zip(row, w)))
    for b in bad:
        print("FAIL", b)
    print("%d tasks, %d problems found" % (len(rows), len(bad)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
