#!/usr/bin/env python3
"""bench/cuda_build.py -- what a load_inline candidate's build costs, plain
and with kgymd's precompiled torch prologue (plugins/python/kgym_inline.py).

usage: KGYM_BUILDDIR=build bench/cuda_build.py [--cpu] [--python PY]
           [--only NAME,...] [--target-warm 10] [--report-only] [--json FILE]

Candidates: on a GPU (the default) the examples' cuda_correct.py of every
problem in examples/kernelbench and bench/cuda_build/gpu_*.py; with --cpu,
bench/cuda_build/cpu_*.py (load_inline with cpp_sources only, judged on the
CPU).  Each names its reference in a "# reference: PATH" line.

Per candidate, each a fresh `PY -I -B kgym_harness.py --once` (the job
code and sandbox of a zygote's job; a fresh process, so torch is imported
and load_inline's cache is empty every time):
  plain   no --pch-dir: load_inline exactly as the candidate calls it;
  kgymd   --pch-dir DIR, built before the first candidate (cold: the
          variants' build, once per worker and torch/compiler/flags), then
          found valid by every later one (warm).
The build time is the candidate process's metadata.candidate_setup_ms
.inline_build (load_inline's own time, inside the sandbox); "pch" says
whether the build used the PCH (a candidate whose flags could change the
prologue's meaning builds plain on both sides).  Verdict parity: the same
status, compiled, correctness and error code on both sides.

Printed: a row per candidate, then the cold start (the PCH's build) and the
medians.  Targets: every verdict the same; on a GPU every warm build at most
--target-warm seconds (10).  Exit 1 when a target is missed, unless
--report-only.  Standard library only; needs torch (and on a GPU nvcc and
ninja) in --python's environment.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.environ.get("KGYM_SRCDIR", os.path.dirname(HERE))
BUILD = os.environ.get("KGYM_BUILDDIR", os.path.join(SRC, "build"))
HARNESS = os.path.join(SRC, "plugins", "python", "kgym_harness.py")
SANDBOX_LIB = os.path.join(BUILD, "plugins", "python", ".libs", "libkgym_sandbox.so")
LIMITS = {"memory_bytes": 32 << 30, "max_files": 256, "max_processes": 1024, "max_file_bytes": 64 << 20,
          "max_output_bytes": 1 << 30, "compile_timeout": 600, "correctness_timeout": 120, "timing_timeout": 120}


def candidates(cpu, only):
    out = []
    if cpu:
        names = sorted(n for n in os.listdir(os.path.join(HERE, "cuda_build")) if n.startswith("cpu_"))
        out = [os.path.join(HERE, "cuda_build", n) for n in names]
    else:
        ex = os.path.join(SRC, "examples", "kernelbench")
        out = [os.path.join(ex, p, "cuda_correct.py") for p in sorted(os.listdir(ex))
               if os.path.exists(os.path.join(ex, p, "cuda_correct.py"))]
        out += [os.path.join(HERE, "cuda_build", n) for n in sorted(os.listdir(os.path.join(HERE, "cuda_build")))
                if n.startswith("gpu_")]
    rows = []
    for path in out:
        name = os.path.relpath(path, SRC)
        short = os.path.splitext(os.path.basename(path))[0]
        if short == "cuda_correct":
            short = os.path.basename(os.path.dirname(path)) + "/cuda_correct"
        if only and short not in only and name not in only:
            continue
        text = open(path).read()
        ref = None
        for line in text.splitlines()[:5]:
            if line.startswith("# reference:"):
                ref = os.path.join(SRC, line.split(":", 1)[1].strip())
        if ref is None:
            ref = os.path.join(os.path.dirname(path), "reference.py")
        rows.append({"name": short, "kernel": text, "reference": open(ref).read()})
    return rows


def run_once(py, cand, device, pch_dir, cpu_only):
    tmp = tempfile.mkdtemp(prefix="kgym-bench-build-")
    try:
        job = {"request": {"reference_code": cand["reference"], "kernel_code": cand["kernel"], "backend": "cuda",
                           "device": device, "num_correct_trials": 5, "num_perf_trials": 10, "num_warmup": 1},
               "limits": LIMITS}
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": tmp, "TMPDIR": tmp, "LANG": "C.UTF-8"}
        for k in ("CUDA_VISIBLE_DEVICES", "CUDA_HOME", "TORCH_CUDA_ARCH_LIST"):
            if os.environ.get(k):
                env[k] = os.environ[k]
        if device == "cuda" and not env.get("CUDA_VISIBLE_DEVICES"):
            env["CUDA_VISIBLE_DEVICES"] = "0"
        args = [py, "-I", "-B", HARNESS, "--once", "--sandbox-lib", SANDBOX_LIB]
        if pch_dir:
            args += ["--pch-dir", pch_dir] + (["--pch-cpu-only"] if cpu_only else [])
        t0 = time.monotonic()
        p = subprocess.run(args, input=json.dumps(job), capture_output=True, text=True, cwd=tmp, env=env,
                           timeout=1800)
        wall = time.monotonic() - t0
        try:
            r = json.loads(p.stdout)
        except ValueError:
            r = {"status": "harness-failed", "error_message": p.stderr[-2000:]}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    meta = r.get("metadata") or {}
    setup = meta.get("candidate_setup_ms") or {}
    return {"verdict": (r.get("status"), r.get("compiled"), r.get("correctness"), r.get("error_code")),
            "build_s": (setup.get("inline_build") or 0) / 1e3 if setup.get("inline_build") is not None else None,
            "pch": None if setup.get("inline_pch") is None else int(setup["inline_pch"]), "wall_s": wall, "pch_info": meta.get("inline_pch"),
            "error": (r.get("error_message") or "")[:400]}


def fmt(x, spec="%.1f"):
    return "-" if x is None else spec % x


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cpu", action="store_true", help="CPU candidates (cpp_sources only), judged on the CPU")
    ap.add_argument("--python", default=os.environ.get("KGYM_PYTHON", "/usr/bin/python3"))
    ap.add_argument("--only", default="", help="comma-separated candidate names")
    ap.add_argument("--target-warm", type=float, default=None,
                    help="seconds a warm build may take (default: 10 on a GPU, none with --cpu)")
    ap.add_argument("--pch-dir", default="", help="keep the PCH here (default: a temporary directory, removed)")
    ap.add_argument("--report-only", action="store_true")
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    target = a.target_warm if a.target_warm is not None else (None if a.cpu else 10.0)
    device = "cpu" if a.cpu else "cuda"
    rows = candidates(a.cpu, set(x for x in a.only.split(",") if x))
    if not rows:
        print("no candidates")
        return 2
    pch_dir = a.pch_dir or tempfile.mkdtemp(prefix="kgym-bench-pch-")
    os.chmod(pch_dir, 0o755)
    results = {"device": device, "python": a.python, "rows": []}
    try:
        cold = None
        for i, c in enumerate(rows):
            plain = run_once(a.python, c, device, None, a.cpu)
            kg = run_once(a.python, c, device, pch_dir, a.cpu)
            if cold is None:
                cold = {"pch_build_s": (kg["pch_info"] or {}).get("build_s"), "first_build_s": kg["build_s"],
                        "variants": (kg["pch_info"] or {}).get("variants"),
                        "errors": (kg["pch_info"] or {}).get("errors")}
                # The first candidate's warm figure: run it again now the PCH is there.
                kg = run_once(a.python, c, device, pch_dir, a.cpu)
            row = {"name": c["name"], "plain": plain, "kgymd": kg, "same_verdict": plain["verdict"] == kg["verdict"]}
            results["rows"].append(row)
            print("%-28s plain %6s s  kgymd %6s s (pch %s)  %s%s" % (
                c["name"], fmt(plain["build_s"]), fmt(kg["build_s"]), kg["pch"], "/".join(map(str, kg["verdict"])),
                "" if row["same_verdict"] else "  VERDICTS DIFFER: plain %s" % (plain["verdict"],)), flush=True)
        results["cold"] = cold
    finally:
        if not a.pch_dir:
            shutil.rmtree(pch_dir, ignore_errors=True)

    print()
    print("%-28s %9s %9s %8s %4s %s" % ("candidate", "plain s", "warm s", "speedup", "pch", "verdict (both)"))
    for r in results["rows"]:
        p, k = r["plain"]["build_s"], r["kgymd"]["build_s"]
        print("%-28s %9s %9s %8s %4s %s%s" % (r["name"], fmt(p), fmt(k), fmt(p / k if p and k else None, "%.2fx"),
                                          r["kgymd"]["pch"], "/".join(map(str, r["kgymd"]["verdict"])),
                                          "" if r["same_verdict"] else "  (plain: %s)" % "/".join(
                                              map(str, r["plain"]["verdict"]))))
    plains = [r["plain"]["build_s"] for r in results["rows"] if r["plain"]["build_s"] is not None]
    warms = [r["kgymd"]["build_s"] for r in results["rows"] if r["kgymd"]["build_s"] is not None]
    c = results.get("cold") or {}
    print("\ncold start: the PCH's variants %s built in %s s (once per worker start with new torch/compiler/flags); "
          "the first candidate's build with it %s s" % (c.get("variants"), fmt(c.get("pch_build_s")),
                                                         fmt(c.get("first_build_s"))))
    if c.get("errors"):
        print("PCH errors: %s" % c["errors"])
    if plains and warms:
        print("median build: plain %.1f s, warm %.1f s" % (statistics.median(plains), statistics.median(warms)))
    missed = []
    for r in results["rows"]:
        if not r["same_verdict"]:
            missed.append("%s: verdicts differ" % r["name"])
        if target is not None and (r["kgymd"]["build_s"] is None or r["kgymd"]["build_s"] > target):
            missed.append("%s: warm build %s s > %g s" % (r["name"], fmt(r["kgymd"]["build_s"]), target))
    for m in missed:
        print("MISSED %s" % m)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1, default=str)
    return 1 if missed and not a.report_only else 0


if __name__ == "__main__":
    sys.exit(main())
