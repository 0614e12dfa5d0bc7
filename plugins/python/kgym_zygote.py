"""kgym_zygote.py -- the zygote: the python backend's long-lived process
below a kgymd-worker, and its start-up.

Started by kgym_harness.py --zygote (zygote_main), before the worker
enters its sandbox.  At start-up it imports torch (and triton where a GPU
is visible) once and never initialises CUDA (preload), so that a job costs
forks instead of a Python + torch start.  It also does, once, the
task-independent work every candidate would repeat: finding the compilers'
profiles, load_inline's precompiled prologue (kgym_pch.py), and Triton's
(prewarm_triton: its cache key's hash of its own installation, the gluon
import; build_triton_seed: gcc's build of its cuda_utils module, which
each Triton candidate's private cache starts with).  Then it says hello
and serves: for each job it forks a supervisor (kgym_supervisor.Job),
which reads the job and forks the job's processes, and it keeps a judge
server across the jobs of one reference (kgym_server.py).

Never judge code: every job process is forked from here, so whatever this
process imports is in every executor's memory.  kgym_judge.py is imported
only by a judge, after its fork.
"""

import ctypes
import json
import os
import platform
import shutil
import signal
import socket
import sys
import time
import traceback

from kgym_common import PROTOCOL, SandboxError, compiler_profile, recv_msg, send_msg
from kgym_pch import add_pch, hello_facts
from kgym_procs import fork_frozen
from kgym_server import reap_dropped, settle, start_server
from kgym_supervisor import Job, run_job

triton = None                  # imported by preload where a GPU is visible


class Zygote:
    """The zygote's state and its loop (serve): a supervisor forked per
    job, the judge server kept between jobs, the compiler profiles found
    once.  In a supervisor (a fork of it), the worker's side of the job:
    the phases relayed, the worker's end noticed."""

    def __init__(self, sock, sandbox_lib, profiles=None):
        self.sock = sock
        self.sandbox_lib = sandbox_lib
        self.pid = os.getpid()
        self.jobs = 0
        self._cpu = None
        self.profiles = profiles or {}     # backend -> compiler_profile(), or the SandboxError
        self.static_checks = True          # off only in --once --no-static-checks (tests of the defence)
        self.server = None                 # JudgeServer: a judge and reference executor kept across jobs
        self.use_server = True
        self.dying = []                    # dropped servers, reaped when they are gone
        self.report_fd = None              # in a supervisor: where it tells the zygote about the server
        self.pch_dir = None                # load_inline's precompiled prologue (kgym_inline.py), or None
        self.pch_cuda = True               # build its CUDA variants too

    def compiler_profile(self, backend):
        """The backend's compiler profile: found once, by the zygote, where
        a GPU is visible (see main); else here, in the job's supervisor."""
        p = self.profiles.get(backend)
        if p is None:
            try:
                p = compiler_profile(backend)
            except SandboxError as e:
                p = e
            self.profiles[backend] = p
        if isinstance(p, SandboxError):
            raise p
        if backend == "cuda" and self.pch_dir and "pch" not in p:
            # Here in a trusted process, before the candidate has its job;
            # found valid in a moment where a zygote or an earlier run built it.
            add_pch(p, self.pch_dir, self.pch_cuda)
        return p

    def device_name(self, device):
        if device == "cpu":
            if self._cpu is None:
                self._cpu = platform.processor() or platform.machine()
                try:
                    with open("/proc/cpuinfo") as f:
                        for line in f:
                            if line.startswith("model name"):
                                self._cpu = line.split(":", 1)[1].strip()
                                break
                except OSError:
                    pass
                self._cpu = "cpu: %s" % self._cpu
            return self._cpu
        # Never initialise CUDA here: the reference child, which has, names
        # the GPU in its "ready" message (UNTESTED); until then, this.
        return "cuda (device %s)" % os.environ.get("CUDA_VISIBLE_DEVICES", "?")

    def relay_phase(self, name, lock=None):
        """Tell the worker a new phase began (its deadline; on a GPU the
        lock it needs: "exclusive" for timing, "shared" after it, None to
        keep what it holds) and wait for its ack."""
        send_msg(self.sock, {"type": "phase", "phase": name, "lock": lock})
        while True:
            msg = recv_msg(self.sock)
            if msg is None:
                os._exit(0)        # the worker is gone: so are we (children die with us)
            if msg.get("type") == "ack":
                if not msg.get("ok", True):
                    raise RuntimeError("the worker refused phase %s: %s" % (name, msg.get("message")))
                return

    def check_worker_alive(self):
        """The worker writes nothing during a job but acks: readable means
        it is gone (EOF), or a stray frame, which is read and dropped."""
        try:
            data = self.sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
        except BlockingIOError:
            return
        if not data:
            os._exit(0)
        recv_msg(self.sock)

    def serve(self):
        """One supervisor per job: it reads the job, runs it, answers and
        exits; the zygote only waits for it."""
        while True:
            try:
                data = self.sock.recv(1, socket.MSG_PEEK)
            except InterruptedError:
                continue
            if not data:
                return
            self.jobs += 1
            self.keep_judge_server()
            rd, wr = os.pipe()
            pid = fork_frozen()
            if pid == 0:
                code = 0
                try:
                    os.close(rd)
                    self.report_fd = wr
                    ctypes.CDLL(None).prctl(1, signal.SIGKILL, 0, 0, 0)   # PR_SET_PDEATHSIG
                    self.supervise_one()
                except BaseException:  # noqa: BLE001 - never return into the zygote's loop
                    traceback.print_exc()      # kgymd's log, through the worker
                    code = 70
                os._exit(code)
            os.close(wr)
            _, status = os.waitpid(pid, 0)
            took, answered = self.take_report(rd)
            if (took or status != 0) and not answered:
                # It died without answering: a second answer to one job
                # would be taken as the next job's, so only then.
                send_msg(self.sock, {"type": "result", "result": {
                    "status": "failed", "compiled": False, "correctness": False, "error_code": "SYSTEM_ERROR",
                    "error_message": "the harness's job supervisor died (wait status 0x%x)" % status}})

    def supervise_one(self):
        # The job's processes first, before the job is read: nothing of it
        # but what each is sent is ever in their memory.
        job = Job(self)
        job.fork_candidate()
        msg = recv_msg(self.sock)
        if msg is None or msg.get("type") != "job":
            job.kill_children()
            if msg is None:
                os._exit(0)
            return
        if self.report_fd is not None:
            os.write(self.report_fd, b"J")      # a job to answer (take_report)
        result = run_job(job, msg.get("request") or {}, msg.get("limits") or {})
        # seq: the worker takes this answer for the job it sent, and no other.
        send_msg(self.sock, {"type": "result", "seq": msg.get("seq"), "result": result})
        if self.report_fd is not None:
            os.write(self.report_fd, b"A")      # answered (take_report)
        job.cleanup()
        if self.report_fd is not None:
            os.write(self.report_fd, json.dumps(job.server_report).encode())

    def keep_judge_server(self):
        """Before a job: a judge server, fresh from this process -- which
        never holds a task's data -- where the last one is gone; dropped
        ones are reaped."""
        reap_dropped(self.dying)
        if self.server is not None and not self.server.alive():
            self.server.ctl.close()
            self.server = None
        if self.server is None and self.sandbox_lib and self.use_server:
            self.server = start_server(self.sock, self.sandbox_lib)

    def take_report(self, rd):
        """After a job: whether its supervisor took a job ("J") and answered
        it ("A"), then its word on the judge server -- kept (not lent), ok
        and bound to a reference, or to be dropped (also when the supervisor
        said nothing: it died).  Returns (took, answered)."""
        # Written before the supervisor exited; read without waiting (a
        # process it left behind may hold the pipe open).
        os.set_blocking(rd, False)
        data = b""
        while True:
            try:
                chunk = os.read(rd, 4096)
            except BlockingIOError:
                break
            if not chunk:
                break
            data += chunk
        os.close(rd)
        took, data = data.startswith(b"J"), data[1:] if data.startswith(b"J") else data
        answered, data = data.startswith(b"A"), data[1:] if data.startswith(b"A") else data
        try:
            report = json.loads(data.decode()) if data else {"server": "drop"}
        except ValueError:
            report = {"server": "drop"}
        self.server = settle(self.server, report, self.dying)
        return took, answered


def preload(device_hint):
    """Import torch (and triton where a GPU is visible) without touching
    CUDA.  Returns the hello's facts."""
    global triton
    t0 = time.monotonic()
    # Here, once, so that every job process forked later has them; the
    # supervisor and the judge server only look them up (sys.modules).
    import torch
    import kgym_executor  # noqa: F401 - importing is the point
    facts = {"torch": torch.__version__, "triton": None}
    if device_hint:
        try:
            import triton as _triton  # noqa: F401 - importing is the point
            triton = _triton
            facts["triton"] = getattr(_triton, "__version__", "?")
        except Exception:  # noqa: BLE001 - triton is optional
            pass
    facts["import_ms"] = (time.monotonic() - t0) * 1e3
    if triton is not None:
        t1 = time.monotonic()
        facts["triton_prewarm"] = prewarm_triton()
        facts["triton_prewarm_ms"] = (time.monotonic() - t1) * 1e3
    return facts


def prewarm_triton():
    """What Triton does lazily at a process's first kernel call, is the
    same for every task and needs no CUDA, done here once so that forks
    inherit it: hashing its own installation for the cache key (libtriton.so
    and its sources: 0.4 s, kept by lru_cache) and importing gluon (0.17 s;
    bench/triton_coldstart.py, H200).  Best effort: a Triton whose internals
    differ pays these in each candidate, as before.  Returns what was done."""
    done = []
    try:
        from triton.runtime import cache
        cache.triton_key()
        done.append("triton_key")
    except Exception:  # noqa: BLE001
        pass
    try:
        import triton.experimental.gluon  # noqa: F401 - importing is the point
        done.append("gluon")
    except Exception:  # noqa: BLE001
        pass
    return done


def build_triton_seed(seed_dir, profile):
    """Triton's cuda_utils.so -- gcc building Triton's own driver.c, 0.33 s
    in every process whose cache is empty -- built once: the files of a
    Triton cache, {relative path: bytes}, that each triton candidate's
    private cache starts with.  No task's code or data is involved, and this
    process never runs a task's code, so the seed is as trusted as Triton
    itself.  Kept in memory (the worker empties its directory after each
    job).  Built in a throwaway child: loading it maps libcuda, which the
    zygote keeps out of its memory.  Returns None where it cannot be built
    (each candidate builds its own)."""
    pid = fork_frozen()
    if pid == 0:
        code = 1
        try:
            os.environ.update(profile["env"], TRITON_CACHE_DIR=seed_dir)
            # Triton's key for cuda_utils.so includes platform.architecture(),
            # which asks file(1) -- a program the candidate's sandbox cannot
            # run, so there the answer is ("64bit", "").  Ask the same way
            # here, or the seed lies under a key no candidate looks up.
            real = platform.architecture
            platform.architecture = lambda executable=sys.executable, bits="", linkage="": \
                real("", bits, linkage)
            knobs = getattr(triton, "knobs", None)
            if knobs is not None and hasattr(knobs, "cache"):
                knobs.cache.dir = seed_dir
            from triton.backends.nvidia.driver import CudaUtils
            CudaUtils()
            code = 0
        except BaseException as e:  # noqa: BLE001 - the zygote goes on without a seed
            sys.stderr.write("kgym_harness: no Triton cache seed: %s: %s\n" % (type(e).__name__, e))
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    seed = {}
    if status == 0:
        for top, _, files in os.walk(seed_dir):
            for name in files:
                with open(os.path.join(top, name), "rb") as f:
                    seed[os.path.relpath(os.path.join(top, name), seed_dir)] = f.read()
    shutil.rmtree(seed_dir, ignore_errors=True)
    return seed or None


def zygote_main(sock, sandbox_lib, gpu_visible, pch_dir, started_at):
    """--zygote: import torch, say hello to the worker on sock, prepare
    what every job would otherwise repeat, then serve jobs until the
    worker goes.  Returns the exit status."""
    try:
        facts = preload(gpu_visible)
    except BaseException as e:  # noqa: BLE001 - tell the worker why, then go
        send_msg(sock, {"type": "fatal", "message": "cannot import torch with %s: %s: %s" %
                        (sys.executable, type(e).__name__, e)})
        return 1
    hello = dict(facts, type="hello", protocol=PROTOCOL, pid=os.getpid(), python=platform.python_version(),
                 executable=sys.executable,
                 ready_ms=(time.time() - started_at) * 1e3 if started_at else None)
    # Triton and load_inline jobs run only on GPU workers: find their
    # compilers once, here, rather than in every job's supervisor.
    profiles = {}
    if gpu_visible:
        for backend in ("triton", "cuda"):
            try:
                profiles[backend] = compiler_profile(backend)
            except SandboxError as e:
                profiles[backend] = e
        if pch_dir and isinstance(profiles["cuda"], dict):
            # Before any job, in this trusted process: the prologue every
            # load_inline candidate's main.cpp starts with (kgym_pch.py).
            t0 = time.monotonic()
            pch = add_pch(profiles["cuda"], pch_dir)
            hello.update(hello_facts(pch, (time.monotonic() - t0) * 1e3))
        if triton is not None and isinstance(profiles["triton"], dict):
            t0 = time.monotonic()
            seed = build_triton_seed(os.path.join(os.getcwd(), "triton-seed"), profiles["triton"])
            profiles["triton"]["cache_seed"] = seed
            hello.update(triton_seed=sorted(seed or ()), triton_seed_ms=(time.monotonic() - t0) * 1e3)
    send_msg(sock, hello)
    Zygote(sock, sandbox_lib, profiles).serve()
    return 0
