"""kgym_supervisor.py -- a job's supervisor: the process the zygote forks
for each job (kgym_zygote.py), which forks the job's processes and runs
the job to its result.

The candidate executor is forked before the job is read (Job.fork_candidate),
so nothing of the job but what it is sent -- never a seed -- is in its
memory.  Then Job.run validates the request (kgym_static's checks of
kernel_code), picks the candidate's sandbox profile, sends the candidate
its part, and has a judge: the zygote's judge server where it serves this
reference (kgym_server.py), else a judge and a reference executor of the
job's own, forked here.  While the judge works, the supervisor relays its
phases to the worker (each phase's deadline, the GPU lock), kills the
candidate when the judge says, and keeps the job's deadlines itself
(Job.supervise); the judge's verdict becomes the result object
(kgymd-protocol(7), RESULTS), with what the candidate's CUPTI tally says
(kgym_profile.py: advisory, it can only catch).

Never judge code: this module is in every executor's memory (they are
forked from the zygote, which imports it).  kgym_judge.py is imported
only in the judge's process, after its forks.
"""

import ast
import base64
import ctypes
import hashlib
import json
import mmap
import os
import platform
import select
import signal
import socket
import sys
import time
import traceback

from kgym_common import (MIN_CORRECT_TRIALS, PR_SET_CHILD_SUBREAPER, PROTOCOL, SandboxError,
                         clip, control_memfd, internal_error, recv_msg, scrub_for_client, send_msg)
from kgym_pch import job_metadata as pch_metadata
from kgym_procs import Child, ServerChild, fork_frozen, reap_descendants, remove_tree, tail_of
from kgym_profile import judge_profile, min_custom_share
from kgym_server import lend, release
from kgym_static import custom_kernel_names, static_check

PHASES = {  # name: (limit key, default seconds, what it is, for a timeout's message)
    # Equal to python.c's defaults, which it always sends (limits); the task's
    # deadline comes as request.timeout_s (ARCHITECTURE.md, "Who owns which clock").
    "compile": ("compile_timeout", 180, "loading kernel_code and building the models"),
    "correctness": ("correctness_timeout", 100, "the correctness trials"),
    "timing": ("timing_timeout", 250, "the timed calls and the reference's timing"),
}
# The failures a candidate can cause once its model is ready: all scored
# (status completed), so that none can stand in for a wrong answer.
CANDIDATE_FAILURES = ("CORRECTNESS_ERROR", "REWARD_HACK", "RUNTIME_ERROR", "RESOURCE_ERROR",
                      "SANDBOX_VIOLATION", "TIMEOUT_ERROR")
JUDGE_GRACE_S = 5.0            # the judge reports a timeout itself, naming the call; past this, we do


class Job:
    """One job: fork the judge and both executors (before the job is read),
    hand each its part, relay the judge's phases to the worker (deadlines,
    the GPU lock), kill the candidate when the judge says, and turn the
    judge's verdict into the result object (kgymd-protocol(7), RESULTS)."""

    def __init__(self, zygote):
        self.z = zygote
        self.req = {}
        self.limits = {}
        self.meta = {}
        self.phase_ms = {}
        self.phase = ("compile", time.monotonic())
        self.job_dir = None
        self.children = []
        self.compiles = False
        self.custom = []
        self.landlock = None
        self.compiled = False
        self.memfds = {}
        self.lent = None               # the zygote's judge server, if lent to this job
        self.key = None
        self.server_report = {"server": "kept"}
        self.judge = None

    # -- the three processes
    def fork_candidate(self):
        """The candidate executor, before the job is read (its CUDA start is
        the critical path); its socket and control block, for the judge."""
        from kgym_executor import executor_main     # imported by the zygote's preload: a look-up
        self.judge_cand, cand_end = socket.socketpair()
        self.cand_ctl = control_memfd()
        lib = self.z.sandbox_lib
        self.cand = self.spawn("candidate", [cand_end], [self.cand_ctl],
                               lambda: executor_main("candidate", cand_end, self.cand_ctl, lib))
        cand_end.close()
        self.children = [self.cand]

    def spawn(self, role, keep_socks, keep_fds, body):
        """Fork a job process that keeps only the sockets and descriptors
        named of ours."""
        mine = [x for x in (getattr(self, "judge_cand", None), getattr(self, "sup_j", None)) if x is not None]
        pid = fork_frozen()
        if pid == 0:
            code = 0
            try:
                for sk in mine:
                    if sk not in keep_socks:
                        sk.close()
                for fd in [self.cand_ctl] + list(self.memfds.values()):
                    if fd not in keep_fds:
                        os.close(fd)
                body()
            except BaseException:  # noqa: BLE001 - never return into the zygote's loop
                code = 70
                try:
                    traceback.print_exc()
                except BaseException:  # noqa: BLE001
                    pass
            os._exit(code)
        return Child(role, pid, None)

    def start_judge(self, key):
        """The zygote's judge server where it is free for this reference,
        else a judge and a reference executor of the job's own."""
        from kgym_executor import executor_main     # imported by the zygote's preload: a look-up
        self.sup_j, judge_sup = socket.socketpair()
        srv = self.z.server
        if srv is not None and srv.key in (None, key):
            if lend(srv, [judge_sup.fileno(), self.judge_cand.fileno(), self.cand_ctl] + list(self.memfds.values())):
                judge_sup.close()
                self.judge_cand.close()
                self.lent = srv
                self.server_report = {"server": "drop"}        # until release_server says otherwise
                self.meta["reference_process"] = "reused" if srv.key is not None else "new_server"
                self.judge = ServerChild("judge", srv.pid, None)
                return
            self.server_report = {"server": "drop"}           # it could not take the job
        elif srv is not None:
            self.server_report = {"server": "drop"}           # bound to another reference
        lib = self.z.sandbox_lib
        memfds = dict(self.memfds)
        # A page the judge and this process share (made after the
        # candidate's fork: never in its memory): 1 while the judge runs
        # the submitter's reference code, so that a judge killed by the
        # sandbox is blamed on the reference only when it was in it.
        self.judge_flag = mmap.mmap(-1, mmap.PAGESIZE)

        def judge():
            judge_ref, ref_end = socket.socketpair()
            ref_ctl = control_memfd()
            ref_pid = fork_frozen()
            if ref_pid == 0:
                judge_ref.close()
                judge_sup.close()
                self.judge_cand.close()
                executor_main("reference", ref_end, ref_ctl, lib)
                os._exit(0)
            ref_end.close()
            import kgym_judge           # here, after the forks: never in an executor's memory
            kgym_judge.IN_REFERENCE = self.judge_flag
            kgym_judge.judge_main(judge_sup, kgym_judge.Peer("reference", judge_ref, ref_ctl),
                                  kgym_judge.Peer("candidate", self.judge_cand, self.cand_ctl), lib, memfds)
        self.judge = self.spawn("judge", [judge_sup, self.judge_cand], [self.cand_ctl] + list(memfds.values()), judge)
        self.children.append(self.judge)
        judge_sup.close()
        self.judge_cand.close()
        self.meta["reference_process"] = "per_job"

    def release_server(self, timeout):
        """Tell a lent judge server the job is over and wait (`timeout` s at
        most) until it says nothing of the job is left; else the zygote
        drops it."""
        if self.lent is None:
            return
        if release(self.sup_j, timeout):
            self.server_report = {"server": "ok", "key": self.key}

    def kill_children(self):
        if self.lent is not None and self.server_report.get("server") != "ok":
            try:
                os.kill(self.lent.pid, signal.SIGKILL)    # the zygote reaps it and starts another
            except ProcessLookupError:
                pass
        for c in self.children:
            c.kill(wait=False)
        for fd in list(self.memfds.values()) + ([self.cand_ctl] if getattr(self, "cand_ctl", None) else []):
            try:
                os.close(fd)
            except OSError:
                pass
        self.memfds = {}
        self.cand_ctl = None

    # -- result helpers
    def base(self, status, compiled, correctness, code=None, message=None):
        r = {"status": status, "compiled": compiled, "correctness": correctness, "decoy_kernel": False,
             "kernel_runtime": -1.0, "reference_runtime": -1.0, "speedup": -1.0, "metadata": self.meta}
        if code:
            r["error_code"] = code
            r["error_message"] = clip(message or code)
        return r

    def fail(self, code, message, compiled=False):
        return self.base("failed", compiled, False, code, message)

    def run(self, request, limits):
        """Validate, hand the children their parts, supervise; the result."""
        import torch            # imported by the zygote's preload: a look-up
        t0 = time.monotonic()
        self.req, self.limits = req, lim = request, limits
        self.meta.update({"backend": req.get("backend"), "device": req.get("device", "cuda"),
                          "torch_version": torch.__version__, "python_version": platform.python_version(),
                          "hardware": self.z.device_name(req.get("device", "cuda")),
                          "harness": "kgym_harness/%d" % PROTOCOL, "zygote_pid": self.z.pid,
                          "zygote_jobs": self.z.jobs, "reference_process": "per_job", "clock": "judge"})
        job = self.job_settings()
        if "error" in job:
            return self.fail("VALIDATION_ERROR", job["error"])
        if not self.z.static_checks:
            self.meta["static_checks"] = "off"
        else:
            chk = static_check(req["kernel_code"], req.get("backend", "torch"))
            if chk is not None:
                return self.fail(chk[0], chk[1])
        self.phase_ms["static_check"] = (time.monotonic() - t0) * 1e3
        self.custom = custom_kernel_names(req["kernel_code"], req.get("backend", "torch"))
        try:
            ast.parse(req["reference_code"], filename="reference_code")
        except SyntaxError as e:
            return self.fail("VALIDATION_ERROR", "reference_code line %s: SyntaxError: %s" % (e.lineno, e.msg))
        profile = None
        if req.get("backend") in ("triton", "cuda"):
            # The candidate compiles: the compiler profile, or no job (fail closed).
            try:
                profile = self.z.compiler_profile(req["backend"])
            except SandboxError as e:
                return self.fail("SYSTEM_ERROR", str(e))
            if req["backend"] == "cuda" and job["device"] != "cpu" and "nvcc" not in profile["programs"]:
                return self.fail("SYSTEM_ERROR", "backend 'cuda' needs the CUDA toolkit's nvcc, and this worker "
                                 "has none (CUDA_HOME, nvcc on the PATH, or /usr/local/cuda)")
        probe = False
        if job["device"] != "cpu" and req.get("backend") in ("triton", "cuda"):
            if lim.get("kprobe_lib"):
                probe = True
            else:
                self.meta["profile_status"] = "unavailable: no kprobe_lib (a build without CUDA)"
        self.job_dir = os.path.join(os.getcwd(), "job-%d-%d" % (os.getpid(), self.z.jobs))
        os.mkdir(self.job_dir, 0o700)
        self.compiles = profile is not None
        if self.compiles:
            # Whatever the candidate's compilers leave behind -- in a process
            # group of their own, as ninja puts them -- becomes ours when
            # their parent dies, and dies with the job (reap_descendants).
            ctypes.CDLL(None).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        common = {k: job[k] for k in ("reference_code", "entry_point", "device", "backend", "init_seed")}
        if profile is not None and profile.get("pch") is not None:
            self.meta["inline_pch"] = pch_metadata(profile["pch"])
        if profile is not None and profile.get("cache_seed"):
            # Bytes do not travel as JSON: the Triton cache seed as base64.
            profile = dict(profile, cache_seed={rel: base64.b64encode(data).decode()
                                                for rel, data in profile["cache_seed"].items()})
        try:
            send_msg(self.judge_cand, {"type": "job", "limits": lim, "job_dir": self.job_dir,
                                       "job": dict(common, kernel_code=req["kernel_code"], compiler_profile=profile,
                                                   profile=probe)})
        except OSError as e:
            return self.fail("SYSTEM_ERROR", "the candidate process is gone before its job: %s" % e)
        if job["device"] == "cpu":
            # The areas of a CPU job (the judge's sandbox has no memfd_create).
            self.memfds = {name: os.memfd_create("kgym-" + name, os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
                           for name in ("inputs", "reference-outputs", "candidate-outputs")}
        self.key = self.reference_key(job)
        self.start_judge(self.key)
        cached = self.cached_reference_timing()
        self.meta["reference_timing_cached"] = cached is not None
        self.phase = ("compile", time.monotonic())
        self.phase_limit = float(lim.get("compile_timeout", PHASES["compile"][1]))
        self.deadline = self.phase[1] + self.phase_limit
        send_msg(self.sup_j, {"type": "job", "limits": lim, "job_dir": self.job_dir, "deadline": self.deadline,
                              "job": dict(job, profile=probe, reference_timing=cached),
                              "reference_job": dict(common, reference_backend=job["reference_backend"])})
        try:
            return self.supervise()
        finally:
            # Before the answer lets the GPU go: a lent server says it is
            # idle, or it is killed like a judge of the job's own.
            self.release_server(1.0)

    def reference_key(self, job):
        """What a judge server must have been set up and loaded with to
        serve this job: the same reference code, entry point, device and
        backend under the same limits."""
        what = [job["reference_code"], job["entry_point"], job["device"], job.get("reference_backend"),
                sorted(self.limits.items())]
        return hashlib.sha256(json.dumps(what, default=str).encode()).hexdigest()

    def job_settings(self):
        r = self.req
        for k in ("reference_code", "kernel_code"):
            if not isinstance(r.get(k), str):
                return {"error": "%s: expected a string" % k}
        base = str(r.get("seed", "")) or os.urandom(16).hex()
        n = max(MIN_CORRECT_TRIALS, int(r.get("num_correct_trials") or MIN_CORRECT_TRIALS))
        device = r.get("device", "cuda")
        job = {"reference_code": r["reference_code"], "entry_point": r.get("entry_point") or "Model",
               "device": "cpu" if device == "cpu" else "cuda",
               "reference_backend": r.get("reference_backend", "eager"), "seed_base": base,
               "backend": r.get("backend", "torch"), "num_correct_trials": n,
               # The models' weights: the candidate must build the same
               # parameters as the reference, so this one seed it knows.
               "init_seed": int.from_bytes(hashlib.sha256(("%s:init" % base).encode()).digest()[:8], "little")
               & ((1 << 63) - 1),
               "num_perf_trials": int(r.get("num_perf_trials") or 100), "num_warmup": int(r.get("num_warmup", 3)),
               "run_performance": r.get("run_performance", True) is not False,
               "max_timing_ms": float(r.get("max_timing_ms") or self.limits.get("max_timing_ms", 10000)),
               "timing_rel_precision": float(r.get("timing_rel_precision") or 0.005),
               "clock_trace": r.get("clock_trace") is True}
        for k in ("atol", "rtol"):
            if isinstance(r.get(k), (int, float)) and not isinstance(r.get(k), bool):
                job[k] = float(r[k])
        cpr = r.get("calls_per_round")
        if cpr is not None:
            # A diagnostic (tests, bench/judge_clock.py): the timing's
            # rounds of exactly this many calls instead of the judge's choice.
            if isinstance(cpr, bool) or not isinstance(cpr, int) or not 1 <= cpr <= 64:
                return {"error": "calls_per_round: expected an integer from 1 to 64"}
            job["calls_per_round"] = cpr
        if not job["entry_point"].isidentifier():
            return {"error": "entry_point: expected a Python identifier"}
        return job

    def cached_reference_timing(self):
        """The workflow's cached reference timing, if it was measured under
        this worker's torch and device and by the judge's clock (else the
        judge measures it again)."""
        c = self.req.get("reference_timing")
        if not isinstance(c, dict) or not isinstance(c.get("stats"), dict):
            return None
        env = c.get("env") or {}
        if env.get("torch") != self.timing_env()["torch"] or env.get("device") != self.meta["hardware"]:
            return None
        return c["stats"]

    def timing_env(self):
        import torch            # imported by the zygote's preload: a look-up
        return {"torch": torch.__version__ + "/judge", "device": self.meta["hardware"]}

    # -- while it runs
    def enter(self, name, lock=None):
        now = time.monotonic()
        old, start = self.phase
        # A phase may be entered again (the compile phase, when a big
        # problem takes the GPU alone): its time is the sum.
        self.phase_ms[old] = self.phase_ms.get(old, 0.0) + (now - start) * 1e3
        self.phase = (name, now)
        key, default, _ = PHASES[name]
        self.phase_limit = float(self.limits.get(key, default))
        self.deadline = now + self.phase_limit
        self.z.relay_phase(name, lock if self.req.get("device", "cuda") != "cpu" else None)
        # Counted from the moment the phase's GPU lock is held, as kgymd
        # counts its own: waiting for another job to let the GPU go is not
        # this job's time.
        self.deadline = time.monotonic() + self.phase_limit

    def supervise(self):
        total = float(self.req.get("timeout_s") or 0)
        end_total = time.monotonic() + total if total > 0 else None
        while True:
            limit = min(self.deadline, end_total) if end_total else self.deadline
            wait = limit + JUDGE_GRACE_S - time.monotonic()
            if wait <= 0:
                name, _ = self.phase
                why = "the task's timeout of %g s" % total if end_total and end_total <= self.deadline else \
                    "its deadline of %.0f s" % self.phase_limit
                return self.fail("TIMEOUT_ERROR", "the %s phase (%s) ran past %s" % (name, PHASES[name][2], why),
                                 self.compiled)
            rd, _, _ = select.select([self.sup_j, self.z.sock], [], [], wait)
            if self.z.sock in rd:
                # The worker never writes during a job unless it is going away.
                self.z.check_worker_alive()
            if self.sup_j not in rd:
                continue
            try:
                msg = recv_msg(self.sup_j, 64 << 20)
            except (ValueError, OSError, UnicodeDecodeError) as e:
                msg = None
                self.meta["judge_protocol"] = str(e)[:200]
            if msg is None and self.lent is not None:
                self.server_report = {"server": "drop"}
                return self.fail("SYSTEM_ERROR", "the judge server ended during the job", self.compiled)
            if msg is None:
                code, why = self.judge.death()
                # The judge's output is kgymd's own (tracebacks, host paths):
                # to the worker's log, not to the client.
                log = tail_of(os.path.join(self.job_dir, "judge", "output.log"))
                if log:
                    sys.stderr.write("kgym_harness: the judge ended (%s):\n%s\n" % (why, log))
                in_reference = getattr(self, "judge_flag", None) is not None and self.judge_flag[0] == 1
                if code == "SANDBOX_VIOLATION" and in_reference:
                    return self.fail("VALIDATION_ERROR", "the judge, running the reference's code, "
                                     "made a system call the sandbox forbids (killed by SIGSYS)", self.compiled)
                if code == "SANDBOX_VIOLATION":
                    return self.fail("SYSTEM_ERROR", "the judge made a system call the sandbox forbids "
                                     "(killed by SIGSYS) outside the reference's code", self.compiled)
                return self.fail("SYSTEM_ERROR", why, self.compiled)
            t = msg.get("type")
            if t == "compiled":
                self.compiled = True
                self.landlock = msg.get("landlock_abi")
                self.note_setup("candidate", msg.get("setup_ms"))
                self.note_setup("reference", msg.get("reference_setup_ms"))
                if msg.get("profile_status"):
                    self.meta["profile_status"] = str(msg["profile_status"])[:300]
            elif t == "phase" and msg.get("phase") in PHASES:
                self.enter(msg["phase"], msg.get("lock"))
                limit = min(self.deadline, end_total) if end_total else self.deadline
                send_msg(self.sup_j, {"type": "ack", "deadline": limit})
            elif t == "kill_candidate":
                # Nothing the candidate queued may run beside the reference's
                # timing, nor beside the next timer once the lock goes.
                t_kill = time.monotonic()
                self.cand.kill(wait=True)
                if self.compiles:
                    reap_descendants(exclude={self.judge.pid})
                self.meta["candidate_exit_ms"] = (time.monotonic() - t_kill) * 1e3
                send_msg(self.sup_j, {"type": "killed"})
            elif t == "verdict":
                return self.verdict_result(msg)
            else:
                return self.fail("SYSTEM_ERROR", "the judge sent an unexpected %r message" % str(t)[:40],
                                 self.compiled)

    def note_setup(self, role, steps):
        """metadata.<role>_setup_ms: where a process's start went (CUDA, the
        sandbox, CUPTI, loading the code); numbers only, whoever sent them."""
        if isinstance(steps, dict):
            self.meta[role + "_setup_ms"] = {str(k)[:20]: float(v) for k, v in list(steps.items())[:8]
                                             if isinstance(v, (int, float)) and not isinstance(v, bool)}

    # -- the verdict
    def verdict_result(self, v):
        compiled = bool(v.get("compiled"))
        for key in ("calls", "checked_calls"):
            if isinstance(v.get(key), int):
                self.meta["judged_calls" if key == "calls" else "timed_outputs_checked"] = v[key]
        if isinstance(v.get("meta"), dict):
            for key, val in v["meta"].items():
                if key == "hardware" and isinstance(val, str):
                    self.meta["hardware"] = val
                else:
                    self.meta[key] = val
        trials = v.get("trials") or []
        if v.get("gone"):
            return self.executor_gone(v["gone"], v.get("during"), compiled, bool(v.get("tainted")))
        if not v.get("ok"):
            code = v.get("code") or "SYSTEM_ERROR"
            # Once its model is ready, every failure the judge lays at the
            # candidate's door is scored (completed): out of memory, a
            # forbidden call, a hang as much as an exception.  A wrong
            # kernel that checks itself and then raises MemoryError, or
            # hangs, must not turn its wrong answer into a failure trainers
            # drop.  The judge says which failures are the problem's or
            # kgymd's (completed false).
            completed = compiled and v.get("completed", True) and code in CANDIDATE_FAILURES
            r = self.base("completed" if completed else "failed", compiled, False, code, v.get("message"))
            if trials:
                r["correctness_trials"] = trials
                self.meta["correctness_trials"] = "(%d / %d)" % (v.get("passed", 0), v.get("judged", 0))
            if v.get("hack"):
                self.meta["hack"] = v["hack"]
            return r
        r = self.base("completed", True, True)
        r["correctness_trials"] = trials
        self.meta["correctness_trials"] = "(%d / %d)" % (v.get("passed", 0), v.get("judged", 0))
        kstats = v.get("kernel")
        ok = True
        if isinstance(v.get("profile"), dict) or v.get("triton_kernels_matter") is not None:
            ok, r = self.apply_profile(r, v.get("profile") or {}, v.get("triton_kernels_matter"), kstats)
        if ok and kstats:
            clock = "judge_wall_clock" if self.req.get("device") == "cpu" else "judge_go_done"
            timing = {"kernel": dict(kstats, clock=clock)}
            if self.meta.get("gpu_time_ms") is not None:
                timing["kernel"]["gpu_time_ms_advisory"] = self.meta.pop("gpu_time_ms")
            r["kernel_runtime"] = kstats["median_ms"]
            rstats = v.get("reference")
            if rstats:
                timing["reference"] = dict(rstats)
                r["reference_runtime"] = rstats["median_ms"]
                if kstats["median_ms"] > 0:
                    r["speedup"] = rstats["median_ms"] / kstats["median_ms"]
            r["timing"] = timing
            self.meta["reference_timing_env"] = self.timing_env()
            if self.req.get("device") == "cpu":
                self.meta["timing_note"] = "CPU timings are informative only (no CUPTI cross-check)"
        return r

    def executor_gone(self, role, during, compiled, tainted=False):
        """An executor's process ended in the middle: say how, from its wait
        status (SIGSYS: the sandbox), with the end of its output.  Once the
        candidate's code has run in its process (tainted), a crash or an
        exit there is the candidate's: before its model was ready, its
        kernel_code did not load or build; never a failure of kgymd's."""
        c = self.cand if role == "candidate" else None
        if c is None:
            # The reference executor is the judge's child: its end is the
            # judge's to see, and it saw a process gone.
            return self.fail("SYSTEM_ERROR", "the reference executor ended while %s" % during, compiled)
        if c.status is None:
            # Its socket closed: give the process a moment to be reapable.
            end = time.monotonic() + 2.0
            while c.reap(block=False) is None and time.monotonic() < end:
                time.sleep(0.01)
            if c.status is None:
                c.kill(wait=True)
        code, why = c.death()
        log = tail_of(os.path.join(self.job_dir, role, "output.log"))
        why = "%s (while %s)" % (why, during) if during else why
        if role == "reference":
            if code == "SANDBOX_VIOLATION":
                return self.fail("VALIDATION_ERROR", "the reference made a system call the sandbox forbids "
                                 "(killed by SIGSYS)", compiled)
            return self.fail("SYSTEM_ERROR", why + ("\n" + log if log else ""), compiled)
        if compiled and code in CANDIDATE_FAILURES:
            # Killed by SIGKILL or SIGXCPU, or by the sandbox, on its inputs:
            # the candidate's own doing (it may signal itself), scored.
            return self.base("completed", True, False, code, why + ("\n" + log if log else ""))
        if code == "RUNTIME_ERROR" and tainted:
            code = "COMPILATION_ERROR"
            why = "kernel_code could not be loaded or its ModelNew built: " + why
        return self.fail(code, why + ("\n" + log if log else ""), compiled)

    def apply_profile(self, r, p, matter, kstats):
        """(still correct?, result) after what the candidate's profiled
        calls (CUPTI, the candidate process's word: advisory) and its calls
        with the Triton launches skipped (outputs compared by the judge)
        say.  Both can only catch: a candidate that forges them escapes
        these checks, and gains no time by it (the judge's clock)."""
        if p:
            self.meta["profile_status"] = str(p.get("status"))[:300]
            self.meta["profile_source"] = "candidate_process (advisory)"
        hack = None
        if p.get("status") == "ok" and isinstance(p.get("kernels"), list):
            try:
                table, meta, gpu_ms, hack = judge_profile(p, self.custom, self.req.get("backend"), kstats,
                                                          min_custom_share(self.req, self.limits))
            except (KeyError, TypeError, ValueError) as e:
                self.meta["profile_status"] = "unreadable: %s" % e
            else:
                r["profile"] = table[:64]
                self.meta.update(meta)
                self.meta["gpu_time_ms"] = gpu_ms
        if matter is not None:
            self.meta["triton_kernels_matter"] = matter
            if matter is False and (hack is None or hack["kind"] == "timing_mismatch"):
                hack = {"kind": "decoy_kernel",
                        "detail": "the outputs are nearly the same with every launch of kernel_code's Triton "
                                  "kernels (%s) skipped: they do not do the work" % ", ".join(self.custom)}
        if hack is None:
            return True, r
        self.meta["hack"] = hack
        r.update(correctness=False, error_code="REWARD_HACK", error_message=clip(hack["detail"]),
                 decoy_kernel=hack["kind"] in ("decoy_kernel", "pytorch_fallback"))
        return False, r

    def finish(self, r):
        name, start = self.phase
        self.phase_ms.setdefault(name, (time.monotonic() - start) * 1e3)
        self.meta["phases_ms"] = self.phase_ms
        self.meta["sandbox"] = {"seccomp": self.landlock is not None, "landlock_abi": self.landlock,
                                "candidate_profile": "compilers" if self.req.get("backend") in ("triton", "cuda")
                                else "python"}
        return scrub_for_client(r, self.job_dir)

    def cleanup(self):
        """After the answer is sent (the GPU lock goes with it): wait for the
        children's end, sweep what the compilers left, remove the files."""
        for c in self.children:
            c.reap()
        if self.compiles:
            reap_descendants()
        if self.job_dir is not None:
            remove_tree(self.job_dir)


def run_job(job, request, limits):
    """A job's result, whatever happens; every job process is killed before
    it is returned (the answer lets the GPU lock go)."""
    try:
        result = job.finish(job.run(request, limits))
    except Exception:  # noqa: BLE001 - the worker gets an answer, whatever happened
        result = {"status": "failed", "compiled": False, "correctness": False, "error_code": "SYSTEM_ERROR",
                  "error_message": internal_error("the harness")}
    job.kill_children()
    return result

