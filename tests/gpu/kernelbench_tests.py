#!/usr/bin/env python3
"""tests/gpu/kernelbench_tests.py -- the KernelBench-format examples on a GPU.

usage: KGYM_BUILDDIR=build tests/gpu/kernelbench_tests.py [--python PY]
                                                           [--backends torch,triton,cuda]

Builds nothing: starts a private kgymd on GPU 0 with the kernelbench
workflow and the python backend (its interpreter: --python, default the
first of /opt/torch/.venv/bin/python3 and /usr/bin/python3 that imports
torch) and runs examples/kernelbench/run.py --device cuda against it, which
prints a table and compares every verdict with expected.json.  Without a
GPU it reports SKIP (exit 77).
"""
import argparse
import os
import subprocess
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "integration"))
os.environ.setdefault("KGYM_BUILDDIR", os.path.abspath(os.path.join(here, "..", "..", "build")))
import kgymtest as k  # noqa: E402
import test_python as tp  # noqa: E402


# Built with CUDA, the python plugin profiles GPU candidates (decoys count).
KPROBE = os.path.join(k.builddir(), "plugins", "python", ".libs", "libkgym_kprobe.so")


def pick_python():
    for py in ("/opt/torch/.venv/bin/python3", "/usr/bin/python3"):
        if os.path.exists(py) and subprocess.run([py, "-c", "import torch"],
                                                 capture_output=True).returncode == 0:
            return py
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--python", default=None)
    ap.add_argument("--backends", default="torch,triton,cuda")
    ap.add_argument("--only", default=None, help="only examples whose name contains this")
    ap.add_argument("--json", default=None, help="every result, for a closer look")
    ap.add_argument("--workers", type=int, default=1, help="workers_per_gpu (load_inline builds in parallel)")
    args = ap.parse_args()
    if not (os.path.isdir("/proc/driver/nvidia/gpus") and os.listdir("/proc/driver/nvidia/gpus")):
        print("SKIP: no NVIDIA GPU")
        return k.SKIP
    py = args.python or pick_python()
    if py is None:
        print("SKIP: no Python with torch")
        return k.SKIP
    conf = {"interpreter": py, "correctness_timeout": "120", "timing_timeout": "120",
            "compile_timeout": "200", "max_output_bytes": "1G"}
    with tp.PyDaemon(python_conf=conf, gpus="0", kgymd_conf="workers_per_gpu = %d" % args.workers,
                     workers_conf="cpu_workers = 1\ncompile_deadline = 240\ncorrectness_deadline = 240\n"
                                  "timing_deadline = 240\njob_deadline = 240\nstart_timeout = 120") as d:
        rc = subprocess.run([sys.executable, os.path.join(k.srcdir(), "examples", "kernelbench", "run.py"),
                             "--socket", d.socket, "--device", "cuda", "--backends", args.backends,
                             "--perf-trials", "10"] + (["--only", args.only] if args.only else []) +
                            (["--cupti"] if os.path.exists(KPROBE) else []) +
                            (["--json", args.json] if args.json else [])).returncode
        if rc not in (0, 1):
            print(d.read_log()[-4000:])
    return rc


if __name__ == "__main__":
    sys.exit(main())
