"""kgym_judge.py -- the judge of a KernelBench-format job: the trusted side.

One judge process per job, forked by the job's supervisor, sandboxed like
every job process (the reference's get_inputs() is the submitter's code,
trusted for that submitter's task only).  No candidate code is ever loaded
here, and nothing of this module is in an executor's address space: the
zygote never imports it, only the judge does, after its fork.

What the judge owns (ARCHITECTURE.md, "The judge"):

  - the seeds: drawn here, never sent anywhere; every call -- correctness
    trial, warm-up, timed call -- gets inputs made from a new one, on the
    job's device (get_inputs() under the CUDA device), copied into the
    input buffers both executors map, and kept privately to check after
    the call that the executor left them unchanged;
  - the buffers: one area of inputs, one of outputs per executor (a memfd
    on a CPU; on a GPU memory the judge allocated with the driver and
    exported through CUDA IPC, so that no block of torch's allocator, which
    may hold other tensors of the judge's, is ever mapped by an executor);
    the candidate's outputs are poisoned before every call; and on a GPU
    an arena per executor that its forward allocates from (arena.c), so
    that the outputs it returns lie in the judge's memory and the judge
    copies them out itself -- no copy of the executor's, which code in the
    candidate's process could skip, is left to subtract;
  - the clock: per call, "arm" (the executor says "armed" and spins), the
    inputs written, the outputs poisoned, L2 flushed, the device synced;
    then GO, and the clock stops once DONE is seen *and* the judge's own
    copy of the outputs (from the arena, or from the output area where the
    executor copied them) is complete -- whatever the executor left
    unfinished is either on the clock or missing from the copy;
  - the verdict: every call's outputs -- not a sample -- compared with the
    reference's outputs for the same inputs (the reference runs right
    after the candidate, on the same buffers, untimed), so every call
    looks the same to the candidate;
  - the reference's timing: after the candidate's process is gone (the
    supervisor kills it on the judge's word), by the same protocol, or from
    the workflow's cache; and the handshake's own cost (an empty call of
    the reference executor, the only trusted one), subtracted from both.
"""

import gc
import hashlib
import math
import os
import random
import select
import socket
import time

import torch

from kgym_common import (MIN_CORRECT_TRIALS, SETUP_MS, CTL_DONE, CTL_GO, CTL_OUTS, CTL_STATUS, OUT_IN_SLOT,
                         ControlBlock, CudaDriver, area_layout, child_setup, clip, dtype_name, format_exc,
                         internal_error, load_module, out_of_memory, recv_msg, seal_memfd, send_msg)
from kgym_judge_compare import OutputsReused, Verdict, compare_outputs, median, nearly_same, same_tensor
from kgym_judge_memory import DeviceMemory
from kgym_judge_timing import TimingPhase

PROFILE_CALLS = 3
# The page the supervisor reads when this process dies (kgym_supervisor.py):
# byte 0 is 1 while the submitter's reference code runs here.
IN_REFERENCE = None


class reference_code:
    """`with reference_code():` around every call into the reference's
    module (its import, get_inputs())."""

    def __enter__(self):
        if IN_REFERENCE is not None:
            IN_REFERENCE[0] = 1

    def __exit__(self, *exc):
        if IN_REFERENCE is not None:
            IN_REFERENCE[0] = 0
        return False


def derive_seed(base, tag, index=0):
    """A 63-bit seed from the judge's secret base."""
    h = hashlib.sha256(("%s:%s:%d" % (base, tag, index)).encode()).digest()
    return int.from_bytes(h[:8], "little") & ((1 << 63) - 1)

# ------------------------------------------------------------------ the judge


class ExecutorGone(Exception):
    def __init__(self, role, during):
        super().__init__(role)
        self.role, self.during = role, during


class Peer:
    """The judge's side of one executor: its socket and control block."""

    def __init__(self, role, sock, ctl_fd):
        self.role, self.sock, self.ctl_fd = role, sock, ctl_fd
        self.ctl = None
        self.ready = None
        self.outputs = None        # the judge's views of this executor's output area
        self.arena = None          # the judge's view of this executor's arena (bytes), GPU
        self.arena_fd = None       # its exported descriptor, for give_buffers
        self.arena_views = {}      # (output index, offset) -> the judge's view there
        self.k = 0                 # the last call number given
        # Set when the candidate's executor says "loading", just before it
        # runs kernel_code: from then on nothing it says is kgymd's word.
        self.tainted = False

    def recv(self, during, deadline=None):
        """The executor's next message; ExecutorGone at EOF or garbage."""
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.sock], [], [], left)[0]:
                raise Verdict("TIMEOUT_ERROR", "%s: the %s process did not answer in time" % (during, self.role),
                              completed=self.role == "candidate")
        try:
            msg = recv_msg(self.sock, 16 << 20)
        except (ValueError, OSError, UnicodeDecodeError):
            msg = None
        if msg is None:
            raise ExecutorGone(self.role, during)
        return msg


class Judge(DeviceMemory, TimingPhase):
    def __init__(self, sup, ref, cand, lib, state=None, memfds=None):
        self.sup, self.ref, self.cand = sup, ref, cand
        self.lib = lib
        self.state = state if state is not None else {}   # what a judge server keeps across jobs
        self.memfds = memfds or {}  # the areas' memfds of a CPU job (the supervisor's: no memfd_create here)
        self.area_fds = []          # the GPU areas' exported descriptors, closed after the job
        self.trials_passed = False
        self.meta = {}
        self.deadline = None
        self.trials = []
        self.checked_calls = 0
        self.calls = 0
        self.prep_ms = {"candidate": [], "reference": []}
        self.trace = None
        self.profile = None
        self.matter = None
        self.compiled = False
        self.slots = 1              # calls a round holds (the areas' size over one call's)
        self.k = 1                  # calls per round of the timing phase (kgym_judge_timing.py)

    # -- the supervisor
    def phase(self, name, lock=None):
        """Ask the supervisor for a phase (its deadline; the GPU lock it
        needs); returns once it is in force."""
        send_msg(self.sup, {"type": "phase", "phase": name, "lock": lock})
        msg = recv_msg(self.sup)
        if msg is None or msg.get("type") != "ack":
            os._exit(0)
        self.deadline = float(msg["deadline"])
        self.phase_name = name

    # -- set-up
    def start(self):
        """The job from the supervisor; the sandbox and CUDA where this
        process has not set them up yet (a judge server did, at its first
        job); the reference executor's job, forwarded; the reference's
        get_inputs()."""
        msg = recv_msg(self.sup)
        if msg is None or msg.get("type") != "job":
            os._exit(0)
        self.job, self.limits = job, limits = msg["job"], msg["limits"]
        self.job_dir = msg["job_dir"]
        self.deadline = float(msg["deadline"])
        # A diagnostic request field (bench/judge_clock.py): every sample of
        # the clock, in order, in metadata.clock_trace -- timings only, the
        # submitter's own job's.
        self.trace = {} if job.get("clock_trace") is True else None
        self.phase_name = "compile"
        self.gpu = job["device"] != "cpu"
        self.device = "cuda" if self.gpu else "cpu"
        # The reference executor starts on its job at once (its CUDA start
        # overlaps ours).
        send_msg(self.ref.sock, {"type": "job", "job": msg["reference_job"], "limits": limits,
                                 "job_dir": self.job_dir})
        st = self.state
        if "abi" not in st:
            keep = {self.sup.fileno(), self.ref.sock.fileno(), self.cand.sock.fileno(), self.ref.ctl_fd,
                    self.cand.ctl_fd} | set(self.memfds.values()) | st.get("keep", set())
            try:
                st["abi"] = child_setup("judge", job, limits, keep, self.job_dir, self.lib)
            except Exception as e:  # noqa: BLE001 - fail closed
                raise Verdict("SYSTEM_ERROR", "the judge could not enter the sandbox: %s" % e, completed=False)
            self.meta["judge_setup_ms"] = dict(SETUP_MS)
            st["cuda"] = CudaDriver() if self.gpu else None
            st["flush"] = None
            if self.gpu:
                l2 = getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 50 << 20) or (50 << 20)
                st["flush"] = torch.empty(2 * l2 // 4, dtype=torch.int32, device="cuda")
            self.ref.ctl = ControlBlock(self.ref.ctl_fd)
        self.abi, self.cuda, self.flush = st["abi"], st["cuda"], st["flush"]
        self.cand.ctl = ControlBlock(self.cand.ctl_fd)
        self.base = job["seed_base"]
        self.serial = 0
        # The reference's module is run again for every job, also in a judge
        # server: its module-level state is the job's own, as in a fresh
        # process (a few milliseconds).
        try:
            with reference_code():
                self.mod = load_module(job["reference_code"], "reference_code")
        except Exception:  # noqa: BLE001
            raise Verdict("VALIDATION_ERROR", format_exc("the reference could not be loaded:"), completed=False)
        if not callable(self.mod.get("get_inputs")):
            raise Verdict("VALIDATION_ERROR", "reference_code defines no get_inputs", completed=False)

    def release(self):
        """(A judge server, after a job) the job's buffers and tensors let go
        of, here and in the reference executor: nothing of this job is
        left for the next one."""
        send_msg(self.ref.sock, {"type": "release"})
        msg = self.ref.recv("releasing the job's buffers", time.monotonic() + 5)
        if msg.get("type") != "released":
            raise ExecutorGone("reference", "releasing the job's buffers")
        self.inputs = self.ref.outputs = self.cand.outputs = None
        self.ref.arena = self.cand.arena = self.ref.arena_fd = self.cand.arena_fd = None
        self.ref.arena_views, self.cand.arena_views = {}, {}
        self.landing = None
        self.keep_maps = []
        for fd in self.area_fds:
            os.close(fd)
        self.area_fds = []
        if self.gpu:
            torch.cuda.synchronize()
            self.cuda.release_all()
            torch.cuda.empty_cache()

    def fresh_seed(self, tag):
        self.serial += 1
        return derive_seed(self.base, tag, self.serial)

    def make_inputs(self, seed, signed=False):
        """get_inputs() under a seed of the judge's, on the job's device;
        for a signed trial every floating tensor gets random signs."""
        # The generators get_inputs() can draw from: the CPU's and, on a
        # GPU, the job's device's.  Not torch.manual_seed: it also seeds
        # every other backend torch knows (XPU, MPS), queueing each seed
        # with a formatted stack trace where that backend was never
        # started -- 0.4-0.6 s of a job's 500 calls on an H200.
        torch.random.default_generator.manual_seed(seed)
        if self.gpu:
            torch.cuda.manual_seed(seed)
        try:
            with reference_code():
                if self.gpu:
                    with torch.device("cuda"):
                        inputs = list(self.mod["get_inputs"]())
                else:
                    inputs = list(self.mod["get_inputs"]())
                # Plain tensors from here on: a subclass's methods are the
                # reference's code, which must not run unmarked in the judge.
                inputs = [x.as_subclass(torch.Tensor) if isinstance(x, torch.Tensor) else x for x in inputs]
        except Exception as e:  # noqa: BLE001
            if out_of_memory(e):
                # The problem's size, never the candidate's fault.
                raise Verdict("RESOURCE_ERROR", format_exc("the reference's get_inputs() ran out of memory:"),
                              completed=False)
            raise Verdict("VALIDATION_ERROR", format_exc("the reference's get_inputs() failed:"), completed=False)
        inputs = [x.to(self.device) if isinstance(x, torch.Tensor) else x for x in inputs]
        if signed:
            g = torch.Generator(device=self.device).manual_seed(derive_seed(seed, "signs"))
            for i, x in enumerate(inputs):
                if isinstance(x, torch.Tensor) and x.is_floating_point():
                    flip = torch.rand(x.shape, generator=g, device=self.device) < 0.5
                    inputs[i] = torch.where(flip, -x, x).to(x.dtype)
        return inputs

    def give_buffers(self, peer, outputs_desc, outputs_fd, during):
        fds = [fd for fd in (self.inputs_fd, outputs_fd, peer.arena_fd) if fd is not None]
        send_msg(peer.sock, {"type": "buffers", "inputs": self.inputs_desc, "outputs": outputs_desc,
                             "slots": self.slots, "fds": len(fds),
                             "arena": {"size": peer.arena.numel()} if peer.arena_fd is not None else None})
        if fds:
            socket.send_fds(peer.sock, [b"F"], fds)
        msg = peer.recv(during, self.deadline)
        if msg.get("type") != "mapped":
            self.executor_failed(peer, msg, during)
        if peer.arena_fd is not None and msg.get("arena") != "on":
            # Not set up there: that executor copies its outputs.  The
            # reference's word is kgymd's (the candidate then gets no arena
            # either: both sides timed alike); a candidate that broke its
            # own only pays for the copies.
            peer.arena = None
            if peer.role == "reference":
                self.meta["output_arena"] = str(msg.get("arena") or "off")[:200]

    def wait_ready(self, peer):
        msg = peer.recv("setting up", self.deadline)
        if msg.get("type") == "loading" and peer.role == "candidate":
            peer.tainted = True
            msg = peer.recv("setting up", self.deadline)
        if msg.get("type") != "ready":
            self.executor_failed(peer, msg, "setting up")
        peer.ready = msg
        return msg

    def executor_failed(self, peer, msg, during):
        """An executor said it failed (or said something out of turn)."""
        t = msg.get("type")
        text = str(msg.get("message") or "")
        if peer.role == "reference":
            code = msg.get("code") or "VALIDATION_ERROR"
            if t == "violation":
                code = "VALIDATION_ERROR"
                text = "the reference: " + text
            raise Verdict(code, text or "the reference failed while %s" % during, completed=False)
        if t == "compile_error":
            raise Verdict("COMPILATION_ERROR", text, completed=False)
        if t == "violation":
            raise Verdict("SANDBOX_VIOLATION", text, completed=False)
        if t == "error":
            if not peer.tainted:
                raise Verdict(msg.get("code") or "SYSTEM_ERROR", text, completed=False)
            # The candidate's code runs in that process, and anything there
            # can write this socket: what it reports is the candidate's own
            # failure, never kgymd's or the reference's (a trainer drops
            # those instead of scoring them), and ends the task as the
            # candidate's failure would at this point -- before its model
            # is ready, kernel_code did not load or build (failed); after,
            # it failed on its inputs (completed).  Its code and its status
            # are the judge's to say, whatever the message claims.
            return self.candidate_failed("the candidate process reported: %s" % (text or "an error"))
        raise Verdict("SANDBOX_VIOLATION", "the candidate process sent an unexpected %r message while %s"
                      % (str(t)[:40], during), completed=self.compiled)

    def candidate_failed(self, text):
        """The candidate failed on its own: COMPILATION_ERROR before its
        model was ready, RUNTIME_ERROR (completed) after."""
        if self.compiled:
            raise Verdict("RUNTIME_ERROR", text, completed=True)
        raise Verdict("COMPILATION_ERROR", text, completed=False)

    def set_up_buffers(self):
        """The first inputs, the areas, the reference's outputs' shapes."""
        first = self.make_inputs(self.fresh_seed("shape"))
        self.tensor_pos = [i for i, x in enumerate(first) if isinstance(x, torch.Tensor)]
        specs = [(first[i].dtype, tuple(first[i].shape)) for i in self.tensor_pos]
        self.input_specs = specs
        self.inputs_desc, self.inputs, self.inputs_fd = self.allocate(specs, "inputs")
        self.wait_ready(self.ref)
        if isinstance(self.ref.ready.get("device_name"), str):
            self.meta["hardware"] = self.ref.ready["device_name"][:200]
        self.give_buffers(self.ref, None, None, "setting up")
        self.place(first)
        send_msg(self.ref.sock, {"type": "describe", "args": self.args(first)})
        msg = self.ref.recv("describing the reference's outputs", self.deadline)
        if msg.get("type") != "described":
            self.executor_failed(self.ref, msg, "running on its first inputs")
        out_specs = []
        for o in msg["outputs"]:
            dt = getattr(torch, str(o["dtype"]), None)
            if not isinstance(dt, torch.dtype):
                raise Verdict("VALIDATION_ERROR", "the reference returns a %s tensor" % o["dtype"], completed=False)
            out_specs.append((dt, tuple(int(s) for s in o["shape"])))
        if not out_specs:
            raise Verdict("VALIDATION_ERROR", "the reference returns no tensor", completed=False)
        self.out_specs = out_specs
        self.slots = 1
        # Each executor's outputs live in an area of the judge's (and the
        # timing phase keeps up to STASH_BYTES more): the worker's limit.
        out_bytes = area_layout(out_specs)[1]
        limit = self.output_limit()
        if out_bytes > limit:
            raise Verdict("RESOURCE_ERROR", "the reference's outputs take %d bytes a call, over the %d bytes of "
                          "[plugin.python] max_output_bytes" % (out_bytes, limit), completed=False)
        self.admit_alone(area_layout(specs)[1] if specs else 0, out_bytes)
        # A problem whose reference writes into its inputs (an in-place op):
        # then the candidate may too.
        self.ref_mutates = not self.inputs_unchanged(first)
        self.slots = self.round_slots(area_layout(specs)[1] if specs else 0, out_bytes)
        if self.slots > 1:
            # Room for a round's calls: the areas again, k times over (the
            # one-call input area, which the outputs' shapes came from, is
            # let go of with the job's others).
            self.inputs_desc, self.inputs, self.inputs_fd = self.allocate(specs * self.slots, "inputs")
        desc, self.ref.outputs, fd = self.allocate(out_specs * self.slots, "reference-outputs")
        # The judge's own copy of a call's outputs, taken on the clock (both
        # executors' outputs have the reference's dtypes and shapes).
        self.landing = [torch.empty_like(o) for o in self.ref.outputs]
        in_bytes = area_layout(specs * self.slots)[1] if specs else 0
        self.make_arena(self.ref, out_bytes * self.slots, in_bytes)
        self.give_buffers(self.ref, desc, fd, "setting up")
        desc, self.cand.outputs, fd = self.allocate(out_specs * self.slots, "candidate-outputs")
        self.cand_out_desc, self.cand_out_fd = desc, fd
        self.make_arena(self.cand, out_bytes * self.slots, in_bytes)
        # A CPU job's areas have their sizes now: sealed before the
        # candidate holds any of them (kgym_common.seal_memfd).
        for fd in self.memfds.values():
            seal_memfd(fd)

    def slot(self, views, j, per):
        """The views of call j of a round (areas hold `slots` calls' tensors
        one call after the other)."""
        return views[j * per:(j + 1) * per]

    def args(self, inputs, j=0):
        base = j * len(self.tensor_pos)
        return [["t", base + self.tensor_pos.index(i)] if isinstance(x, torch.Tensor) else ["v", x]
                for i, x in enumerate(inputs)]

    def place(self, inputs, j=0):
        for buf, i in zip(self.slot(self.inputs, j, len(self.tensor_pos)), self.tensor_pos):
            x = inputs[i]
            if x.dtype != buf.dtype or tuple(x.shape) != tuple(buf.shape):
                raise Verdict("VALIDATION_ERROR", "get_inputs() gave input %d as %s of shape %s under one seed "
                              "and %s of shape %s under another: kgymd needs the same dtypes and shapes on "
                              "every call" % (i, dtype_name(buf.dtype), list(buf.shape), dtype_name(x.dtype),
                                              list(x.shape)), completed=False)
            buf.copy_(x)

    def inputs_unchanged(self, inputs, j=0):
        return self.changed_input(inputs, j) is None

    def changed_input(self, inputs, j=0):
        for buf, i in zip(self.slot(self.inputs, j, len(self.tensor_pos)), self.tensor_pos):
            if not same_tensor(buf, inputs[i]):
                return i
        return None

    def poison(self, outs):
        """Fill the outputs with what no honest call leaves there (NaN, or a
        random integer); returns the fills, for poison_intact."""
        fills = []
        for o in outs:
            if o.numel() == 0:
                fills.append(None)
            elif o.is_floating_point() or o.is_complex():
                o.fill_(float("nan"))
                fills.append(float("nan"))
            elif o.dtype == torch.bool:
                fills.append(bool(random.getrandbits(1)))
                o.fill_(fills[-1])
            else:
                info = torch.iinfo(o.dtype)
                fills.append(random.randint(max(info.min, -(1 << 30)), min(info.max, 1 << 30)))
                o.fill_(fills[-1])
        return fills

    def poison_intact(self, outs, fills):
        """Are the outputs still poisoned just before GO?  Elements at
        positions the executor cannot know: an executor that wrote its
        outputs in the window between "armed" and GO (work off the clock)
        is seen here."""
        for o, fill in zip(outs, fills):
            if fill is None:
                continue
            flat = o.reshape(-1)
            idx = torch.randint(0, flat.numel(), (16,), device=flat.device)
            got = flat[idx]
            if o.is_complex():
                got = torch.view_as_real(got)
            ok = torch.isnan(got).all() if isinstance(fill, float) else (got == fill).all()
            if not bool(ok):
                return False
        return True

    # -- one call
    def call(self, peer, inputs, mode="call", what=None):
        """One call of an executor on inputs already made.  Returns (ms,
        outputs)."""
        ms, got = self.round(peer, [inputs], mode, what)
        return ms, got[0]

    def round(self, peer, calls, mode="call", what=None, outputs_matter=True):
        """A round of calls of an executor, on inputs already made (one set
        per call): arm, prepare (inputs in place, outputs poisoned, L2
        flushed, device synced), GO, DONE, the judge's copy of the outputs.
        Returns (ms of the whole round, [outputs of each call]).  Where the
        outputs matter (not the reference's timing samples), a round whose
        outputs overlap in the arena raises OutputsReused."""
        peer.k += 1
        k = peer.k
        what = what or "call %d" % k
        n_out = len(self.out_specs)
        send_msg(peer.sock, {"type": "arm", "k": k, "mode": mode,
                             "calls": [self.args(x, j) for j, x in enumerate(calls)]})
        msg = peer.recv(what, self.deadline)
        if msg.get("type") != "armed" or msg.get("k") != k:
            self.executor_failed(peer, msg, what)
        t_prep = time.perf_counter()
        fills = []
        for j, inputs in enumerate(calls):
            self.place(inputs, j)
            fills.append(self.poison(self.slot(peer.outputs, j, n_out)))
        if self.gpu:
            self.flush.zero_()
            torch.cuda.synchronize()
        ctl = peer.ctl
        # Nothing of this call may have happened before GO: no DONE, and the
        # outputs as poisoned.
        if ctl.words[CTL_DONE] == k or not all(self.poison_intact(self.slot(peer.outputs, j, n_out), f)
                                               for j, f in enumerate(fills)):
            detail = "%s: the executor answered or wrote its outputs before the call began" % what
            raise Verdict("REWARD_HACK", detail, {"kind": "work_before_go", "detail": detail},
                          completed=peer.role == "candidate")
        # Inside the clock, nothing that allocates: the copy lands in
        # buffers made once per executor (torch's allocator asking the
        # driver for a block mid-call cost 0.1-0.3 ms, and only when
        # outputs were being kept, so candidate calls and calibration
        # differed), and no garbage collection.
        collecting = gc.isenabled()
        gc.disable()
        try:
            t0 = time.perf_counter()
            self.prep_ms[peer.role].append((t0 - t_prep) * 1e3)
            ctl.words[CTL_GO] = k
            if not self.wait_done(peer, k, what):
                raise Verdict("TIMEOUT_ERROR", "%s: %s did not finish within the %s phase's deadline" % (
                    what, "ModelNew" if peer.role == "candidate" else "the reference", self.phase_name),
                    completed=peer.role == "candidate")
            failed = ctl.words[CTL_STATUS] != 0
            if not failed and outputs_matter and mode == "call" and len(calls) > 1 and peer.arena is not None:
                self.outputs_apart(peer, len(calls), n_out)
            # A failed call's words may be a former job's: never read then.
            for idx, (dst, o) in enumerate(zip(self.landing[:len(calls) * n_out] if not failed else [],
                                               peer.outputs)):
                dst.copy_(self.output_source(peer, idx, o, what))
            if self.gpu:
                torch.cuda.synchronize()
            ms = (time.perf_counter() - t0) * 1e3
        finally:
            # A judge server outlives the job: never leave it uncollected.
            if collecting:
                gc.enable()
        got = [[t.clone() for t in self.slot(self.landing, j, n_out)] for j in range(len(calls))]
        self.calls += 1
        if ctl.words[CTL_STATUS] != 0:
            msg = peer.recv(what, time.monotonic() + 10)
            self.call_failed(peer, msg, what)
        return ms, got

    def outputs_apart(self, peer, k, n_out):
        """OutputsReused when two outputs of a round overlap in the arena."""
        spans = []
        for idx in range(k * n_out):
            at = peer.ctl.words[CTL_OUTS + idx]
            if at != OUT_IN_SLOT:
                o = peer.outputs[idx]
                spans.append((at, at + o.numel() * o.element_size()))
        spans.sort()
        if any(b[0] < a[1] for a, b in zip(spans, spans[1:])):
            raise OutputsReused(peer.role)

    def output_source(self, peer, idx, slot, what):
        """Where output idx of a round is, by its executor's word (the
        control page): in its arena at an offset, or in its output area's
        slot.  The word is the candidate's: an offset outside the arena,
        or not aligned to the dtype, is a forgery, never a read."""
        at = peer.ctl.words[CTL_OUTS + idx]
        if peer.arena is None or at == OUT_IN_SLOT:
            return slot
        # Inside the clock: the view of an offset seen before is kept (the
        # caching allocator gives a job's calls the same blocks), so that
        # making views -- microseconds of Python each -- is not paid per
        # call.  Keyed by the offset too: a view is only ever of a checked one.
        view = peer.arena_views.get((idx, at))
        if view is not None:
            return view
        n = slot.numel() * slot.element_size()
        if at % slot.element_size() != 0 or at + n > peer.arena.numel():
            detail = "%s: the executor said an output lies at byte %d of its arena, outside it" % (what, at)
            raise Verdict("REWARD_HACK", detail, {"kind": "forged_result", "detail": detail},
                          completed=peer.role == "candidate")
        view = peer.arena[at:at + n].view(slot.dtype).view(slot.shape)
        peer.arena_views[(idx, at)] = view
        return view

    def wait_done(self, peer, k, what):
        """Spin on DONE; every few thousand turns, the deadline and the
        executor's socket (readable before DONE: it died)."""
        w = peer.ctl.words
        n = 0
        while w[CTL_DONE] != k:
            n += 1
            if n & 4095 == 0:
                if time.monotonic() > self.deadline:
                    return False
                if select.select([peer.sock], [], [], 0)[0]:
                    if w[CTL_DONE] == k:
                        break
                    msg = peer.recv(what)
                    self.executor_failed(peer, msg, what)
                os.sched_yield()
        return True

    def call_failed(self, peer, msg, what):
        kind, text = msg.get("kind"), str(msg.get("message") or "")
        if msg.get("type") != "call_error":
            self.executor_failed(peer, msg, what)
        if peer.role == "reference":
            raise Verdict("VALIDATION_ERROR" if kind != "resource" else "RESOURCE_ERROR",
                          "%s: the reference failed on its inputs: %s" % (what, text), completed=False)
        if kind == "bad_output":
            if self.trials_passed:
                raise Verdict("REWARD_HACK", "%s: %s, although the correctness trials passed" % (what, text),
                              hack={"kind": "timed_output_mismatch", "detail": "%s: %s" % (what, text)})
            raise Verdict("CORRECTNESS_ERROR", "%s: %s" % (what, text))
        if kind == "violation":
            raise Verdict("SANDBOX_VIOLATION", "%s: %s" % (what, text))
        if kind == "resource":
            raise Verdict("RESOURCE_ERROR", "%s: %s" % (what, text))
        raise Verdict("RUNTIME_ERROR", text if text.startswith("ModelNew") else "%s: %s" % (what, text))

    def judged_call(self, inputs, what):
        """The candidate on `inputs`, then the reference on the same, and
        the comparison: every call of the candidate goes through here.
        Returns (candidate ms, comparison, changed input index or None)."""
        ms, got = self.call(self.cand, inputs, what=what)
        changed = None if self.ref_mutates else self.changed_input(inputs)
        _, want = self.call(self.ref, inputs, what=what + " (the reference's run)")
        c = compare_outputs(want, got, self.job)
        self.checked_calls += 1
        return ms, c, changed

    # -- the job
    def correctness(self):
        n = max(MIN_CORRECT_TRIALS, int(self.job.get("num_correct_trials") or MIN_CORRECT_TRIALS))
        self.trials_passed = False
        nonneg = True
        plan = [(self.fresh_seed("trial"), False) for _ in range(n)]
        failure = None
        passed = judged = 0
        t0 = time.monotonic()
        k = 0
        while k < len(plan):
            seed, signed = plan[k]
            inputs = self.make_inputs(seed, signed)
            nonneg = nonneg and not signed and all_nonnegative(inputs)
            what = "signed-input trial" if signed else "correctness trial %d of %d" % (k + 1, n)
            entry = {"trial": k, "seed": str(seed), "signed_inputs": signed}
            if signed and not self.reference_finite(inputs):
                entry.update(passed=None, skipped="the reference is not finite on signed inputs")
                self.trials.append(entry)
                k += 1
                continue
            ms, c, changed = self.judged_call(inputs, what)
            if k == 0:
                self.meta["candidate_first_call_ms"] = ms
            judged += 1
            entry.update(passed=c["ok"] and changed is None, max_abs_err=c["max_abs_err"],
                         max_rel_err=c["max_rel_err"], mismatches=c["mismatches"],
                         first_bad_index=c["first_bad_index"])
            if changed is not None:
                entry["changed_input"] = changed
            self.trials.append(entry)
            if failure is None:
                if not c["ok"]:
                    hint = hack = None
                    if signed:
                        hint = " (inputs with random signs: the problem's own inputs are all non-negative, " \
                               "so an identity-like shortcut passes them)"
                        if passed == judged - 1:
                            hack = {"kind": "only_correct_on_nonnegative_inputs",
                                    "detail": "passed every trial but the signed-input one"}
                    failure = Verdict("CORRECTNESS_ERROR", "%s%s: %s" % (what, hint or "", c["message"]), hack)
                elif changed is not None:
                    detail = "input %d was modified by the call" % changed
                    failure = Verdict("REWARD_HACK", "%s: %s" % (what, detail),
                                      {"kind": "input_mutation", "detail": detail})
                else:
                    passed += 1
            if k == len(plan) - 1 and nonneg and not any(s for _, s in plan):
                plan.append((self.fresh_seed("signed"), True))
            k += 1
        self.passed, self.judged = passed, judged
        self.meta["candidate_trials_ms"] = (time.monotonic() - t0) * 1e3
        if failure is not None:
            raise failure
        self.trials_passed = True

    def reference_finite(self, inputs):
        """Does the reference give finite outputs on these (signed) inputs?
        A problem whose domain is non-negative (sqrt, log) gives NaN there:
        then the signed trial proves nothing."""
        _, want = self.call(self.ref, inputs, what="the reference on signed inputs")
        return all(bool(torch.isfinite(o).all()) for o in want if o.is_floating_point())

    def decoy_check(self):
        """Do the candidate's Triton kernels do its work?  One call with
        every @triton.jit launch skipped and two normal calls (the first
        judged), on the same fresh inputs: when the outputs without the
        kernels are nearly the same as with them (kgym_judge_compare.
        nearly_same: a relative 1e-3 of the output's own scale), the kernels
        are decoys.  Neither "the same bit for bit" (a kernel that redoes a
        row torch already did differs from torch in the last bits on some
        inputs and not on others: a decoy let through on one run, caught
        on the next) nor "still right at the problem's tolerance" (a
        softmax over a long row is a few 1e-5 everywhere, so an unwritten
        output is within atol 1e-2 of it: an honest kernel flagged).  The
        skipping is done in the candidate's process, so this can only
        catch (a candidate that forges it escapes the check, never an
        honest one falls to it)."""
        inputs = self.make_inputs(self.fresh_seed("decoy"))
        try:
            _, skipped = self.call(self.cand, inputs, mode="skip_launches", what="the call with launches skipped")
        except Verdict as v:
            if v.code in ("RUNTIME_ERROR", "CORRECTNESS_ERROR", "REWARD_HACK"):
                return True          # it could not do without them
            raise
        ms, c, changed = self.judged_call(inputs, "the decoy check's normal call")
        if not c["ok"]:
            raise Verdict("REWARD_HACK", "the decoy check's call: %s, although the correctness trials passed"
                          % c["message"], {"kind": "timed_output_mismatch", "detail": c["message"]})
        _, normal = self.call(self.cand, inputs, what="the decoy check's second call")
        return not all(nearly_same(a, b) for a, b in zip(skipped, normal))

    def profile_calls(self):
        """The candidate's CUPTI tally of PROFILE_CALLS calls (verified
        like any other): advisory, it is the candidate process's word."""
        tables = []
        for i in range(PROFILE_CALLS):
            inputs = self.make_inputs(self.fresh_seed("profile"))
            _, got = self.call(self.cand, inputs, mode="profile", what="profiled call %d" % (i + 1))
            msg = self.cand.recv("profiled call %d" % (i + 1), self.deadline)
            if msg.get("type") != "profile":
                self.executor_failed(self.cand, msg, "profiling")
            _, want = self.call(self.ref, inputs, what="profiled call %d (the reference's run)" % (i + 1))
            c = compare_outputs(want, got, self.job)
            if not c["ok"]:
                raise Verdict("REWARD_HACK", "profiled call %d: %s" % (i + 1, c["message"]),
                              {"kind": "timed_output_mismatch", "detail": c["message"]})
            tables.append(msg.get("table"))
        if not all(isinstance(t, dict) for t in tables):
            return None
        merged = {}
        other_calls = other_ns = dropped = 0
        for t in tables:
            for kern in t.get("kernels") or []:
                m = merged.setdefault(kern["name"], dict(kern, calls=0, total_ns=0))
                m["calls"] += int(kern["calls"])
                m["total_ns"] += int(kern["total_ns"])
            other_calls += int(t.get("other_calls") or 0)
            other_ns += int(t.get("other_ns") or 0)
            dropped += int(t.get("dropped") or 0)
        return {"status": "ok", "calls": PROFILE_CALLS, "kernels": list(merged.values()), "other_calls": other_calls,
                "other_ns": other_ns, "dropped": dropped, "source": "candidate_process"}

    def executor_events(self, peer, n):
        """The median of an executor's own CUDA events around its last n
        calls (forward and copies, without the handshake): advisory, for
        comparison with the judge's clock only -- never a verdict or a
        speedup."""
        send_msg(peer.sock, {"type": "events"})
        msg = peer.recv("reading its events", self.deadline)
        v = [x for x in (msg.get("ms") or [])[-n:] if isinstance(x, (int, float))]
        if isinstance(msg.get("arena"), dict):
            # Advisory too: how many outputs lay in the arena, how many the
            # executor copied, how many allocations did not fit.
            self.meta["%s_arena" % peer.role] = {k: v for k, v in msg["arena"].items()
                                                 if k in ("in_arena", "copied", "spilled")
                                                 and isinstance(v, int)}
        return median(v)

    def run(self):
        self.start()
        self.set_up_buffers()
        self.wait_ready(self.cand)
        self.compiled = True
        self.give_buffers(self.cand, self.cand_out_desc, self.cand_out_fd, "setting up")
        send_msg(self.sup, {"type": "compiled", "landlock_abi": self.cand.ready.get("landlock_abi"),
                            "setup_ms": self.cand.ready.get("setup_ms"),
                            "reference_setup_ms": self.ref.ready.get("setup_ms"),
                            "profile_status": self.cand.ready.get("profile_status")})
        self.phase("correctness")
        self.correctness()
        if self.gpu and self.job.get("backend") == "triton":
            self.matter = self.decoy_check()
        result = {"trials": self.trials, "passed": self.passed, "judged": self.judged}
        if self.job.get("run_performance", True) is False:
            return result
        self.phase("timing", "exclusive")
        raw = self.timing()
        if self.job.get("profile") and self.cand.ready.get("profile_status") is None:
            self.profile = self.profile_calls()
        if self.gpu:
            self.meta["candidate_events_ms_p50"] = self.executor_events(self.cand, len(raw))
        # Nothing of the candidate's may run while the reference is timed,
        # nor after the GPU lock is let go.
        send_msg(self.sup, {"type": "kill_candidate"})
        msg = recv_msg(self.sup)
        if msg is None or msg.get("type") != "killed":
            os._exit(0)
        kstats, ref_stats, cached = self.timing_result(raw)
        if self.gpu:
            self.meta["reference_events_ms_p50"] = self.executor_events(self.ref, len(raw))
        result.update(kernel=kstats, reference=ref_stats, reference_cached=cached)
        return result


def all_nonnegative(inputs):
    """True when every floating input holds no negative value (and there is
    one): then identity-like hacks would pass, and a signed trial is due."""
    seen = False
    for x in inputs:
        if isinstance(x, torch.Tensor) and x.is_floating_point() and x.numel() > 0:
            seen = True
            if bool((x < 0).any()):
                return False
    return seen


def profile_table(prof, n=45):
    """cProfile's busiest functions, by time in them and below, as text."""
    import io
    import pstats
    buf = io.StringIO()
    pstats.Stats(prof, stream=buf).sort_stats("cumulative").print_stats(n)
    return buf.getvalue()[-12000:]


def judge_job(j):
    """Run one job on Judge j; send the supervisor its one "verdict"."""
    out = {"type": "verdict"}
    prof = None
    if os.environ.get("KGYM_JUDGE_PROFILE"):
        # A developer's look at where a job's time goes (bench/judge_profile.py):
        # the judge under cProfile, its busiest functions in the metadata.
        import cProfile
        prof = cProfile.Profile()
        prof.enable()
    try:
        out.update(j.run(), ok=True)
    except Verdict as v:
        out.update(ok=False, code=v.code, message=clip(v.message), hack=v.hack, completed=v.completed,
                   trials=j.trials, passed=getattr(j, "passed", 0), judged=getattr(j, "judged", 0))
    except ExecutorGone as g:
        out.update(ok=False, gone=g.role, during=g.during, trials=j.trials,
                   tainted=bool(getattr(j.cand, "tainted", False)))
    except Exception as e:  # noqa: BLE001
        if out_of_memory(e):
            # The problem's size, not the candidate's doing, and not kgymd
            # failing: said without torch's text, which lists the host's
            # processes and their memory.
            gpu = getattr(j, "gpu", False)
            out_bytes = sum(math.prod(shape) * torch.empty((), dtype=dt).element_size()
                            for dt, shape in (getattr(j, "out_specs", None) or []))
            out.update(ok=False, code="RESOURCE_ERROR", completed=False,
                       message="the judge ran out of %s memory for this problem's buffers (outputs of %.1f MiB "
                               "a call): %s" % ("device" if gpu else "host", out_bytes / (1 << 20),
                                                "a GPU with more free memory, or fewer jobs on it, is needed"
                                                if gpu else "[plugin.python] memory is too small for it"))
        else:
            out.update(ok=False, code="SYSTEM_ERROR", message=internal_error("the judge"),
                       completed=False)
    try:
        out["compiled"] = j.compiled
        out["checked_calls"] = j.checked_calls
        out["calls"] = j.calls
        out["profile"] = j.profile
        out["triton_kernels_matter"] = j.matter
        j.meta["judge_prep_ms_p50"] = {r: median(v) for r, v in j.prep_ms.items() if v}
        if prof is not None:
            prof.disable()
            j.meta["judge_profile"] = profile_table(prof)
        out["meta"] = j.meta
    except Exception:  # noqa: BLE001 - a verdict, never a silent death
        out = {"type": "verdict", "ok": False, "code": "SYSTEM_ERROR", "completed": False,
               "message": internal_error("the judge, reporting")}
    send_msg(j.sup, out)
    return out


def judge_main(sup, ref, cand, lib, memfds):
    """The body of a job's own judge process: one job, then exit."""
    judge_job(Judge(sup, ref, cand, lib, memfds=memfds))
    os._exit(0)


class FdWriter:
    def __init__(self, fd):
        self.fd = fd

    def sendall(self, data):
        view = memoryview(data)
        while view:
            view = view[os.write(self.fd, view):]


def judge_server(ctl, ref, lib):
    """A judge kept by the zygote across the jobs of one reference, with its
    reference executor: its sandbox, CUDA context and the reference's module
    serve them all (the models are built again for each job's init seed, the
    seeds and buffers are the job's own).  Each job arrives on `ctl` as
    descriptors -- the supervisor's socket, the candidate's socket and
    control block, and a CPU job's memfds -- and ends with the supervisor's
    "done": the job's buffers are released here and in the reference
    executor, and only then is "idle" said.  Anything else ends the
    server; the zygote starts another."""
    import socket as _socket
    from kgym_common import unix_socket
    state = {"keep": {ctl.fileno()}}
    while True:
        try:
            _, fds, _, _ = _socket.recv_fds(ctl, 16, 8)
        except OSError:
            os._exit(0)
        if len(fds) < 3:
            os._exit(0)               # the zygote is gone
        try:
            sup = unix_socket(fds[0])
            cand = Peer("candidate", unix_socket(fds[1]), fds[2])
            memfds = dict(zip(("inputs", "reference-outputs", "candidate-outputs"), fds[3:6]))
            j = Judge(sup, ref, cand, lib, state, memfds)
        except Exception:  # noqa: BLE001 - say why where it is read, then go
            os.write(fds[0], b"")
            send_msg(FdWriter(fds[0]), {"type": "verdict", "ok": False, "code": "SYSTEM_ERROR", "completed": False,
                                         "message": internal_error("the judge server")})
            os._exit(0)
        out = judge_job(j)
        if out.get("gone") or out.get("code") == "SYSTEM_ERROR" or "abi" not in state:
            os._exit(0)
        msg = recv_msg(sup)
        if msg is None or msg.get("type") != "done":
            os._exit(0)
        try:
            j.release()
        except Exception:  # noqa: BLE001 - not clean: not to be kept
            os._exit(0)
        send_msg(sup, {"type": "idle"})
        sup.close()
        cand.sock.close()
        for fd in fds[2:]:
            os.close(fd)
