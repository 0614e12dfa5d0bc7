#!/usr/bin/env python3
"""tests/gpu/native_tests.py -- the native (nvrtc) path on a real GPU.

usage: native_tests.py [examples | stability | simple | crash | hang ...]  (default: all)

Builds nothing: it uses an existing build directory (KGYM_BUILDDIR, default
./build) with the nvrtc, kernelbench and kernel_simple plugins, starts
private kgymds on every GPU (gpus = all) and prints a summary.  Without a
GPU, or without the nvrtc plugin, every check is reported as SKIP (exit
status 77), never PASS.

What it shows on a GPU machine:
  - every example of examples/native gives the verdict examples/native/
    expected.json names (status, correctness, error_code), in a table;
  - kernel_simple judges a candidate by given test cases (a wrong expected
    output is a CORRECTNESS_ERROR) or by the reference, with no speedup;
  - each crashing example is isolated: the task after it on the same GPU
    slot passes; a kernel that never ends is stopped at the correctness
    deadline (TIMEOUT_ERROR) and the next task passes too;
  - five independent evaluations of one correct solution give medians
    within 0.5% of each other for kernels of >= 100 us (spread printed);
  - CUDA events (less timing.dispatch_ms, the events' own cost measured
    around an empty kernel) and CUPTI agree within 2% for single-kernel
    plans of >= 100 us, where the backend reports CUPTI's time
    (timing.kernel.gpu_time_ms); SKIP when it does not.
"""
import contextlib
import importlib.util
import json
import os
import sys
import time

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "integration"))
os.environ.setdefault("KGYM_BUILDDIR", os.path.abspath(os.path.join(here, "..", "..", "build")))
import kgymtest as k  # noqa: E402
import test_native as tn  # noqa: E402

EXAMPLES = tn.EXAMPLES
SPREAD_LIMIT = 0.005		# repeatability: medians within 0.5%
CUPTI_LIMIT = 0.02
MIN_MS = 0.1			# the limits apply to kernels of >= 100 us
STABLE = ("vector_add", "softmax", "matmul_fp32")	# timed five times each

results = []


def load_run_py():
    spec = importlib.util.spec_from_file_location("native_run", os.path.join(EXAMPLES, "run.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


run = load_run_py()


def has_gpu():
    d = "/proc/driver/nvidia/gpus"
    return os.path.isdir(d) and bool(os.listdir(d))


def record(name, verdict, detail):
    results.append((name, verdict, detail))
    print("%s %s: %s" % (verdict, name, detail), flush=True)


def check(name, ok, detail):
    record(name, "PASS" if ok else "FAIL", detail)


def example(problem, variant):
    return tn.load(os.path.join(EXAMPLES, problem, variant + ".task.json"))


def wait_idle(d, timeout=180):
    """Until every worker has started (a GPU worker loads CUDA and NVRTC)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        w = d.request({"op": "workers"})
        states = [x["state"] for x in w["cpu_workers"]] + \
            [x["state"] for g in w["gpus"] for x in g["workers"]]
        if states and all(s == "idle" for s in states):
            return w
        time.sleep(0.2)
    raise AssertionError("workers did not start: %r" % (d.request({"op": "workers"}),))


def one(d, task, tid):
    t = dict(task, task_id=tid)
    return tn.submit_wait(d, [t], timeout=900)[tid]["result"]


def every_example(d):
    expected = tn.load(os.path.join(EXAMPLES, "expected.json"))
    tasks = [tn.load(f) for f in tn.example_files()]
    t0 = time.time()
    res = run.evaluate(d.socket, tasks, timeout=3600)
    wall = time.time() - t0
    rows, bad = [], []
    for t in tasks:
        tid = t["task_id"]
        r = res.get(tid, {})
        want = expected[tid]
        ok = run.verdict_ok(r, want)
        if not ok:
            bad.append("%s: got %s/%s/%s (%s)" % (tid, r.get("status"), r.get("correctness"),
                                                  r.get("error_code"),
                                                  run.first_line(r.get("error_message"), 200)))
        problem, variant = tid.split("-", 1)
        rows.append([problem, variant, r.get("status", "-"), run.fmt(r.get("correctness")),
                     run.fmt(r.get("speedup")), run.fmt(r.get("kernel_runtime"), 3),
                     run.fmt(r.get("reference_runtime"), 3), r.get("error_code") or "-",
                     "ok" if ok else "UNEXPECTED"])
    print()
    run.print_table(["problem", "variant", "status", "correct", "speedup", "kernel_ms", "ref_ms",
                     "error_code", "check"], rows)
    print()
    check("every example gives its expected verdict", not bad,
          "%d tasks in %.1f s%s" % (len(tasks), wall, ("; " + "; ".join(bad)) if bad else ""))
    return tasks, res


def events_vs_cupti(tasks, res):
    compared, bad = [], []
    for t in tasks:
        r = res.get(t["task_id"], {})
        tim = (r.get("timing") or {}).get("kernel") or {}
        if not r.get("correctness") or len(t["payload"]["solution"]["launch"]) != 1:
            continue
        ev, gpu = tim.get("median_ms"), tim.get("gpu_time_ms")
        if not isinstance(ev, (int, float)) or ev < MIN_MS or not isinstance(gpu, (int, float)) \
                or gpu <= 0:
            continue
        rel = abs(ev - gpu) / gpu
        # CUPTI's own cost on this call (with it collecting, as the timed
        # calls are, against without): where the events' excess comes from.
        co = (r.get("metadata") or {}).get("cupti_overhead") or {}
        cost = ""
        if isinstance(co.get("with_cupti_ms"), (int, float)) and isinstance(co.get("without_cupti_ms"), (int, float)):
            cost = ", CUPTI's cost %+.4f ms" % (co["with_cupti_ms"] - co["without_cupti_ms"])
        disp = (r.get("timing") or {}).get("dispatch_ms")
        if isinstance(disp, (int, float)):
            cost += ", dispatch %.4f ms subtracted" % disp
        compared.append("%s %.3f/%.3f ms (%.1f%%%s)" % (t["task_id"], ev, gpu, 100 * rel, cost))
        if rel > CUPTI_LIMIT:
            bad.append(compared[-1])
    if not compared:
        record("events vs CUPTI within 2% (single-kernel plans >= 100 us)", "SKIP",
               "no result reports timing.kernel.gpu_time_ms")
        return
    check("events vs CUPTI within 2% (single-kernel plans >= 100 us)", not bad,
          "; ".join(bad or compared))


def profiling_through_toolkit(tasks, res):
    """CUPTI reaches nvrtc through the cupti toolkit (kgym-plugin(3),
    TOOLKITS): timed results say metadata.profiling "cupti".  A toolkit not
    found, or a self-test that failed, is a FAIL; a machine without libcupti
    a SKIP."""
    seen = {}
    for t in tasks:
        r = res.get(t["task_id"], {})
        if not isinstance(r.get("timing"), dict):
            continue
        p = (r.get("metadata") or {}).get("profiling") or "-"
        seen.setdefault(p, []).append(t["task_id"])
    if not seen:
        record("CUPTI through the cupti toolkit", "SKIP", "no timed result")
        return
    if any("'cupti' toolkit" in p for p in seen):
        check("CUPTI through the cupti toolkit", False, "the toolkit was not found: %r" % list(seen))
    elif "cupti" in seen:
        check("CUPTI through the cupti toolkit", True,
              "%d of %d timed results profiled" % (len(seen["cupti"]), sum(map(len, seen.values()))))
    elif all("no libcupti" in p for p in seen):
        record("CUPTI through the cupti toolkit", "SKIP", "no libcupti here: %r" % list(seen))
    else:
        check("CUPTI through the cupti toolkit", False,
              "; ".join("%s: %s" % (p, ", ".join(ids[:3])) for p, ids in seen.items()))


def stability(d):
    rows, bad = [], []
    for problem in STABLE:
        task = example(problem, "fast")
        medians = []
        for i in range(5):
            r = one(d, task, "%s-stable-%d-%x" % (problem, i, int(time.time() * 1e6)))
            if not r.get("correctness") or not isinstance(r.get("kernel_runtime"), (int, float)):
                bad.append("%s run %d: %s %s" % (problem, i, r.get("error_code"),
                                                 run.first_line(r.get("error_message"), 200)))
                break
            medians.append(r["kernel_runtime"])
        if len(medians) < 5:
            continue
        mid = sorted(medians)[2]
        spread = (max(medians) - min(medians)) / mid
        rows.append([problem, " ".join("%.4f" % m for m in medians), "%.4f" % mid,
                     "%.3f%%" % (100 * spread), "yes" if mid >= MIN_MS else "no (< 100 us)"])
        if mid >= MIN_MS and spread > SPREAD_LIMIT:
            bad.append("%s: spread %.3f%%" % (problem, 100 * spread))
    print()
    run.print_table(["problem (fast)", "5 medians (ms)", "median", "spread", "limit applies"], rows)
    print()
    check("5 evaluations of one correct solution: medians within 0.5%", not bad and rows,
          "; ".join(bad) if bad else "%d kernels" % len(rows))


def isolation(d):
    good = example("vector_add", "fast")
    problems = sorted({tn.load(f)["task_id"].split("-")[0] for f in tn.example_files()})
    bad = []
    for p in problems:
        crash = one(d, example(p, "crash"), "%s-crash-iso-%x" % (p, int(time.time() * 1e6)))
        after = one(d, good, "after-%s-crash-%x" % (p, int(time.time() * 1e6)))
        if crash.get("error_code") != "RUNTIME_ERROR" or crash.get("correctness"):
            bad.append("%s-crash: %s %s" % (p, crash.get("error_code"),
                                            run.first_line(crash.get("error_message"), 160)))
        if not after.get("correctness"):
            bad.append("after %s-crash: %s %s" % (p, after.get("error_code"),
                                                  run.first_line(after.get("error_message"), 160)))
    check("each crash is a RUNTIME_ERROR and the next task on the slot passes", not bad,
          "; ".join(bad) if bad else "%d crash examples" % len(problems))


def hang(d):
    good = example("vector_add", "fast")
    task = example("vector_add", "fast")
    task["payload"]["solution"] = {
        # clock64() is volatile to the compiler: the loop cannot be removed
        "source": 'extern "C" __global__ void spin(const float *x, const float *y, float *out, int n)\n'
                  '{\n\twhile (clock64() >= 0)\n\t\t;\n\tout[0] = x[0] + y[0];\n}\n',
        "launch": [{"kernel": "spin", "grid": [1, 1, 1], "block": [32, 1, 1],
                    "args": ["x", "y", "out", "N"]}]}
    t0 = time.time()
    r = one(d, task, "hang-%x" % int(time.time() * 1e6))
    took = time.time() - t0
    after = one(d, good, "after-hang-%x" % int(time.time() * 1e6))
    check("a kernel that never ends is a TIMEOUT_ERROR and the next task passes",
          r.get("error_code") == "TIMEOUT_ERROR" and after.get("correctness") is True,
          "%s after %.1f s: %s; next: %s" % (r.get("error_code"), took,
                                             run.first_line(r.get("error_message"), 160),
                                             after.get("error_code") or "correct"))


def simple(d):
    """kernel_simple: against given test cases (right and wrong expected
    outputs), and against the problem's reference; never a speedup."""
    src = ('extern "C" __global__ void relu(const float *x, float *y, int n)\n'
           '{\n\tint i = blockIdx.x * blockDim.x + threadIdx.x;\n\n'
           '\tif (i < n)\n\t\ty[i] = fmaxf(x[i], 0.0f);\n}\n')
    xs = [((i * 37) % 201 - 100) / 8.0 for i in range(1000)]
    ok_case = {"inputs": {"x": xs}, "outputs": {"y": [max(v, 0.0) for v in xs]}}
    bad_case = {"inputs": {"x": xs}, "outputs": {"y": [abs(v) for v in xs]}}
    base = {"backend": "nvrtc",
            "problem": {"name": "relu", "sizes": {"N": 1000},
                        "inputs": [{"name": "x", "dtype": "float32", "shape": ["N"]}],
                        "outputs": [{"name": "y", "dtype": "float32", "shape": ["N"]}]},
            "solution": {"source": src, "launch": [{"kernel": "relu", "grid": ["cdiv(N, 256)"],
                                                    "block": [256], "args": ["x", "y", "N"]}]}}
    got = {}
    for name, cases in (("right", [ok_case]), ("wrong", [ok_case, bad_case])):
        payload = dict(base, test_cases=cases)
        got[name] = one(d, {"workflow": "kernel_simple", "payload": payload},
                        "simple-%s-%x" % (name, int(time.time() * 1e6)))
    ref = example("vector_add", "fast")
    ref["workflow"] = "kernel_simple"
    got["reference"] = one(d, ref, "simple-ref-%x" % int(time.time() * 1e6))
    # Test cases and a reference: hidden random trials beside the visible
    # case, which a lookup table of its outputs cannot pass.
    table = ('__constant__ float table[1000] = {%s};\n'
             'extern "C" __global__ void relu(const float *x, float *y, int n)\n'
             '{\n\tint i = blockIdx.x * blockDim.x + threadIdx.x;\n\n'
             '\tif (i < n)\n\t\ty[i] = table[i];\n}\n'
             % ", ".join("%.9ef" % max(v, 0.0) for v in xs))   # "0f" is no float literal
    with_ref = dict(base, test_cases=[ok_case])
    with_ref["problem"] = dict(base["problem"], reference={"source": src,
                                                           "launch": base["solution"]["launch"]})
    got["hidden"] = one(d, {"workflow": "kernel_simple", "payload": with_ref},
                        "simple-hidden-%x" % int(time.time() * 1e6))
    got["table"] = one(d, {"workflow": "kernel_simple",
                           "payload": dict(with_ref, solution=dict(base["solution"], source=table))},
                       "simple-table-%x" % int(time.time() * 1e6))
    bad = []
    for name, want in (("right", (True, None)), ("wrong", (False, "CORRECTNESS_ERROR")),
                       ("reference", (True, None)), ("hidden", (True, None)),
                       ("table", (False, "CORRECTNESS_ERROR"))):
        r = got[name]
        if (r.get("correctness"), r.get("error_code")) != want or r.get("speedup") is not None:
            bad.append("%s: %s %s %s speedup=%r" % (name, r.get("correctness"), r.get("error_code"),
                                                    run.first_line(r.get("error_message"), 160),
                                                    r.get("speedup")))
    hidden = {n: (got[n].get("metadata") or {}).get("hidden_trials") for n in got}
    if hidden["right"] != 0 or not (hidden["hidden"] or 0) >= 5:
        bad.append("metadata.hidden_trials: %r" % hidden)
    if "hidden trial" not in (got["table"].get("error_message") or ""):
        bad.append("table: not caught by a hidden trial: %s"
                   % run.first_line(got["table"].get("error_message"), 160))
    check("kernel_simple: test cases right and wrong, against a reference, and both "
          "(hidden trials; a lookup table fails)", not bad, "; ".join(bad) if bad else "5 tasks")


CHECKS = ("examples", "stability", "simple", "crash", "hang")


def main():
    only = sys.argv[1:] or CHECKS
    if any(c not in CHECKS for c in only):
        print("usage: native_tests.py [%s ...]" % " | ".join(CHECKS))
        return 2
    if not has_gpu():
        print("SKIP: no NVIDIA GPU on this machine (/proc/driver/nvidia/gpus)")
        return k.SKIP
    if not tn.have_nvrtc():
        print("SKIP: the nvrtc plugin was not built (%s)" % tn.plugin_path("nvrtc"))
        return k.SKIP
    plugins = tn.WORKFLOWS + ("nvrtc",)
    workers = "cpu_workers = 4\ncompile_deadline = 60\ncorrectness_deadline = 120\n" \
              "timing_deadline = 300\njob_deadline = 600"
    try:
        with tn.NativeDaemon(plugins, gpus="all", kgymd_conf="workers_per_gpu = 2",
                             workers_conf=workers) \
                if "examples" in only or "stability" in only or "simple" in only \
                else contextlib.nullcontext() as d:
            if d is not None:
                wait_idle(d)
            if "examples" in only:
                tasks, res = every_example(d)
                events_vs_cupti(tasks, res)
                profiling_through_toolkit(tasks, res)
            if "stability" in only:
                stability(d)
            if "simple" in only:
                simple(d)
        # One slot, so "the next task" runs where the crash was; a short
        # correctness deadline for the hang.
        with tn.NativeDaemon(plugins, gpus="0", kgymd_conf="workers_per_gpu = 1",
                             workers_conf=workers.replace("correctness_deadline = 120",
                                                          "correctness_deadline = 5")) \
                if "crash" in only or "hang" in only else contextlib.nullcontext() as d:
            if d is not None:
                wait_idle(d)
            if "crash" in only:
                isolation(d)
            if "hang" in only:
                hang(d)
    except Exception as e:  # noqa: BLE001 - a broken run is a failure, with its cause
        import traceback
        traceback.print_exc()
        record("native GPU tests ran to the end", "FAIL", "%s: %s" % (type(e).__name__, e))

    print("\nSummary:")
    for name, verdict, _ in results:
        print("  %-4s %s" % (verdict, name))
    failed = sum(v == "FAIL" for _, v, _ in results)
    print("%d passed, %d failed, %d skipped" % (sum(v == "PASS" for _, v, _ in results), failed,
                                                  sum(v == "SKIP" for _, v, _ in results)))
    if os.environ.get("KGYM_NATIVE_RESULTS"):
        with open(os.environ["KGYM_NATIVE_RESULTS"], "w") as f:
            json.dump(results, f, indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
