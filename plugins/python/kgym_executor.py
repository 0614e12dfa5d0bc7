"""kgym_executor.py -- an executor: the process that runs one model's forward.

Two per job, the reference's and the candidate's, both sandboxed and both
dumb.  An executor builds its model, maps the buffers the judge gives it,
and then, for every call, does only this:

    "arm k"  ->  "armed"  ->  spin until GO == k  ->  forward(inputs),
    say where each output lies (on a GPU: in the judge's arena, which the
    forward allocates from; else a copy into the judge's output buffer),
    synchronise the device  ->  STATUS, DONE = k

The judge's clock runs from its GO to the moment it has taken what is in
its buffers, so a lazy output (a view, a tensor subclass, a list-like
object) is materialised on the clock, work left on other streams or
threads is on it or missing from the outputs, and whatever an executor
reports about itself (its timings, its CUPTI profile) is advisory.

This module holds nothing a candidate could use: no seed (the judge makes
every input on its side), no expected output, no comparison, no clock.  It
imports kgym_common only, and for a "cuda" candidate kgym_inline (the
load_inline wrapper, which knows nothing of the judge); kgym_judge.py is
never imported here, nor in the zygote every executor is forked from.
"""

import ctypes
import gc
import os
import socket
import sys
import time
import traceback

from kgym_common import (SETUP_MS, CTL_DONE, CTL_GO, CTL_OUTS, CTL_STATUS, OUT_IN_SLOT, ControlBlock, CudaDriver,
                         child_setup, clip, dtype_name, flatten_outputs, format_exc, inputs_size, internal_error,
                         load_module, map_area, out_of_memory, recv_msg, send_msg)

ARENA_LIB = "libkgym_arena.so"      # beside the sandbox library (plugins/python/arena.c)


class OutputArena:
    """On a GPU, the memory a forward allocates from: the judge's arena
    (device memory of the judge's, mapped here), through arena.c as torch's
    CUDAPluggableAllocator in a MemPool.  The outputs a forward returns
    then already lie where the judge reads them; the executor only says
    where (offset()), and the judge copies them out on its clock.  So no
    executor copy stands between the forward and DONE -- a copy that code
    in this process could skip while the judge subtracted its cost."""

    def __init__(self, torch, path, base, size):
        self.lib = ctypes.CDLL(path)
        self.lib.kgym_arena_set.argtypes = [ctypes.c_uint64, ctypes.c_uint64]
        self.lib.kgym_arena_spilled.restype = ctypes.c_uint64
        if self.lib.kgym_arena_set(base, size) != 0:
            raise RuntimeError("an arena of %d bytes is too small" % size)
        alloc = torch.cuda.memory.CUDAPluggableAllocator(path, "kgym_arena_alloc", "kgym_arena_free")
        self.pool = torch.cuda.MemPool(alloc.allocator())
        self.use = lambda: torch.cuda.use_mem_pool(self.pool)
        self.base, self.size = base, size

    def offset(self, t):
        """Where tensor t lies in the arena (bytes), or None: not contiguous,
        empty, or allocated elsewhere (before the pool, or spilled)."""
        n = t.numel() * t.element_size()
        p = t.data_ptr()
        if n == 0 or not t.is_contiguous() or not (self.base <= p and p + n <= self.base + self.size):
            return None
        if t.is_conj() or t.is_neg():
            return None         # a lazy conjugate or negation: its bytes are not its values
        return p - self.base


class KernelProbe:
    """libkgym_kprobe.so (plugins/python/kprobe.c) in this process: CUPTI's
    kernel activity records of the calls made between start() and stop().
    Loaded before the sandbox; libcupti by soname, so torch's copy if it
    has one mapped.  What it reports is the candidate's process's word:
    advisory (a one-way detector: it can hide a decoy, never make an
    honest kernel fail)."""

    def __init__(self, path, cupti_path):
        self.lib = ctypes.CDLL(path)
        self.lib.kgym_kprobe_open.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t]
        self.lib.kgym_kprobe_start.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
        self.lib.kgym_kprobe_stop.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t]
        self.lib.kgym_kprobe_stop.restype = ctypes.c_long
        self.err = ctypes.create_string_buffer(512)
        self.check(self.lib.kgym_kprobe_open((cupti_path or "").encode() or None, self.err, len(self.err)))

    def check(self, r):
        if r < 0:
            raise OSError(-r, self.err.value.decode("utf-8", "replace"))
        return r

    def start(self):
        self.check(self.lib.kgym_kprobe_start(self.err, len(self.err)))

    def stop(self):
        buf = ctypes.create_string_buffer(1 << 20)
        n = self.check(self.lib.kgym_kprobe_stop(buf, len(buf), self.err, len(self.err)))
        kernels, more_calls, more_ns, dropped = [], 0, 0, 0
        for line in buf.raw[:n].decode("utf-8", "replace").splitlines():
            f = line.split("\t")
            if f[0] == "#more":
                more_calls, more_ns = int(f[1]), int(f[2])
            elif f[0] == "#dropped":
                dropped = int(f[1])
            elif len(f) == 7:
                kernels.append({"name": f[0][:1000], "calls": int(f[1]), "total_ns": int(f[2]),
                                "grid": [int(x) for x in f[3].split(",")],
                                "block": [int(x) for x in f[4].split(",")],
                                "registers": int(f[5]), "shared_bytes": int(f[6])})
        return {"kernels": kernels, "other_calls": more_calls, "other_ns": more_ns, "dropped": dropped}


class CallError(Exception):
    """A call that returned what the judge's buffers cannot take."""


class Executor:
    def __init__(self, role, sock, ctl_fd, lib):
        self.role, self.sock, self.ctl_fd = role, sock, ctl_fd
        self.lib = lib
        self.model = None
        self.inputs = None         # the judge's input buffers, as tensors
        self.outputs = None        # the judge's output buffers for this executor
        self.keep = []             # mappings to keep alive
        self.cuda = None
        self.probe = None
        self.device = "cpu"
        self.scratch = None
        self.slots = 1             # calls of a round the output area holds
        self.event_ms = []         # advisory: this executor's events around each call
        self.arena = None          # OutputArena of this job (GPU), or None
        self.arena_path = None     # libkgym_arena.so, loaded before the sandbox
        self.held = []             # outputs in the arena, kept until the judge has copied them
        self.pools = []            # every MemPool made here, kept for the process's life
        self.pool_ctx = None       # the arena's pool, active for the whole job
        self.out_counts = {"in_arena": 0, "copied": 0}

    def send(self, obj):
        send_msg(self.sock, obj)

    def fail(self, kind, message, code=None):
        self.send({"type": kind, "code": code, "message": clip(message)})
        os._exit(0)

    # -- set-up
    def start(self):
        """The first job: CUPTI (before the sandbox), the sandbox, CUDA; then
        the job's models.  A reference executor kept by a judge server
        gets its later jobs in serve()."""
        msg = recv_msg(self.sock)
        if msg is None or msg.get("type") != "job":
            os._exit(0)
        job, limits, self.job_dir = msg["job"], msg["limits"], msg["job_dir"]
        self.t_start = time.monotonic()
        self.probe_status = None
        if job["device"] != "cpu" and self.lib:
            # Before the sandbox, like the probe: torch's dlopen() of it
            # later finds it loaded and opens no file.
            path = os.path.join(os.path.dirname(self.lib), ARENA_LIB)
            try:
                ctypes.CDLL(path)
                self.arena_path = path
            except OSError:
                pass
        if job.get("profile"):
            # Before the sandbox: libcupti is loaded from wherever it lies.
            try:
                self.probe = KernelProbe(limits["kprobe_lib"], limits.get("cupti_library"))
            except (OSError, KeyError, AttributeError) as e:
                self.probe_status = "unavailable: %s" % e
        try:
            self.abi = child_setup(self.role, job, limits, {self.sock.fileno(), self.ctl_fd}, self.job_dir,
                                   self.lib, job.get("compiler_profile"))
        except Exception as e:  # noqa: BLE001 - fail closed
            self.fail("error", "the %s process could not enter the sandbox: %s" % (self.role, e), "SYSTEM_ERROR")
        import torch
        self.torch = torch
        self.ctl = ControlBlock(self.ctl_fd)
        # Mapped: no descriptor of the control page stays for the
        # candidate's code to open again (kgym_common.map_shared).
        os.close(self.ctl_fd)
        self.ctl_fd = None
        self.device = "cuda" if job["device"] != "cpu" else "cpu"
        if self.device == "cuda":
            self.cuda = CudaDriver()
        if self.probe is not None:
            # CUPTI's first collection sets itself up (a fraction of a second):
            # here, while the GPU is shared, not in the timing's hold.
            t0 = time.monotonic()
            try:
                self.probe.start()
                self.probe.stop()
            except OSError as e:
                self.probe, self.probe_status = None, "failed: %s" % e
            SETUP_MS["probe_warm"] = (time.monotonic() - t0) * 1e3
        self.load(job)

    def load(self, job):
        """Load the job's code, build its model and say "ready"."""
        torch = self.torch
        t_load = time.monotonic()
        candidate = self.role == "candidate"
        try:
            # Run again for every job (a kept reference executor too): its
            # module-level state is the job's own.
            ref = load_module(job["reference_code"], "reference_code")
        except Exception:  # noqa: BLE001
            self.fail("error", format_exc("the reference could not be loaded:"), "VALIDATION_ERROR")
        name = job["entry_point"] + ("New" if candidate else "")
        if candidate:
            # The judge trusts this process's word until here (a failure
            # to enter the sandbox is kgymd's); past it, the candidate's.
            self.send({"type": "loading"})
        profile = job.get("compiler_profile") if candidate else None
        if profile is not None and profile.get("backend") == "cuda":
            # load_inline with the precompiled prologue where the candidate's
            # flags allow, and build errors at kernel_code's lines.
            import kgym_inline
            kgym_inline.KERNEL_CODE["text"] = job["kernel_code"]
            try:
                kgym_inline.install(profile.get("pch"))
            except Exception:  # noqa: BLE001 - without it, load_inline as it is
                sys.stderr.write("kgym_inline: not installed:\n%s" % traceback.format_exc())
        try:
            mod = load_module(job["kernel_code"], "kernel_code") if candidate else ref
            cls = mod.get(name)
            if not callable(cls):
                raise NameError("%s defines no %s" % ("kernel_code" if candidate else "reference_code", name))
            if not callable(ref.get("get_init_inputs")):
                raise NameError("reference_code defines no get_init_inputs")
            torch.manual_seed(job["init_seed"])
            init = list(ref["get_init_inputs"]())
            torch.manual_seed(job["init_seed"])
            model = cls(*init)
            if isinstance(model, torch.nn.Module):
                model = model.to(self.device).eval()
            if not candidate and job.get("reference_backend") == "compile":
                model = torch.compile(model)
        except PermissionError as e:
            self.fail("violation", "the sandbox refused: %s" % e)
        except Exception:  # noqa: BLE001
            if candidate:
                self.fail("compile_error", format_exc("kernel_code could not be loaded or %s built:" % name))
            self.fail("error", format_exc("the reference could not be built:"), "VALIDATION_ERROR")
        self.model = model
        SETUP_MS["load"] = (time.monotonic() - t_load) * 1e3
        if profile is not None and profile.get("backend") == "cuda":
            import kgym_inline
            st = kgym_inline.STATS
            SETUP_MS["inline_build"] = st["build_s"] * 1e3
            SETUP_MS["inline_pch"] = st["pch"]
        SETUP_MS["total"] = (time.monotonic() - self.t_start) * 1e3
        self.send({"type": "ready", "landlock_abi": self.abi, "setup_ms": SETUP_MS,
                   "profile_status": self.probe_status,
                   "device_name": ("cuda: " + torch.cuda.get_device_name(0)) if self.device == "cuda" else None})

    # -- the calls
    def serve(self):
        torch = self.torch
        with torch.no_grad():
            while True:
                msg = recv_msg(self.sock)
                if msg is None or msg.get("type") == "exit":
                    os._exit(0)
                t = msg.get("type")
                if t == "buffers":
                    self.map_buffers(msg)
                elif t == "describe":
                    self.describe(msg)
                elif t == "arm":
                    self.call(msg)
                elif t == "release":
                    self.release()
                elif t == "events":
                    ms, self.event_ms = self.event_ms, []
                    self.send({"type": "events", "ms": ms[-4096:], "arena": dict(
                        self.out_counts, spilled=int(self.arena.lib.kgym_arena_spilled()) if self.arena else 0)})
                elif t == "job" and self.role == "reference":
                    SETUP_MS.clear()
                    self.t_start = time.monotonic()
                    self.load(msg["job"])

    def release(self):
        """(A kept reference executor, between jobs) let go of the job's
        model and buffers, then say so: nothing of the job is left."""
        self.model = self.inputs = self.outputs = self.scratch = self.tiny = self.scratch_at = None
        self.keep, self.held = [], []
        self.leave_arena()
        if self.device == "cuda":
            self.torch.cuda.synchronize()
            self.cuda.release_all()
            self.torch.cuda.empty_cache()
        self.send({"type": "released"})

    def map_buffers(self, msg):
        fds = []
        if msg.get("fds"):
            _, fds, _, _ = socket.recv_fds(self.sock, 1, int(msg["fds"]))
        arena_fd = None
        try:
            it = iter(fds)
            self.inputs, k1 = map_area(msg["inputs"], next(it, None), self.cuda)
            self.outputs, k2 = (map_area(msg["outputs"], next(it, None), self.cuda)
                                if msg.get("outputs") else (None, None))
            self.keep += [k1, k2]
            arena_fd = next(it, None) if msg.get("arena") else None
            # The areas hold a round's calls, one call's tensors after the
            # other's (kgym_judge_timing.py).
            self.slots = max(1, int(msg.get("slots") or 1))
        except Exception as e:  # noqa: BLE001
            for fd in fds:
                os.close(fd)
            self.fail("error", "the %s process could not map the judge's buffers: %s" % (self.role, e),
                      "SYSTEM_ERROR")
        status = None
        # Every tensor of the last arena goes before it does: a block of a
        # pool whose memory is gone, freed after a new arena took the same
        # addresses, would free a live block of the new one.
        self.held, self.scratch, self.tiny, self.scratch_at = [], None, None, None
        self.leave_arena()
        self.out_counts = {"in_arena": 0, "copied": 0}
        if arena_fd is not None:
            # Without it (no library, a torch without MemPool) the outputs
            # are copied into the output area as before; the judge then
            # gives the candidate no arena either, so both sides are timed
            # alike.
            try:
                if self.arena_path is None:
                    raise RuntimeError("%s is not installed beside the sandbox library" % ARENA_LIB)
                size = int(msg["arena"]["size"])
                self.arena = OutputArena(self.torch, self.arena_path, self.cuda.open(arena_fd, size), size)
                self.pools.append(self.arena.pool)
                # Active from here to the job's end, not entered per call:
                # entering and leaving torch's pool costs tens of
                # microseconds, on the clock, that an executor skipped by
                # the candidate's own DONE would not pay.
                self.resume_arena()
                self.pause_arena_for_graph_capture()
                status = "on"
            except Exception as e:  # noqa: BLE001 - reported; the job goes on without it
                self.arena, status = None, "off: %s" % str(e)[:200]
        for fd in fds:
            os.close(fd)
        self.send({"type": "mapped", "arena": status})

    def arguments(self, spec):
        """forward's arguments: the judge's input buffers and the call's
        non-tensor values, in get_inputs()'s order."""
        args = []
        for kind, v in spec or []:
            args.append(self.inputs[int(v)] if kind == "t" else v)
        return args

    def describe(self, msg):
        """(The reference only) one forward on the inputs in place: the
        outputs' dtypes and shapes, for the judge's buffers."""
        try:
            outs = flatten_outputs(self.model(*self.arguments(msg.get("args"))))
            if self.device == "cuda":
                self.torch.cuda.synchronize()
        except Exception as e:  # noqa: BLE001
            if out_of_memory(e):
                # The problem's size, not the candidate's fault.
                self.fail("error", format_exc("the reference ran out of memory on its own inputs (%s):"
                                              % inputs_size(self.inputs)), "RESOURCE_ERROR")
            self.fail("error", format_exc("the reference failed on its own inputs:"), "VALIDATION_ERROR")
        self.send({"type": "described", "outputs": [{"dtype": dtype_name(o.dtype), "shape": list(o.shape)}
                                                     for o in outs]})

    def leave_arena(self):
        self.pause_arena()
        self.arena = None

    def pause_arena(self):
        if self.pool_ctx is not None:
            self.pool_ctx.__exit__(None, None, None)
        self.pool_ctx = None

    def resume_arena(self):
        if self.arena is not None and self.pool_ctx is None:
            self.pool_ctx = self.arena.use()
            self.pool_ctx.__enter__()

    def pause_arena_for_graph_capture(self):
        """A CUDA graph's capture takes its memory from a private pool of
        its own, which torch picks only when no other pool of this thread's
        is active: the arena's pool is left for the capture and taken up
        again after, else the graph's blocks, freed into the arena's pool
        after capture, would be handed out again while its replays still
        write there.  (A graph's static outputs then lie outside the arena
        and are copied, at the candidate's cost.)"""
        graph = getattr(self.torch.cuda, "CUDAGraph", None)
        if graph is None or getattr(graph, "_kgym_arena_paused", False):
            return
        begin, end, ex = graph.capture_begin, graph.capture_end, self

        def capture_begin(g, *a, **kw):
            ex.pause_arena()
            return begin(g, *a, **kw)

        def capture_end(g, *a, **kw):
            try:
                return end(g, *a, **kw)
            finally:
                ex.resume_arena()
        graph.capture_begin, graph.capture_end = capture_begin, capture_end
        graph._kgym_arena_paused = True

    def forward_into(self, args, j=0, skip_launches=False):
        if skip_launches:
            from triton.runtime.jit import JITFunction
            run = JITFunction.run
            JITFunction.run = lambda self, *a, **kw: None
            try:
                out = self.model(*args)
            finally:
                JITFunction.run = run
        else:
            # Allocating from the arena, where there is one (its pool is
            # active for the whole job).
            out = self.model(*args)
        try:
            res = flatten_outputs(out)
        except TypeError as e:
            raise CallError(str(e))
        per = len(self.outputs) // self.slots
        outs = self.outputs[j * per:(j + 1) * per]
        if len(res) != len(outs):
            raise CallError("the model returned %d outputs, the reference returns %d" % (len(res), len(outs)))
        words = self.ctl.words
        for i, (r, o) in enumerate(zip(res, outs)):
            if tuple(r.shape) != tuple(o.shape) or r.dtype != o.dtype:
                raise CallError("output %d is %s of shape %s; the reference's is %s of shape %s" % (
                    i, dtype_name(r.dtype), list(r.shape), dtype_name(o.dtype), list(o.shape)))
            at = self.arena.offset(r) if self.arena is not None and r.device.type == "cuda" else None
            if at is None:
                # Not in the arena (made before the call, a view, spilled):
                # copied, on the clock, and nothing subtracts this copy.
                o.copy_(r)
                words[CTL_OUTS + j * per + i] = OUT_IN_SLOT
                self.out_counts["copied"] += 1
            else:
                self.held.append(r)
                words[CTL_OUTS + j * per + i] = at
                self.out_counts["in_arena"] += 1

    def empty_call(self, calls):
        """(The reference only: the judge's calibration) everything a call
        does but the forward -- with an arena, outputs said to lie in it
        (tensors like the outputs, made there once), which the judge then
        copies out as it does a real call's; without one, a copy of such
        tensors into the output buffers -- then the sync: the same work on
        both sides of the clock, so that subtracting its time leaves the
        forward's."""
        per = len(self.outputs) // self.slots
        if self.scratch is None:
            # In the arena where there is one (its pool is active).
            self.scratch = [self.torch.zeros_like(o) for o in self.outputs[:per]]
            self.scratch_at = [self.arena.offset(t) if self.arena is not None else None for t in self.scratch]
            self.tiny = self.torch.zeros(1, device=self.device)
        words = self.ctl.words
        # A kernel of its own: a real forward switches the GPU's compute
        # engine to this context (a quarter of a millisecond on an H100,
        # measured), which the copies alone (copy engine) do not.
        for j in range(calls):
            self.tiny.add_(1)
            for i, (o, s) in enumerate(zip(self.outputs[j * per:(j + 1) * per], self.scratch)):
                if self.scratch_at[i] is not None:
                    words[CTL_OUTS + j * per + i] = self.scratch_at[i]
                else:
                    o.copy_(s)
                    words[CTL_OUTS + j * per + i] = OUT_IN_SLOT

    def call(self, msg):
        k, mode = int(msg["k"]), msg.get("mode", "call")
        # A round: one call's arguments per call (kgym_judge_timing.py).
        calls = [self.arguments(a) for a in (msg.get("calls") or [msg.get("args")])]
        ctl = self.ctl
        # The last round's outputs: the judge has copied them (it arms the
        # next round after).  Let go of here, off the clock, as the
        # calibration's empty calls never hold any.
        self.held = []
        self.send({"type": "armed", "k": k})
        if not ctl.wait(CTL_GO, k, time.monotonic() + 3600):
            os._exit(0)
        error = None
        ev = None
        # No collection while the call runs (Python's collector pausing
        # this process between two launches idles the GPU on the clock);
        # it runs, if due, once DONE is written.
        collecting = gc.isenabled()
        gc.disable()
        if self.device == "cuda" and mode in ("call", "empty"):
            # The executor's own view of the call (advisory: this process is
            # the candidate's): events around the forward and the copies.
            ev = (self.torch.cuda.Event(enable_timing=True), self.torch.cuda.Event(enable_timing=True))
            ev[0].record()
        try:
            if mode == "empty":
                self.empty_call(len(calls))
            elif mode == "profile" and self.probe is not None:
                self.probe.start()
                try:
                    self.forward_into(calls[0])
                    self.torch.cuda.synchronize()
                finally:
                    table = self.probe.stop()
            else:
                for j, args in enumerate(calls):
                    self.forward_into(args, j, skip_launches=(mode == "skip_launches"))
        except CallError as e:
            error = {"kind": "bad_output", "message": str(e)}
        except PermissionError as e:
            error = {"kind": "violation", "message": "the sandbox refused: %s" % e}
        except MemoryError as e:
            error = {"kind": "resource", "message": "out of memory: %s" % e}
        except BaseException as e:  # noqa: BLE001 - GeneratorExit, SystemExit: still the model's exception
            oom = out_of_memory(e)
            error = {"kind": "resource" if oom else "runtime_error",
                     "message": format_exc("%s raised an exception on its inputs:" % (
                         "the reference" if self.role == "reference" else "ModelNew"))}
        if ev is not None and error is None:
            ev[1].record()
        if self.device == "cuda" and error is None:
            # The outputs' copies (and whatever the forward left running on
            # this process's streams) complete before DONE.
            try:
                self.torch.cuda.synchronize()
            except Exception:  # noqa: BLE001 - a kernel that faulted
                error = {"kind": "runtime_error",
                         "message": format_exc("ModelNew's kernels failed on the device:" if self.role == "candidate"
                                               else "the reference's kernels failed on the device:")}
        ctl.words[CTL_STATUS] = 1 if error else 0
        ctl.words[CTL_DONE] = k
        if collecting:
            gc.enable()
        if ev is not None and error is None:
            try:
                self.event_ms.append(ev[0].elapsed_time(ev[1]) / len(calls))
            except RuntimeError:
                # Not complete: the candidate patched the synchronisation
                # away.  The events are advisory; the judge's copy decides.
                pass
        if error:
            self.send(dict(error, type="call_error", k=k, message=clip(error["message"])))
        elif mode == "profile":
            self.send({"type": "profile", "k": k,
                       "table": table if self.probe is not None else None})


def executor_main(role, sock, ctl_fd, lib):
    """The body of an executor process (forked by the job's supervisor
    before the job is read, so nothing of it -- its seeds above all -- is
    in this process's memory but what the job message carries)."""
    ex = Executor(role, sock, ctl_fd, lib)
    try:
        ex.start()
        ex.serve()
    except SystemExit:
        raise
    except BaseException:  # noqa: BLE001
        try:
            ex.send({"type": "error", "code": "SYSTEM_ERROR",
                     "message": internal_error("the %s process" % role)})
        except OSError:
            pass
    os._exit(0)
