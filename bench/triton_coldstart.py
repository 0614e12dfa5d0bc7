#!/usr/bin/env python3
"""bench/triton_coldstart.py -- where a Triton candidate's first call spends
its time in a process with a private, empty Triton cache (what every
candidate process of the python backend has), and what seeding that cache
with Triton's own C helpers saves.

usage: bench/triton_coldstart.py [--python /opt/torch/.venv/bin/python3]
           [--runs 5] [--concurrency 1,4]

Each sample is a fresh process that imports torch and triton, starts CUDA,
then runs examples/kernelbench/relu/triton_correct.py's kernel once.  Its
phases: CUDA start (torch.cuda.init + a first allocation), the driver's
utilities (Triton builds cuda_utils.so from driver.c with gcc on a cold
cache), and the first kernel call (MLIR passes, ptxas, and a gcc build of
the kernel signature's __triton_launcher.so), with the time spent in gcc and
in ptxas measured separately.  Cache modes:

  cold       empty cache directory (today's candidate process)
  utils      cuda_utils.so seeded (it does not depend on the task)
  launcher   cuda_utils.so and this signature's launcher seeded
  warm       the whole cache of an earlier run (the kernel compiled too)

Rows are medians over --runs processes, run --concurrency at a time.
Needs a GPU, torch and triton in --python.
"""
import argparse
import concurrent.futures
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

EXAMPLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples", "kernelbench", "relu",
                       "triton_correct.py")

CHILD = r'''
import json, os, subprocess, sys, time
t0 = time.monotonic()
import torch, triton
import triton.runtime.build as build
t_import = time.monotonic()
spent = {"gcc": 0.0, "ptxas": 0.0}
real_check_call, real_run = subprocess.check_call, subprocess.run
def timed(real, kind_of):
    def call(cmd, *a, **kw):
        kind = kind_of(cmd)
        t = time.monotonic()
        try:
            return real(cmd, *a, **kw)
        finally:
            if kind:
                spent[kind] += time.monotonic() - t
    return call
kind_of = lambda cmd: ("ptxas" if "ptxas" in os.path.basename(str(cmd[0])) else "gcc") if isinstance(cmd, list) else None
subprocess.check_call = build.subprocess.check_call = timed(real_check_call, kind_of)
subprocess.run = timed(real_run, kind_of)
torch.cuda.init(); torch.zeros(1, device="cuda"); torch.cuda.synchronize()
t_ctx = time.monotonic()
from triton.runtime import driver
driver.active.utils
t_utils = time.monotonic()
import importlib.util
spec = importlib.util.spec_from_file_location("candidate", sys.argv[1])   # the example's kernel
candidate = importlib.util.module_from_spec(spec)
spec.loader.exec_module(candidate)
relu_kernel = candidate.relu_kernel
x = torch.randn(1 << 20, device="cuda"); y = torch.empty_like(x)
relu_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
torch.cuda.synchronize()
t_first = time.monotonic()
assert torch.equal(y, x.clamp_min(0))
print(json.dumps({"import": t_import - t0, "cuda": t_ctx - t_import, "utils": t_utils - t_ctx,
                  "first_call": t_first - t_utils, "gcc": spent["gcc"], "ptxas": spent["ptxas"],
                  "total": t_first - t0}))
'''


def sample(python, script, cache_dir):
    env = dict(os.environ, TRITON_CACHE_DIR=cache_dir, PYTHONDONTWRITEBYTECODE="1")
    t = time.monotonic()
    p = subprocess.run([python, script, EXAMPLE], env=env, capture_output=True, text=True, timeout=300)
    wall = time.monotonic() - t
    if p.returncode != 0:
        sys.exit("child failed:\n" + p.stderr[-3000:])
    d = json.loads(p.stdout.strip().splitlines()[-1])
    d["wall"] = wall
    return d


def seed(src, dst, wanted):
    """Copy the cache entries of src whose files match wanted() into dst."""
    for entry in os.listdir(src):
        files = os.listdir(os.path.join(src, entry))
        if any(wanted(f) for f in files):
            shutil.copytree(os.path.join(src, entry), os.path.join(dst, entry))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--concurrency", default="1,4")
    args = ap.parse_args()
    root = tempfile.mkdtemp(prefix="kgym-coldstart-")
    script = os.path.join(root, "child.py")
    with open(script, "w") as f:
        f.write(CHILD)
    full = os.path.join(root, "full")
    sample(args.python, script, full)                    # fills a cache: the source of the seeds
    modes = {
        "cold": lambda f: False,
        "utils": lambda f: f.startswith("cuda_utils"),
        "launcher": lambda f: f.startswith("cuda_utils") or f.startswith("__triton_launcher"),
        "warm": lambda f: True,
    }
    cols = ("import", "cuda", "utils", "first_call", "gcc", "ptxas", "total", "wall")
    print("%-9s %4s " % ("mode", "conc") + " ".join("%10s" % c for c in cols) + "   (ms, medians)")
    n = 0
    for conc in [int(c) for c in args.concurrency.split(",")]:
        for mode, wanted in modes.items():
            dirs = []
            for _ in range(args.runs):
                n += 1
                d = os.path.join(root, "c%d" % n)
                os.mkdir(d)
                seed(full, d, wanted)
                dirs.append(d)
            with concurrent.futures.ThreadPoolExecutor(conc) as ex:
                rows = list(ex.map(lambda d: sample(args.python, script, d), dirs))
            med = {c: statistics.median(r[c] for r in rows) * 1e3 for c in cols}
            print("%-9s %4d " % (mode, conc) + " ".join("%10.0f" % med[c] for c in cols), flush=True)
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
