#!/usr/bin/env python3
"""bench/judge_profile.py -- where one KernelBench-format job's time goes,
seen from its judge.

Runs each named problem's candidate once through `kgym_harness.py --once`
(the job code a zygote runs, one fresh process) with KGYM_JUDGE_PROFILE
set: the judge runs under cProfile and its busiest functions come back in
metadata.judge_profile.  Prints per job the phases, the calls the judge
made and the profile's top lines.  A developer's tool: it proves nothing
and has no target; bench/kernelbench.py holds the targets.

    KGYM_BUILDDIR=build bench/judge_profile.py --python /opt/torch/.venv/bin/python3 \\
        level1/23_Softmax.triton_ok level1/1_Square_matrix_multiplication_.triton_ok
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "tests", "integration"))
os.environ.setdefault("KGYM_BUILDDIR", os.path.abspath(os.path.join(here, "..", "build")))
import test_python as tp  # noqa: E402

SET = os.path.join(here, "kernelbench")


def job_of(name, device, trials, small=False):
    """name: levelN/NN_Name.BACKEND_ok (bench/kernelbench's layout); small:
    at manifest.json's dry_run sizes (bench/kernelbench.py --small)."""
    problem, cand = name.rsplit(".", 1)
    backend = cand.split("_")[0]
    with open(os.path.join(SET, problem + ".py")) as f:
        ref = f.read()
    if small:
        with open(os.path.join(SET, "manifest.json")) as f:
            ref += "\n%s\n" % json.load(f)[problem]["dry_run"]
    with open(os.path.join(SET, name + ".py")) as f:
        code = f.read()
    return {"request": {"reference_code": ref, "kernel_code": code, "backend": backend, "device": device,
                        "num_correct_trials": 5, "num_perf_trials": trials, "num_warmup": 3},
            "limits": dict(tp.ONCE_LIMITS, memory_bytes=64 << 30, max_output_bytes=0, timing_timeout=300,
                           correctness_timeout=300)}


def run(python, job, top):
    tmp = tempfile.mkdtemp(prefix="kgym-judge-profile-")
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": tmp, "TMPDIR": tmp, "LANG": "C.UTF-8",
           "CUDA_VISIBLE_DEVICES": "0" if job["request"]["device"] == "cuda" else "",
           "KGYM_JUDGE_PROFILE": "1"}
    t0 = time.monotonic()
    try:
        p = subprocess.run([python, "-I", "-B", tp.HARNESS, "--once", "--sandbox-lib", tp.sandbox_lib()],
                           input=json.dumps(job), capture_output=True, text=True, cwd=tmp, env=env, timeout=1800)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    wall = time.monotonic() - t0
    try:
        r = json.loads(p.stdout)
    except ValueError:
        print("  the harness said nothing usable (exit %d): %s" % (p.returncode, p.stderr[-2000:]))
        return False
    m = r.get("metadata", {})
    print("  verdict: correctness %s %s, kernel %.4f ms, reference %.4f ms; process wall %.1f s" % (
        r.get("correctness"), r.get("error_code") or "", r.get("kernel_runtime", -1), r.get("reference_runtime", -1),
        wall))
    print("  phases ms: %s" % json.dumps({k: round(v) for k, v in (m.get("phases_ms") or {}).items()}))
    for key in ("judged_calls", "timed_outputs_checked", "calls_per_round", "settling_calls", "timed_rounds",
                "candidate_warmup_calls", "reference_warmup_calls", "judge_prep_ms_p50", "candidate_first_call_ms",
                "candidate_setup_ms", "reference_setup_ms", "judge_setup_ms"):
        if key in m:
            print("  %s: %s" % (key, json.dumps(m[key])))
    lines = (m.get("judge_profile") or "no profile came back").splitlines()
    print("\n".join("    " + x for x in lines[:top + 12]))
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("names", nargs="+", help="levelN/NN_Name.BACKEND_ok under bench/kernelbench")
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--trials", type=int, default=100)
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument("--small", action="store_true", help="at manifest.json's dry_run sizes")
    args = ap.parse_args()
    tp.PY = args.python
    ok = True
    for name in args.names:
        print("%s (%s, %d timed trials)" % (name, args.device, args.trials))
        ok = run(args.python, job_of(name, args.device, args.trials, args.small), args.top) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
