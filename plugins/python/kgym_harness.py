"""kgym_harness.py -- the KernelBench-format harness of kgymd's python backend.

Installed as $(libexecdir)/kgym/kgym_harness.py and run by the python backend
plugin (plugins/python/python.c) inside a kgymd-worker, *before* the worker
enters its sandbox.  Standard library and torch only.

Processes (ARCHITECTURE.md, "Processes" and "The judge"):

    kgymd-worker (sandboxed, C) --socketpair--> zygote (kgym_zygote.py, --zygote)
                                                  |  fork per job
                                              supervisor (kgym_supervisor.py: reads the
                                              job, deadlines, the GPU lock's phases,
                                              the result)
                      +---------------------------+---------------------------+
                      |                           |                           |
              judge (kgym_judge.py)     reference executor          candidate executor
              trusted, sandboxed:       (kgym_executor.py)          (kgym_executor.py)
              seeds, inputs, buffers,   sandboxed, dumb:            sandboxed (the compiler
              the clock, every call's   "call k" -> forward,        profile for triton/cuda),
              verdict                   copy into the judge's       dumb, the same protocol
                                        buffers -> "done"

The supervisor forks the three job processes *before* it reads the job, so
nothing of the job but what each is sent -- never a seed, to an executor --
is in their memory.  The judge is the only process that draws seeds, makes
inputs, holds the reference's outputs and runs a clock; it shares the
input and output buffers with the executors (a memfd on a CPU, CUDA IPC on
a GPU) and drives each call through a control block of shared memory (GO,
DONE: spin-waits, microseconds).  kgym_judge.py is imported by the judge
alone, after its fork: no judge code is in an executor's address space.

The zygote imports torch (and triton where a GPU is visible) once and never
initialises CUDA, so a job costs forks instead of a Python + torch start.
It also does, once, the task-independent work every candidate would
repeat: load_inline's precompiled prologue (kgym_pch.py) and Triton's
(kgym_zygote.prewarm_triton, build_triton_seed).  It keeps a judge (with
its reference executor) across the jobs of one reference and lends it to
each (the judge server, kgym_server.py).

Every job process enters the sandbox (rlimits, Landlock, seccomp, through
libkgym_sandbox.so, built on the sandbox library lib/sandbox.c) before running any
code of the task; where it cannot, the job fails (fail closed).  Two
profiles, chosen by the supervisor, never by the task: the Python profile (judge,
reference, torch candidates: no new process, no exec, no socket) and the
compiler profile (the candidate of a "triton" or "cuda" job only: it may
run the listed compilers, see kgym_common.compiler_profile).  The job's
supervisor is a subreaper and kills whatever the candidate's processes
left behind when the job ends.

Before anything runs, the candidate's source is checked with Python's ast
(kgym_static.py: forbidden imports, timer access, tensor subclasses,
patching of imported modules): a first filter with clear messages, not the
defence -- the defence is that nothing the candidate's process says or
measures about itself decides its verdict or its speedup.

This file is the entry point only: the command line, and the --once
mode, which runs one job as a zygote's supervisor would.  The modules:

    kgym_zygote.py      the zygote: start-up (preload, compilers, Triton's
                        seed) and its loop, a supervisor forked per job
    kgym_supervisor.py  a job's supervisor: forks the job's processes,
                        deadlines, phases, the verdict into a result
    kgym_server.py      the judge server: started, lent, kept or dropped
    kgym_pch.py         load_inline's precompiled prologue, prepared
    kgym_procs.py       a child's end, the clean-up after a job
    kgym_profile.py     what a candidate's CUPTI tally says
    kgym_static.py      the static checks
    kgym_common.py      what every job process shares (framing, sandbox)
    kgym_executor.py    an executor; kgym_inline.py, its load_inline wrapper
    kgym_judge*.py      the judge (imported only by it, after its fork)

Modes:
    --zygote --fd N     serve jobs over fd N (length-prefixed JSON frames)
    --once              read one job frame's JSON from stdin, print the result
                        (a fresh process per task: the benchmark's baseline)
    --check FILE        static checks of FILE as kernel_code, JSON to stdout

Framing everywhere: a 4-byte big-endian length, then that many bytes of
UTF-8 JSON.
"""

import argparse
import ctypes
import fcntl
import json
import os
import socket
import sys

# The harness's modules lie beside this file; -I keeps the script's
# directory off sys.path, so name it (the installed libexec directory, root's).
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kgym_pch import resolve_dir as resolve_pch_dir  # noqa: E402
from kgym_static import static_check  # noqa: E402
from kgym_supervisor import Job, run_job  # noqa: E402
from kgym_zygote import Zygote, preload, zygote_main  # noqa: E402
# Not used here: the tests reach these through the harness's name
# (test_harness_profile.py, test_python.py).
from kgym_procs import remove_tree  # noqa: E402,F401
from kgym_profile import is_custom_kernel, judge_profile, min_custom_share  # noqa: E402,F401


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--zygote", action="store_true")
    ap.add_argument("--once", action="store_true")
    ap.add_argument("--check", metavar="FILE")
    ap.add_argument("--backend", default="torch")
    ap.add_argument("--fd", type=int, default=3)
    ap.add_argument("--sandbox-lib", default="")
    ap.add_argument("--no-static-checks", action="store_true",
                    help="--once: skip kgym_static (tests of the run-time defence behind it only)")
    ap.add_argument("--gpu-lock", metavar="FILE", default="",
                    help="--once: hold FILE's flock as kgymd holds a GPU's lock (the baseline's timing discipline)")
    ap.add_argument("--pch-dir", default="",
                    help="where load_inline's precompiled torch prologue is kept (kgym_inline.py); "
                         "'auto': <state_dir>/pch from a worker's directory; '' or 'off': none")
    ap.add_argument("--pch-cpu-only", action="store_true",
                    help="build only the prologue's CPU variants (tests on a machine without a GPU)")
    ap.add_argument("--started-at", type=float, default=None,
                    help="wall-clock time of the fork that started us (for the hello's ready_ms)")
    args = ap.parse_args(argv)
    if args.zygote or args.once:
        # The zygote and every job's supervisor (forked from it) hold what a
        # candidate must not see; non-dumpable, a process of the same uid
        # cannot read their /proc files (environ, maps, mem), and the
        # candidate has no capability to override that.
        ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)      # PR_SET_DUMPABLE

    if args.check:
        with open(args.check) as f:
            r = static_check(f.read(), args.backend)
        print(json.dumps({"ok": r is None, "error_code": r and r[0], "error_message": r and r[1]}))
        return 0 if r is None else 1

    gpu_visible = bool(os.environ.get("CUDA_VISIBLE_DEVICES", ""))
    pch_dir = resolve_pch_dir(args.pch_dir)
    if args.zygote:
        return zygote_main(socket.socket(fileno=args.fd), args.sandbox_lib, gpu_visible, pch_dir, args.started_at)

    if args.once:
        # The benchmark's baseline: a fresh process for one task, doing what
        # a zygote's job does (the same code path, the same sandbox).
        preload(gpu_visible)
        a, b = socket.socketpair()
        z = Zygote(a, args.sandbox_lib)
        z.relay_phase = lambda name, lock=None: None
        if args.gpu_lock:
            # The GPU discipline of kgymd's pool between processes started
            # side by side: shared while the job runs, exclusive to time
            # (flock; no writer preference).
            lock_fd = os.open(args.gpu_lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            modes = {"shared": fcntl.LOCK_SH, "exclusive": fcntl.LOCK_EX}
            fcntl.flock(lock_fd, fcntl.LOCK_SH)
            z.relay_phase = lambda name, lock=None: lock and fcntl.flock(lock_fd, modes[lock])
        z.jobs = 1
        z.static_checks = not args.no_static_checks
        z.pch_dir, z.pch_cuda = pch_dir or None, not args.pch_cpu_only
        job = Job(z)
        job.fork_candidate()
        # Read only now: the job's processes are forked already, so none
        # has the job (its seed) in its memory -- as in a zygote's job.
        msg = json.loads(sys.stdin.read())
        result = run_job(job, msg.get("request") or {}, msg.get("limits") or {})
        json.dump(result, sys.stdout)
        sys.stdout.write("\n")
        sys.stdout.flush()
        job.cleanup()
        b.close()
        return 0
    ap.error("one of --zygote, --once or --check is required")
    return 2


if __name__ == "__main__":
    sys.exit(main())
