"""kgym_harness.py -- the KernelBench-format harness of kgymd's python backend.

Installed as $(libexecdir)/kgym/kgym_harness.py and run by the python backend
plugin (plugins/python/python.c) inside a kgymd-worker, *before* the worker
enters its sandbox.  Standard library and torch only.

Processes (DESIGN §2, §7, §8):

    kgymd-worker (sandboxed, C) --socketpair--> zygote (this file, --zygote)
                                                  |  fork per job
                                              supervisor (reads the job, drives it)
                                   +--------------+---------------+
                                   |                              |
                       reference child (trusted)        candidate child
                       builds Model, computes the       applies the sandbox FIRST,
                       expected outputs and keeps       builds ModelNew, runs it on
                       them; compares what the          the same inputs, writes its
                       candidate wrote; times the       outputs into a sealed memfd
                       reference                        and times itself

The zygote imports torch (and triton where a GPU is visible) once and never
initialises CUDA, so a job costs a fork instead of a Python + torch start.
It also does, once, the task-independent work Triton would repeat in every
candidate (prewarm_triton: its cache key's hash of its own installation, the
gluon import; build_triton_seed: gcc's build of its cuda_utils module, which
each Triton candidate's private cache starts with).  For a candidate that
compiles, the reference starts CUDA only once the candidate has: context
creation is serialised in the driver, and the reference's fits in the JIT.

The reference child is, where it can be, the zygote's reference server
(reference_server): a process forked from the zygote's clean image and kept
across the jobs of one reference, lent to one job at a time over a socket
of that job's own (Job.lend_server), given back only when it says it is
idle before the answer (Job.release_server), killed and replaced when not,
when a job of another reference comes, or when anything about it is in
doubt; a server that fails a job before its verdict is replaced within the
job.
It does no tensor work itself either: OpenMP's thread pool does not survive
fork(), so the zygote must never have started it.  Nor does it read a job:
a per-job supervisor, forked first, reads the job from the socket, so no
task's code or data ever enters the zygote's memory, and no later task's
processes (forked from it) can find an earlier task there.

The expected outputs live only in the reference child.  The candidate child
hands its outputs over through shared memory (a memfd the zygote creates and
seals at a fixed size before forking, so neither child can shrink it under
the other) and describes them with a small index that travels through the
zygote; the reference validates every field of that index before it touches
the memory.  Both children draw the inputs of each trial from the same seed,
so the inputs never travel.  Both children enter the sandbox (rlimits,
Landlock, seccomp, through libkgym_sandbox.so, built from kgymd/worker/
sandbox.c) before running any code of the task; where the sandbox cannot be
entered the job fails (fail closed).

Two sandbox profiles, chosen by the harness, never by the task:
  - the Python profile (the reference, always; torch candidates): no new
    process, no exec, no socket -- fork or execve is death by SIGSYS;
  - the compiler profile (the candidate of a "triton" or "cuda" job only,
    whose Triton JIT or load_inline must run compilers in its sandbox): it
    may fork and exec, but Landlock lets it execute only the programs
    compiler_profile() lists -- the exact files those builds run (gcc's
    driver, cc1, cc1plus, as, collect2, ld; for "cuda" also ninja, /bin/sh,
    nvcc, cicc, ptxas, cudafe++, fatbinary, nvlink; for "triton" ptxas) --
    and nothing writable; the compilers inherit the candidate's filter
    (still no socket, ptrace, mount, ...), Landlock domain (still no task
    store) and rlimits; a kernel without Landlock refuses the profile, and
    the job fails.  The job's supervisor is a subreaper and kills whatever
    the candidate's processes left behind when the job ends.

Before anything runs, the zygote checks the candidate's source with Python's
ast (forbidden imports, timer access, tensor subclasses, patching of imported
modules); a violation is a VALIDATION_ERROR naming the line.

Trust: timings measured inside the candidate process are only as good as the
harness code that runs in that process, which the candidate could in
principle patch; the static checks close the roads to it they know (frames,
module re-exports such as torch.sys, computed attribute names).  On a GPU
the candidate's calls are also profiled with CUPTI (KernelProbe, through
libkgym_kprobe.so, loaded before the sandbox), and the supervisor judges the
tally: decoys, PyTorch fallbacks, kernel time beyond the timed median.  The
candidate's messages carry a per-job nonce, so frames its code writes into
the socket are caught.  In CPU mode the timings are informative only.

Modes:
    --zygote --fd N     serve jobs over fd N (length-prefixed JSON frames)
    --once              read one job frame's JSON from stdin, print the result
                        (a fresh process per task: the benchmark's baseline)
    --check FILE        static checks of FILE as kernel_code, JSON to stdout

Framing everywhere: a 4-byte big-endian length, then that many bytes of
UTF-8 JSON.
"""

import argparse
import ast
import ctypes
import faulthandler
import fcntl
import gc
import hashlib
import io
import json
import linecache
import math
import mmap
import os
import platform
import random
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import time
import traceback
import types
import warnings

# kgym_static.py lies beside this file; -I keeps the script's directory off
# sys.path, so name it (it is the installed libexec directory, root's).
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kgym_static import custom_kernel_names, static_check  # noqa: E402

PROTOCOL = 1
MAX_FRAME = 64 << 20
MAX_MESSAGE_CHARS = 16000      # error messages a model reads: keep them readable
MIN_CORRECT_TRIALS = 5         # DESIGN §8
MIN_TIMING_TRIALS = 10
ALIGN = 64
PR_SET_CHILD_SUBREAPER = 36
MFD_NOEXEC_SEAL = 0x8          # Linux >= 6.3; older kernels refuse it (EINVAL)

# Per-dtype default tolerances (DESIGN §8): (atol, rtol).
TOLERANCES = {
    "float64": (1e-8, 1e-8), "complex128": (1e-8, 1e-8),
    "float32": (1e-4, 1e-4), "complex64": (1e-4, 1e-4),
    "float16": (1e-2, 1e-2), "bfloat16": (1e-2, 1e-2),
}

torch = None                   # imported by the zygote (preload)
triton = None

# ------------------------------------------------------------------ framing


def send_msg(sock, obj):
    data = json.dumps(obj, allow_nan=False, default=str).encode()
    sock.sendall(struct.pack(">I", len(data)) + data)


def _recv_exact(sock, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


def recv_msg(sock, limit=MAX_FRAME):
    """The next frame as a dict; None at EOF.  A malformed frame raises."""
    head = _recv_exact(sock, 4)
    if head is None:
        return None
    (n,) = struct.unpack(">I", head)
    if n > limit:
        raise ValueError("frame of %d bytes exceeds the limit of %d" % (n, limit))
    body = _recv_exact(sock, n)
    if body is None:
        return None
    obj = json.loads(body.decode())
    if not isinstance(obj, dict):
        raise ValueError("frame is not a JSON object")
    return obj


class FdStream:
    """A received socket descriptor, spoken to with read and write: Python's
    socket(fileno=) checks the descriptor with getsockname, which the
    sandbox does not allow."""

    def __init__(self, fd):
        self.fd = fd

    def fileno(self):
        return self.fd

    def sendall(self, data):
        view = memoryview(data)
        while view:
            view = view[os.write(self.fd, view):]

    def recv(self, n):
        return os.read(self.fd, n)

    def close(self):
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def clip(text, limit=MAX_MESSAGE_CHARS):
    text = str(text)
    if len(text) <= limit:
        return text
    return text[: limit // 2] + "\n[... %d characters cut ...]\n" % (len(text) - limit) + text[-limit // 2:]


def finite(x):
    """JSON has no NaN or Inf: those become null."""
    return x if isinstance(x, (int, float)) and math.isfinite(x) else None

# ------------------------------------------------------------------ seeds


def derive_seed(base, tag, index=0):
    """A 63-bit seed from the job's secret base seed: both children derive
    the same inputs from it, and nothing else can guess it."""
    h = hashlib.sha256(("%s:%s:%d" % (base, tag, index)).encode()).digest()
    return int.from_bytes(h[:8], "little") & ((1 << 63) - 1)

# ------------------------------------------------------------------ sandbox


class SandboxError(Exception):
    pass


SANDBOX_EXEC = 0x1             # KGYM_PY_SANDBOX_EXEC of sandbox_python.c: the compiler profile


def enter_sandbox(lib_path, work_dir, gpu, limits, ro_paths, exec_paths=None):
    """rlimits, Landlock and seccomp for this process, through
    libkgym_sandbox.so (kgymd/worker/sandbox.c).  With exec_paths (the
    candidate of a triton or cuda job only), the compiler profile: those
    programs, and nothing else, may be executed, under the same filter and
    Landlock domain.  Returns the Landlock ABI in force (0: none); raises
    SandboxError when it cannot (fail closed)."""
    if not lib_path or not os.path.exists(lib_path):
        raise SandboxError("the sandbox library %s does not exist" % lib_path)
    try:
        lib = ctypes.CDLL(lib_path)
        fn = lib.kgym_sandbox_enter_python
    except (OSError, AttributeError) as e:
        raise SandboxError("cannot load the sandbox library %s: %s" % (lib_path, e))
    fn.restype = ctypes.c_int
    fn.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.POINTER(ctypes.c_char_p), ctypes.c_int64,
                   ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint,
                   ctypes.POINTER(ctypes.c_int), ctypes.c_char_p, ctypes.c_size_t,
                   ctypes.POINTER(ctypes.c_char_p)]

    def strings(items):
        enc = [x.encode() for x in items] + [None]
        return (ctypes.c_char_p * len(enc))(*enc)
    arr = strings(ro_paths)
    exe = strings(exec_paths) if exec_paths else None
    abi = ctypes.c_int(-1)
    err = ctypes.create_string_buffer(1024)
    rc = fn(work_dir.encode(), 1 if gpu else 0, arr, int(limits.get("memory_bytes", 16 << 30)),
            int(limits.get("max_files", 256)), int(limits.get("max_processes", 1024)),
            int(limits.get("max_file_bytes", 64 << 20)), int(limits.get("cpu_seconds", 0)),
            SANDBOX_EXEC if exec_paths else 0, ctypes.byref(abi), err, len(err), exe)
    if rc != 0:
        raise SandboxError(err.value.decode(errors="replace") or "sandbox: error %d" % rc)
    return abi.value


def interpreter_paths(exclude):
    """Directories this interpreter reads modules from, for Landlock's
    read-only list (an interpreter outside /usr, e.g. a virtualenv)."""
    out = []
    for p in [sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(os.path.realpath(sys.executable))] + \
            list(sys.path):
        if not p or not os.path.isabs(p):
            continue
        p = os.path.realpath(p)
        if not os.path.exists(p) or p == "/" or p.startswith(exclude) or p in out:
            continue
        out.append(p)
    return out

# ------------------------------------------------------------------ the compiler profile
#
# A candidate of backend "triton" or "cuda" compiles inside its sandbox, so
# that process -- never the reference, never a torch candidate -- runs under
# the compiler profile (sandbox.h, allow_exec_compilers): it may fork and
# exec, but Landlock lets it execute only the programs listed here, the
# exact files Triton's and load_inline's builds run, found on this machine
# by the trusted zygote, and the dynamic loader.  Nothing it can write is
# executable.  Every program it starts inherits the same seccomp filter (no
# socket, no ptrace, ...), Landlock domain (no task store) and rlimits.
#
#   both backends -- the host toolchain (gcc's driver and what it runs):
#     gcc, cc            Triton's launcher stub (runtime/build.py: $CC, else
#                        gcc); nvcc's host preprocessing and compilation
#     g++, c++           load_inline's compile and link lines (c++, or $CXX)
#     cc1, cc1plus       gcc's C and C++ compilers proper
#     as                 the assembler, for every object file
#     collect2, ld       the link of every shared object (collect2 runs ld)
#     lto-wrapper        collect2 runs it when an object carries LTO code
#   "cuda" (torch.utils.cpp_extension.load_inline):
#     ninja              load_inline writes build.ninja and runs `ninja -v`
#     /bin/sh            ninja runs every build line through `/bin/sh -c`,
#                        and nvcc runs each of its stages through it too
#     nvcc               the CUDA compiler driver (build.ninja's .cu lines)
#     cicc, ptxas        nvcc's device stages: CUDA C++ to PTX, PTX to SASS
#     cudafe++           nvcc's split of host and device code
#     fatbinary          nvcc's packer of PTX and SASS into the object
#     nvlink             nvcc's device link (relocatable device code only)
#   "triton":
#     ptxas              Triton's own (triton/backends/nvidia/bin in Triton 3,
#                        triton/third_party/cuda/bin in Triton 2) and the
#                        toolkit's, whichever it picks
#
# Not listed, on purpose: python3 (not a compiler); which (a shell script
# torch.utils.cpp_extension runs to vet the compiler --
# TORCH_DONT_CHECK_COMPILER_ABI=1 skips that check); /sbin/ldconfig (Triton's
# search for libcuda -- TRITON_LIBCUDA_PATH names the directory instead);
# hipcc and xargs (cpp_extension's ROCm probe at import, which fails softly
# with EACCES).  A program that is not listed fails to start with EACCES:
# run by the candidate itself, a PermissionError (SANDBOX_VIOLATION); run by
# a compiler, a failed build (COMPILATION_ERROR quoting the build's output).

SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"


def _program(name):
    """The real path of an executable file (by path, or by name on the
    PATH), or None."""
    if not name:
        return None
    p = name if os.path.isabs(name) else shutil.which(name, path=os.environ.get("PATH") or SYSTEM_PATH)
    if p and os.path.isfile(p) and os.access(p, os.X_OK):
        return os.path.realpath(p)
    return None


def _gcc_programs(driver):
    """What a gcc driver runs, by asking it (-print-prog-name): its own
    programs by full path, as and ld by name on the PATH."""
    found = {}
    for prog in ("cc1", "cc1plus", "collect2", "lto-wrapper", "as", "ld"):
        try:
            out = subprocess.run([driver, "-print-prog-name=" + prog], stdin=subprocess.DEVNULL,
                                 capture_output=True, text=True, timeout=60).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            continue
        path = _program(out)
        if path:
            found[prog] = path
    return found


def _package_dir(name):
    """Where an installed package lives, without importing it."""
    import importlib.util
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin or not os.path.isabs(spec.origin):
        return None
    return os.path.dirname(spec.origin)


def _is_script(path):
    try:
        with open(path, "rb") as f:
            return f.read(2) == b"#!"
    except OSError:
        return True


def cuda_home():
    for key in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(key) and os.path.isdir(os.environ[key]):
            return os.environ[key]
    nvcc = _program("nvcc")
    if nvcc:
        return os.path.dirname(os.path.dirname(nvcc))
    return "/usr/local/cuda" if os.path.isdir("/usr/local/cuda") else None


def compiler_profile(backend):
    """The compiler profile of a candidate of `backend` ("triton" or
    "cuda"): {"backend", "programs": {what: real path}, "exec_paths": [...],
    "env": {...}}.  Run by the trusted zygote (once) or supervisor, never by a
    candidate.  Raises SandboxError naming what this machine lacks."""
    progs, env = {}, {}
    drivers = {}
    for name in ("gcc", "cc", "g++", "c++"):
        path = _program(name)
        if path:
            progs[name] = path
            drivers.setdefault(path, name)
    if "gcc" not in progs and "cc" not in progs:
        raise SandboxError("backend '%s' needs a C compiler (gcc), and this worker has none on %s"
                           % (backend, os.environ.get("PATH") or SYSTEM_PATH))
    for driver in drivers:
        for prog, path in _gcc_programs(driver).items():
            progs.setdefault(prog, path)
    for need in ("as", "ld"):
        if need not in progs:
            raise SandboxError("backend '%s' needs the assembler and linker (binutils: %s not found)"
                               % (backend, need))
    home = cuda_home()
    if backend == "cuda":
        ninja = None
        d = _package_dir("ninja")            # pip's ninja: its bin/ninja is a Python script
        if d and _program(os.path.join(d, "data", "bin", "ninja")):
            ninja = _program(os.path.join(d, "data", "bin", "ninja"))
        elif _program("ninja") and not _is_script(_program("ninja")):
            ninja = _program("ninja")
        else:
            # Newer ninja wheels install the binary itself beside the
            # interpreter (a venv's bin/), which the worker's PATH lacks.
            beside = _program(os.path.join(os.path.dirname(sys.executable), "ninja"))
            if beside and not _is_script(beside):
                ninja = beside
        if ninja is None:
            raise SandboxError("backend 'cuda' needs ninja (torch.utils.cpp_extension.load_inline builds "
                               "with it), and this worker has no ninja binary")
        progs["ninja"] = ninja
        if _program("ninja") != ninja:
            # load_inline runs "ninja" by name: find this one first.
            env["PATH"] = os.path.dirname(ninja) + ":" + (os.environ.get("PATH") or SYSTEM_PATH)
        sh = _program("/bin/sh")
        if sh is None:
            raise SandboxError("backend 'cuda' needs /bin/sh (ninja and nvcc run their steps through it)")
        progs["sh"] = sh
        if home:
            for rel in ("bin/nvcc", "bin/cudafe++", "bin/ptxas", "bin/fatbinary", "bin/nvlink",
                        "nvvm/bin/cicc"):
                path = _program(os.path.join(home, rel))
                if path:
                    progs[os.path.basename(rel)] = path
            env["CUDA_HOME"] = home
        env["TORCH_DONT_CHECK_COMPILER_ABI"] = "1"
    elif backend == "triton":
        d = os.path.dirname(triton.__file__) if triton is not None else _package_dir("triton")
        bundled = []
        for sub in (("backends", "nvidia", "bin"), ("third_party", "cuda", "bin")):
            b = os.path.join(d, *sub) if d else ""
            if os.path.isdir(b):     # ptxas, and ptxas-blackwell where Triton bundles one
                bundled += [os.path.join(b, n) for n in sorted(os.listdir(b)) if n.startswith("ptxas")]
        found = []
        for path in bundled + [os.environ.get("TRITON_PTXAS_PATH", ""),
                               os.path.join(home, "bin", "ptxas") if home else ""]:
            path = _program(path) if path else None
            if path and path not in found:
                found.append(path)
        for i, path in enumerate(found):
            progs["ptxas" if i == 0 else "ptxas.%d" % i] = path
        # Triton takes $CC first: the listed gcc, never a compiler it would find on its own.
        env["CC"] = progs.get("gcc") or progs["cc"]
    else:
        raise SandboxError("backend '%s' has no compiler profile" % backend)
    return {"backend": backend, "programs": progs, "exec_paths": sorted(set(progs.values())), "env": env}


def libcuda_dir():
    """The directory of the libcuda this process loaded (CUDA is up), for
    TRITON_LIBCUDA_PATH: else Triton runs /sbin/ldconfig -p to find it."""
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.split(None, 5)[-1].strip()
                if os.path.basename(path).startswith("libcuda.so"):
                    return os.path.dirname(path)
    except OSError:
        pass
    return None

# ------------------------------------------------------------------ tensors


def dtype_name(dt):
    return str(dt).replace("torch.", "")


def dtype_of(name):
    dt = getattr(torch, name, None) if isinstance(name, str) else None
    if not isinstance(dt, torch.dtype):
        return None
    return dt


def flatten_outputs(out, what="output"):
    """The model's return value as a list of CPU tensors."""
    flat = []

    def walk(x, path):
        if isinstance(x, torch.Tensor):
            flat.append(x)
        elif isinstance(x, (tuple, list)):
            for i, y in enumerate(x):
                walk(y, "%s[%d]" % (path, i))
        elif isinstance(x, bool) or isinstance(x, (int, float)):
            flat.append(torch.tensor(x))
        else:
            raise TypeError("%s %s is a %s, not a tensor" % (what, path, type(x).__name__))
    walk(out, "")
    return flat


def tensor_inputs(inputs):
    return [(i, x) for i, x in enumerate(inputs) if isinstance(x, torch.Tensor)]


def clone_inputs(inputs):
    return [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]


def make_inputs(mod, seed, signed, device):
    """get_inputs() under torch.manual_seed(seed); for the signed-input trial
    every floating tensor gets random signs (a second generator seeded from
    the same seed), so both children build the same tensors."""
    torch.manual_seed(seed)
    inputs = list(mod["get_inputs"]())
    if signed:
        g = torch.Generator().manual_seed(derive_seed(seed, "signs"))
        for i, x in enumerate(inputs):
            if isinstance(x, torch.Tensor) and x.is_floating_point():
                flip = torch.rand(x.shape, generator=g) < 0.5
                inputs[i] = torch.where(flip, -x.cpu(), x.cpu()).to(x.dtype)
    if device != "cpu":
        inputs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in inputs]
    return inputs


def all_nonnegative(inputs):
    """True when every floating input holds no negative value (and there is
    one): then identity-like hacks would pass, and a signed trial is due."""
    seen = False
    for _, x in tensor_inputs(inputs):
        if x.is_floating_point() and x.numel() > 0:
            seen = True
            if bool((x < 0).any()):
                return False
    return seen


class OutputArea:
    """The candidate's side of the shared memory: writes tensors at aligned
    offsets and returns their descriptors."""

    def __init__(self, fd, size):
        self.mm = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        self.size = size
        self.cursor = 0

    def put(self, tensors):
        descs = []
        for t in tensors:
            t = t.detach()
            if t.device.type != "cpu":
                t = t.cpu()
            t = t.contiguous()
            nbytes = t.numel() * t.element_size()
            off = (self.cursor + ALIGN - 1) // ALIGN * ALIGN
            if off + nbytes > self.size:
                raise MemoryError("the outputs exceed the shared output area of %d bytes "
                                  "([plugin.python] max_output_bytes)" % self.size)
            if nbytes:
                dst = torch.frombuffer(self.mm, dtype=t.dtype, count=t.numel(), offset=off)
                dst.copy_(t.reshape(-1))
            self.cursor = off + nbytes
            descs.append({"dtype": dtype_name(t.dtype), "shape": list(t.shape), "offset": off,
                          "nbytes": nbytes})
        return descs


class InputArea:
    """The reference's side: reads what the candidate described, checking
    every field first (the index comes from untrusted code)."""

    def __init__(self, fd, size):
        self.mm = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ)
        self.size = size

    def get(self, desc):
        if not isinstance(desc, dict):
            raise ValueError("a tensor descriptor is not an object")
        dt = dtype_of(desc.get("dtype"))
        shape, off, nbytes = desc.get("shape"), desc.get("offset"), desc.get("nbytes")
        if dt is None:
            raise ValueError("unknown dtype %r" % (desc.get("dtype"),))
        if (not isinstance(shape, list) or len(shape) > 16 or
                not all(isinstance(s, int) and not isinstance(s, bool) and 0 <= s < (1 << 40) for s in shape)):
            raise ValueError("bad shape %r" % (shape,))
        if not isinstance(off, int) or not isinstance(nbytes, int) or off < 0 or nbytes < 0:
            raise ValueError("bad offset or size")
        numel = math.prod(shape)
        esize = torch.empty((), dtype=dt).element_size()
        if numel * esize != nbytes or off + nbytes > self.size:
            raise ValueError("offset/size do not fit the shape or the shared area")
        if numel == 0:
            return torch.empty(shape, dtype=dt)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")   # a read-only buffer: we copy at once
            return torch.frombuffer(self.mm, dtype=dt, count=numel, offset=off).clone().reshape(shape)

# ------------------------------------------------------------------ comparison


def tolerance(dt, job):
    name = dtype_name(dt)
    atol, rtol = TOLERANCES.get(name, (0.0, 0.0))
    if name in TOLERANCES:
        if isinstance(job.get("atol"), (int, float)):
            atol = float(job["atol"])
        if isinstance(job.get("rtol"), (int, float)):
            rtol = float(job["rtol"])
    return atol, rtol


def compare_tensor(ref, got, job):
    """{ok, max_abs_err, max_rel_err, mismatches, first_bad_index, message}."""
    r = {"ok": False, "max_abs_err": None, "max_rel_err": None, "mismatches": 0, "first_bad_index": None}
    if tuple(ref.shape) != tuple(got.shape):
        r["message"] = "shape %s, expected %s" % (list(got.shape), list(ref.shape))
        r["mismatches"] = ref.numel()
        return r
    if ref.dtype != got.dtype:
        r["message"] = "dtype %s, expected %s" % (dtype_name(got.dtype), dtype_name(ref.dtype))
        r["mismatches"] = ref.numel()
        return r
    atol, rtol = tolerance(ref.dtype, job)
    if ref.is_complex():
        ref, got = torch.view_as_real(ref), torch.view_as_real(got)
    if ref.is_floating_point():
        rd, gd = ref.double().reshape(-1), got.double().reshape(-1)
        diff = (gd - rd).abs()
        fin = torch.isfinite(rd)
        bad = torch.where(fin, ~(diff <= atol + rtol * rd.abs()),
                          torch.where(torch.isnan(rd), ~torch.isnan(gd), gd != rd))
        if bool(fin.any()):
            dfin = torch.where(fin, diff, torch.zeros_like(diff))
            r["max_abs_err"] = finite(float(dfin.max())) if bool(torch.isfinite(dfin).all()) else None
            # Relative to the expected value where it is not zero.
            nz = fin & (rd != 0)
            rel = torch.where(nz, dfin / torch.where(nz, rd.abs(), torch.ones_like(rd)), torch.zeros_like(rd))
            r["max_rel_err"] = finite(float(rel.max()))
        else:
            r["max_abs_err"] = r["max_rel_err"] = 0.0
    else:
        rd, gd = ref.reshape(-1), got.reshape(-1)
        bad = rd != gd
        r["max_abs_err"] = float((rd.double() - gd.double()).abs().max()) if rd.numel() else 0.0
        r["max_rel_err"] = None
    n = int(bad.sum())
    r["mismatches"] = n
    if n == 0:
        r["ok"] = True
        return r
    first = int(bad.nonzero()[0][0])
    r["first_bad_index"] = first
    coords = []
    rest = first
    for s in reversed(list(ref.shape) if not ref.is_complex() else list(ref.shape)):
        coords.append(rest % s if s else 0)
        rest = rest // s if s else 0
    exp, gv = rd[first].item(), gd[first].item()
    r["message"] = ("%d of %d elements differ beyond atol=%g rtol=%g (first at %s: expected %r, got %r; "
                    "max abs error %s, max rel error %s)" % (n, rd.numel(), atol, rtol,
                                                             list(reversed(coords)), exp, gv,
                                                             r["max_abs_err"], r["max_rel_err"]))
    return r


def compare_outputs(ref_outs, got_outs, job, device="cpu"):
    """Compare lists; the first failing output's message names it.  On the
    job's device: a dozen float64 passes over each output take ~30 ms per
    million elements on one CPU thread, a fraction of a millisecond on a GPU."""
    res = {"ok": True, "max_abs_err": 0.0, "max_rel_err": 0.0, "mismatches": 0, "first_bad_index": None}
    if len(ref_outs) != len(got_outs):
        return dict(res, ok=False, message="the model returned %d outputs, expected %d" %
                    (len(got_outs), len(ref_outs)))
    for k, (rt, gt) in enumerate(zip(ref_outs, got_outs)):
        c = compare_tensor(rt.to(device), gt.to(device), job)
        for key in ("max_abs_err", "max_rel_err"):
            if c[key] is None or res[key] is None:
                res[key] = None if c[key] is None and key == "max_abs_err" and not c["ok"] else res[key]
            else:
                res[key] = max(res[key], c[key])
        res["mismatches"] += c["mismatches"]
        if not c["ok"] and res["ok"]:
            res["ok"] = False
            res["first_bad_index"] = c["first_bad_index"]
            res["output"] = k
            res["message"] = "output %d: %s" % (k, c["message"])
    return res


def same_tensor(a, b):
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.is_floating_point() or a.is_complex():
        return bool(((a == b) | (torch.isnan(a) & torch.isnan(b))).all())
    return bool((a == b).all())

# ------------------------------------------------------------------ timing


def stats(samples_ms):
    """DESIGN §5's timing block: median and a 95% interval of the median
    from order statistics (none below 6 samples)."""
    v = sorted(samples_ms)
    n = len(v)
    if n == 0:
        return None
    med = v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2
    mean = sum(v) / n
    std = math.sqrt(sum((x - mean) ** 2 for x in v) / (n - 1)) if n > 1 else 0.0
    half = 0.98 * math.sqrt(n)
    lo = max(1, int(math.floor(n / 2 - half)))
    hi = min(n, int(math.ceil(1 + n / 2 + half)))
    rel = max(med - v[lo - 1], v[hi - 1] - med) / med if n >= 6 and med > 0 else None
    return {"median_ms": med, "mean_ms": mean, "std_ms": std, "min_ms": v[0], "max_ms": v[-1],
            "ci95_ms": [v[lo - 1], v[hi - 1]], "ci95_rel": rel, "trials": n}


class Timer:
    """One call's time.  CPU: perf_counter_ns (informative only).  GPU
    (UNTESTED here): CUDA events around the call after an L2 flush; the CUPTI
    layer of issue 5 is the cross-check against a candidate that patches
    this code in its own process."""

    def __init__(self, device):
        self.device = device
        self.flush_buf = None
        if device != "cpu":
            l2 = getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 50 << 20) or (50 << 20)
            self.flush_buf = torch.empty(2 * l2 // 4, dtype=torch.int32, device=device)

    def call(self, fn, inputs):
        if self.device == "cpu":
            t0 = time.perf_counter_ns()
            out = fn(*inputs)
            t1 = time.perf_counter_ns()
            return out, (t1 - t0) / 1e6
        # GPU path, UNTESTED: flush L2 (write twice its size), then events.
        self.flush_buf.zero_()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        start.record()
        out = fn(*inputs)
        end.record()
        torch.cuda.synchronize()
        return out, start.elapsed_time(end)


TIMED_KEEP_BYTES = 256 << 20


def time_model(model, mod, job, device, keep=None, area=None):
    """Warm-up, then timed calls on fresh inputs (one seed per call), with an
    adaptive stop.  Returns (stats, samples).  With an area (the candidate),
    samples maps a call index to the descriptors of that call's outputs in
    it: every call's while they fit in TIMED_KEEP_BYTES -- the supervisor
    picks which to check only afterwards -- then only the calls in `keep`
    (chosen in advance, for outputs too large to keep them all) and the
    last."""
    n = max(1, int(job.get("num_perf_trials", 100)))
    warm = max(0, int(job.get("num_warmup", 3)))
    budget = float(job.get("max_timing_ms", 10000.0))
    prec = float(job.get("timing_rel_precision", 0.005))
    base = job["perf_seed"]
    timer = Timer(device)
    with torch.no_grad():
        for w in range(warm):
            inputs = make_inputs(mod, derive_seed(base, "warmup", w), False, device)
            timer.call(model, inputs)
        times, samples, kept = [], {}, None
        t_start = time.monotonic()
        keep = set(keep or ())
        kept_bytes = 0
        for i in range(n):
            inputs = make_inputs(mod, derive_seed(base, "perf", i), False, device)
            out, ms = timer.call(model, inputs)
            times.append(ms)
            kept = (i, out)
            if area is not None:
                outs = flatten_outputs(out)
                size = sum(o.numel() * o.element_size() for o in outs)
                if kept_bytes + size <= TIMED_KEEP_BYTES or i in keep:
                    samples[i] = area.put(outs)
                    kept_bytes += size
            if len(times) >= MIN_TIMING_TRIALS:
                s = stats(times)
                if s["ci95_rel"] is not None and s["ci95_rel"] <= prec:
                    break
                if (time.monotonic() - t_start) * 1e3 > budget:
                    break
        if area is not None and kept is not None and kept[0] not in samples:
            samples[kept[0]] = area.put(flatten_outputs(kept[1]))
    return stats(times), samples

class KernelProbe:
    """libkgym_kprobe.so (plugins/python/kprobe.c) in this process: CUPTI's
    kernel activity records of the calls made between start() and stop().
    Loaded before the sandbox; libcupti by soname, so torch's copy if it
    has one mapped."""

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


PROFILE_CALLS = 3
TIMED_CHECKS = 3               # timed calls whose outputs are checked, besides the last


def timed_calls_to_check(records):
    """Up to TIMED_CHECKS timed calls drawn at random (by the supervisor,
    after the calls) among those whose outputs the candidate kept, and the
    last one."""
    have = sorted({r["index"] for r in records or [] if isinstance(r, dict) and type(r.get("index")) is int})
    if not have:
        return [0]                      # judge_samples: "no outputs reported"
    pick = set(random.SystemRandom().sample(have, min(TIMED_CHECKS, len(have))))
    pick.add(have[-1])
    return sorted(pick)


def triton_kernels_matter(model, mod, job, device):
    """Do the candidate's Triton kernels change its outputs?  One call with
    every @triton.jit launch skipped (JITFunction.run made a no-op), one
    normal call, on the same fresh inputs: the same outputs mean the
    kernels are decoys, whatever share of the GPU time they take.  The
    skipped call's outputs were allocated after calls on other inputs, so a
    real kernel's unwritten output cannot equal the answer by chance.
    None when the check cannot run (no triton) or the skipped call fails
    (the candidate needed its kernels)."""
    try:
        from triton.runtime.jit import JITFunction
    except Exception:  # noqa: BLE001 - no triton: nothing to check
        return None
    inputs = make_inputs(mod, derive_seed(job["perf_seed"], "decoy"), False, device)
    run = JITFunction.run
    try:
        JITFunction.run = lambda self, *a, **kw: None
        with torch.no_grad():
            skipped = [o.detach().cpu().clone() for o in flatten_outputs(model(*inputs))]
            torch.cuda.synchronize()
    except Exception:  # noqa: BLE001 - it could not do without them
        return True
    finally:
        JITFunction.run = run
    with torch.no_grad():
        normal = [o.detach().cpu() for o in flatten_outputs(model(*inputs))]
    if len(skipped) != len(normal):
        return True
    return not all(same_tensor(a, b) for a, b in zip(skipped, normal))


def profile_calls(probe, model, mod, job, device):
    """The kernels PROFILE_CALLS calls of the model run, on fresh inputs made
    before collection starts (their kernels are not the candidate's), with
    no L2 flush in between (the flush is ours too)."""
    with torch.no_grad():
        inputs = [make_inputs(mod, derive_seed(job["perf_seed"], "profile", i), False, device)
                  for i in range(PROFILE_CALLS)]
        torch.cuda.synchronize()
        probe.start()
        try:
            for x in inputs:
                model(*x)
            torch.cuda.synchronize()
        finally:
            table = probe.stop()
    return dict(table, status="ok", calls=PROFILE_CALLS)

# ------------------------------------------------------------------ children


def load_module(source, name):
    """Run source as a fresh module; its namespace (never in sys.modules)."""
    mod = types.ModuleType(name)
    mod.__dict__["__builtins__"] = __builtins__
    # Tracebacks then quote the task's own lines.
    linecache.cache[name] = (len(source), None, source.splitlines(True), name)
    code = compile(source, name, "exec")
    exec(code, mod.__dict__)  # noqa: S102 - this is the point of the harness
    return mod.__dict__


def format_exc(prefix, limit_frames=12):
    """A traceback without the harness's own frames: what the model needs."""
    et, ev, tb = sys.exc_info()
    frames = [f for f in traceback.extract_tb(tb) if f.filename in ("kernel_code", "reference_code")]
    lines = traceback.format_list(frames[-limit_frames:])
    return clip("%s\n%s%s: %s" % (prefix, "".join(lines), et.__name__, ev))


SETUP_MS = {}      # a child's set-up steps, reported to the supervisor (metadata)


def child_setup(role, job, limits, keep_fds, job_dir, lib, profile=None):
    """Common start of both children: die with the zygote, keep only our
    descriptors, a private directory, then the sandbox -- with the compiler
    profile when `profile` is given (the candidate of a triton or cuda job
    only).  Returns the Landlock ABI."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGKILL, 0, 0, 0)       # PR_SET_PDEATHSIG
    for fd in [int(x) for x in os.listdir("/proc/self/fd")]:
        if fd > 2 and fd not in keep_fds:
            try:
                os.close(fd)
            except OSError:
                pass
    d = os.path.join(job_dir, role)
    os.mkdir(d, 0o700)
    os.chdir(d)
    out = os.open(os.path.join(d, "output.log"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(out, 1)
    os.dup2(out, 2)
    os.close(out)
    sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), line_buffering=True)
    sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), line_buffering=True)
    faulthandler.enable(file=sys.stderr)
    # Triton's and torch's caches go where this process may write (the
    # worker's HOME, which the zygote saw at import, is read-only here).
    os.environ.update(HOME=d, TMPDIR=d, TRITON_CACHE_DIR=os.path.join(d, ".triton"),
                      TORCH_EXTENSIONS_DIR=os.path.join(d, "torch_extensions"))
    try:
        import triton  # noqa: F401 - already imported by the zygote where present
        knobs = getattr(triton, "knobs", None)
        if knobs is not None and hasattr(knobs, "cache"):
            knobs.cache.dir = os.path.join(d, ".triton")
    except Exception:  # noqa: BLE001 - no triton (CPU) or an older one: the env var does it
        pass
    gpu = job["device"] != "cpu"
    threads = int(limits.get("threads", 0))
    if threads == 0 and gpu:
        # A GPU job's CPU work is input generation and launches: torch's
        # default (an OpenMP thread per core, spinning) in both processes of
        # every job on a GPU made 4 concurrent jobs 7x slower on 16 cores.
        threads = 1
    if threads > 0:
        torch.set_num_threads(threads)
    if gpu:
        # CUDA must be up before the filter (DESIGN §2).
        t0 = time.monotonic()
        torch.cuda.init()
        torch.zeros(1, device="cuda")
        SETUP_MS["cuda_init"] = (time.monotonic() - t0) * 1e3
    exec_paths = None
    if profile is not None:
        # What the compilers are told, so that they run only listed programs.
        os.environ.update(profile["env"])
        for rel, data in (profile.get("cache_seed") or {}).items():
            # Triton's cuda_utils.so, built once by the zygote: a copy, so
            # what this process writes there reaches no other task.
            path = os.path.join(d, ".triton", rel)
            os.makedirs(os.path.dirname(path), 0o700, exist_ok=True)
            with open(path, "wb") as f:
                f.write(data)
        if profile["backend"] == "triton" and gpu and "TRITON_LIBCUDA_PATH" not in os.environ:
            where = libcuda_dir()
            if where:
                os.environ["TRITON_LIBCUDA_PATH"] = where
        exec_paths = profile["exec_paths"]
        if not int(limits.get("cpu_seconds", 0)):
            # A backstop, per process and inherited: a compiler the candidate
            # put in a process group of its own outlives a kill of the
            # worker's group, and this supervisor's sweep with it.  Twice the
            # job's phase deadlines: a GPU candidate spends little CPU time.
            limits = dict(limits, cpu_seconds=int(2 * sum(float(limits.get(k, d)) for k, d in (
                ("compile_timeout", 50), ("correctness_timeout", 100), ("timing_timeout", 250)))))
    t0 = time.monotonic()
    abi = enter_sandbox(lib, d, gpu, limits, interpreter_paths(job_dir), exec_paths)
    SETUP_MS["sandbox"] = (time.monotonic() - t0) * 1e3
    return abi


def reference_child(sock, area_fd, area_size, job, limits, job_dir, lib):
    """A reference process for one job, forked by the job's supervisor."""
    reference_job(sock, area_fd, area_size, job, limits, job_dir, lib, {})
    os._exit(0)


def reference_server(ctl, lib):
    """A reference process forked by the zygote and kept across the jobs of
    one reference (Job.reference_key: its code, entry point, device,
    backend and limits): its CUDA context, sandbox and loaded module serve
    them all, the model is built again for each job (its init seed).  Each
    job arrives on `ctl` as two descriptors -- a socket of its own, so that
    nothing of an earlier job can be read as this one's, and the job's
    output area -- then the job on that socket.  It runs no task's
    candidate code and never sees kernel_code: like the reference of one
    job, it is on the trusted side."""
    ctypes.CDLL(None).prctl(1, signal.SIGKILL, 0, 0, 0)       # PR_SET_PDEATHSIG: dies with the zygote
    for fd in [int(x) for x in os.listdir("/proc/self/fd")]:
        if fd > 2 and fd != ctl.fileno():
            try:
                os.close(fd)
            except OSError:
                pass
    state = {"keep": {ctl.fileno()}}
    while True:
        try:
            _, fds, _, _ = socket.recv_fds(ctl, 1, 2)
        except OSError:
            os._exit(0)
        if len(fds) != 2:
            os._exit(0)           # the zygote is gone
        sock, area_fd = FdStream(fds[0]), fds[1]
        msg = recv_msg(sock)
        if msg is not None and msg.get("type") == "job":
            if state.get("key") not in (None, msg.get("key")):
                send_msg(sock, {"type": "error", "code": "SYSTEM_ERROR",
                                "message": "the reference server of another reference got this job"})
                os._exit(0)
            state["key"] = msg["key"]
            try:
                reference_job(sock, area_fd, int(msg["area_size"]), msg["job"], msg["limits"], msg["job_dir"],
                              lib, state)
            except Exception:  # noqa: BLE001 - say why, then go: the zygote starts another
                send_msg(sock, {"type": "error", "code": "SYSTEM_ERROR",
                                "message": clip("the reference server failed: " + traceback.format_exc())})
                os._exit(70)
        sock.close()
        os.close(area_fd)
        if state.get("device") == "cuda":
            torch.cuda.empty_cache()    # between jobs, only the context stays on the GPU


def reference_job(sock, area_fd, area_size, job, limits, job_dir, lib, state):
    """The trusted side of one job: expected outputs never leave this
    process.  `state` is what a reference server keeps across jobs (its
    sandbox's "abi", the loaded "mod"; empty for a reference of one job).
    Returns when the supervisor is done with it."""
    def fail(code, message):
        send_msg(sock, {"type": "error", "code": code, "message": clip(message)})
        os._exit(0)

    SETUP_MS.clear()
    if "abi" not in state:
        if job.get("wait_for_start"):
            # Started once the candidate has CUDA up (see Job.supervise).
            msg = recv_msg(sock)
            if msg is None or msg.get("type") != "start":
                os._exit(0)
        try:
            state["abi"] = child_setup("reference", job, limits, {sock.fileno(), area_fd} | state.get("keep", set()),
                                       job_dir, lib)
        except Exception as e:  # noqa: BLE001 - fail closed, whatever went wrong
            fail("SYSTEM_ERROR", "the reference process could not enter the sandbox: %s" % e)
    abi = state["abi"]
    device = state["device"] = "cuda" if job["device"] != "cpu" else "cpu"
    t0 = time.monotonic()
    try:
        mod = state.get("mod")
        if mod is None:
            mod = state["mod"] = load_module(job["reference_code"], "reference_code")
        for name in (job["entry_point"], "get_inputs", "get_init_inputs"):
            if not callable(mod.get(name)):
                fail("VALIDATION_ERROR", "reference_code defines no %s" % name)
        torch.manual_seed(job["init_seed"])
        init = list(mod["get_init_inputs"]())
        torch.manual_seed(job["init_seed"])
        model = mod[job["entry_point"]](*init)
        if isinstance(model, torch.nn.Module):
            model = model.to(device).eval()
        if job.get("reference_backend") == "compile":
            if not hasattr(torch, "compile"):
                fail("SYSTEM_ERROR", "reference_backend 'compile' needs torch >= 2.0; this worker has torch %s"
                     % torch.__version__)
            model = torch.compile(model)  # UNTESTED: inductor needs exec, which the sandbox refuses
    except SystemExit:
        raise
    except Exception:  # noqa: BLE001
        fail("VALIDATION_ERROR", format_exc("the reference could not be built:"))

    trials = []            # [{seed, signed, outputs, inputs, mutates}]
    try:
        with torch.no_grad():
            seeds = job["seeds"]
            nonneg = True
            for s in seeds:
                inputs = make_inputs(mod, s, False, device)
                nonneg = nonneg and all_nonnegative(inputs)
                trials.append(run_reference(model, inputs, s, False))
            if nonneg:
                s = derive_seed(job["seed_base"], "signed")
                inputs = make_inputs(mod, s, True, device)
                t = run_reference(model, inputs, s, True)
                # A problem whose domain is non-negative (sqrt, log) gives
                # NaN on signed inputs: then the signed trial proves nothing.
                if all(bool(torch.isfinite(o).all()) for o in t["outputs"] if o.is_floating_point()):
                    trials.append(t)
                else:
                    trials.append(dict(t, skipped="the reference is not finite on signed inputs"))
    except Exception:  # noqa: BLE001
        fail("VALIDATION_ERROR", format_exc("the reference failed on its own inputs:"))
    # The GPU's name: only a process with CUDA up knows it (never the zygote).
    send_msg(sock, {"type": "ready", "landlock_abi": abi, "ms": (time.monotonic() - t0) * 1e3, "setup_ms": SETUP_MS,
                    "signed_trial": nonneg,
                    "device_name": "cuda: " + torch.cuda.get_device_name(0) if device != "cpu" else None})

    area = InputArea(area_fd, area_size)
    done = reference_serve_job(sock, area, job, device, mod, model, trials, fail)
    del model, trials
    try:
        area.mm.close()
    except BufferError:            # a tensor still views it: collect, then insist
        gc.collect()
        area.mm.close()
    if done:
        # Only now: the job's memory is let go, and nothing of it runs.
        send_msg(sock, {"type": "idle"})


def reference_serve_job(sock, area, job, device, mod, model, trials, fail):
    """The reference's answers to the supervisor, until it says the job is
    done (True) or goes away (False)."""
    prepared = {}          # timed call index -> the reference's outputs (CPU)
    # While the candidate runs its trials (the GPU is shared then), make the
    # expected outputs of the calls it will time, in order, within
    # TIMED_KEEP_BYTES -- at least the first MIN_TIMING_TRIALS, the calls
    # every timing makes: checking the timed calls afterwards, in the
    # timing's exclusive hold, is then a comparison, without forward passes.
    # Stopped for good by "compare": after it the GPU may be a timer's.
    todo = list(range(max(1, int(job.get("num_perf_trials", 100))))) \
        if job.get("run_performance", True) is not False else []
    prepared_bytes = 0

    def prepare_next():
        nonlocal todo, prepared_bytes
        idx = todo.pop(0)
        try:
            prepared[idx] = expected_timed_outputs(model, mod, idx, job, device)
        except Exception:  # noqa: BLE001
            fail("SYSTEM_ERROR", format_exc("the reference failed on a timed call's inputs:"))
        prepared_bytes += sum(o.numel() * o.element_size() for o in prepared[idx])
        if prepared_bytes >= TIMED_KEEP_BYTES:
            todo = []

    while True:
        if todo and not select.select([sock], [], [], 0)[0]:
            prepare_next()
            continue
        msg = recv_msg(sock)
        if msg is None:
            return False
        if msg.get("type") == "exit":
            os._exit(0)
        if msg["type"] == "done":
            return True
        if msg["type"] == "compare":
            while todo and todo[0] < MIN_TIMING_TRIALS:
                prepare_next()
            todo = []
            send_msg(sock, dict(judge_trials(trials, msg.get("records"), area, job, device),
                                prepared=sorted(prepared)))
        elif msg["type"] == "compare_samples":
            try:
                for idx in msg.get("expect") or []:
                    if int(idx) not in prepared:      # beyond what was made in advance
                        prepared[int(idx)] = expected_timed_outputs(model, mod, int(idx), job, device)
            except Exception:  # noqa: BLE001
                fail("SYSTEM_ERROR", format_exc("the reference failed on a timed call's inputs:"))
            send_msg(sock, judge_samples(prepared, msg.get("records"), msg.get("expect"), area, job, device))
        elif msg["type"] == "time":
            try:
                s, _ = time_model(model, mod, job, device)
                send_msg(sock, {"type": "timing", "stats": s})
            except Exception:  # noqa: BLE001
                fail("SYSTEM_ERROR", format_exc("the reference failed while being timed:"))


def run_reference(model, inputs, seed, signed):
    before = clone_inputs(inputs)
    outs = [o.detach().cpu().clone() for o in flatten_outputs(model(*inputs))]
    mutates = any(isinstance(b, torch.Tensor) and not same_tensor(b.cpu(), a.cpu())
                  for b, a in zip(before, inputs))
    return {"seed": seed, "signed": signed, "outputs": outs,
            "inputs": [b.cpu() for b in before if isinstance(b, torch.Tensor)], "mutates": mutates}


def judge_trials(trials, records, area, job, device="cpu"):
    """The verdict on the correctness trials (records from the candidate)."""
    out = {"type": "verdict", "ok": True, "trials": [], "code": None, "message": None, "hack": None}
    if not isinstance(records, list):
        records = []
    by_seed = {}
    for rec in records:
        if isinstance(rec, dict) and isinstance(rec.get("seed"), int):
            by_seed[(rec["seed"], bool(rec.get("signed")))] = rec
    judged = passed = 0
    for k, t in enumerate(trials):
        entry = {"trial": k, "seed": str(t["seed"]), "signed_inputs": t["signed"]}
        if "skipped" in t:
            entry.update(passed=None, skipped=t["skipped"])
            out["trials"].append(entry)
            continue
        judged += 1
        what = "signed-input trial" if t["signed"] else "correctness trial %d of %d" % (k + 1, len(job["seeds"]))
        rec = by_seed.get((t["seed"], t["signed"]))
        try:
            if rec is None:
                raise ValueError("the candidate reported no outputs for it")
            got = [area.get(d) for d in rec.get("outputs", [])]
            got_in = [area.get(d) for d in rec.get("inputs", [])]
        except (ValueError, TypeError) as e:
            entry.update(passed=False, mismatches=None, error=str(e))
            out["trials"].append(entry)
            if out["ok"]:
                out.update(ok=False, code="CORRECTNESS_ERROR", message="%s: %s" % (what, e))
            continue
        c = compare_outputs(t["outputs"], got, job, device)
        entry.update(passed=c["ok"], max_abs_err=c["max_abs_err"], max_rel_err=c["max_rel_err"],
                     mismatches=c["mismatches"], first_bad_index=c["first_bad_index"])
        changed = None
        if not t["mutates"]:
            if len(got_in) != len(t["inputs"]):
                changed = "the candidate reported %d inputs, expected %d" % (len(got_in), len(t["inputs"]))
            else:
                for i, (a, b) in enumerate(zip(t["inputs"], got_in)):
                    if not same_tensor(a.to(device), b.to(device)):
                        changed = "input %d was modified by the call" % i
                        entry["changed_input"] = i
                        break
        out["trials"].append(entry)
        if not c["ok"]:
            if out["ok"]:
                hint = ""
                if t["signed"]:
                    hint = " (inputs with random signs: the problem's own inputs are all non-negative, " \
                           "so an identity-like shortcut passes them)"
                out.update(ok=False, code="CORRECTNESS_ERROR", message="%s%s: %s" % (what, hint, c["message"]))
                if t["signed"] and passed == judged - 1:
                    out["hack"] = {"kind": "only_correct_on_nonnegative_inputs",
                                   "detail": "passed every trial but the signed-input one"}
        elif changed is not None:
            if out["ok"]:
                out.update(ok=False, code="REWARD_HACK", message="%s: %s" % (what, changed),
                           hack={"kind": "input_mutation", "detail": changed})
        else:
            passed += 1
    out["passed"] = passed
    out["judged"] = judged
    return out


def expected_timed_outputs(model, mod, idx, job, device):
    """The reference's outputs (CPU copies) for timed call idx's inputs."""
    with torch.no_grad():
        inputs = make_inputs(mod, derive_seed(job["perf_seed"], "perf", idx), False, device)
        return [o.detach().cpu() for o in flatten_outputs(model(*inputs))]


def judge_samples(prepared, records, expect, area, job, device="cpu"):
    """Outputs of timed calls: the candidate must behave while timed too.
    `prepared` holds the reference's outputs of the calls to check (made
    while the candidate ran its trials, the rest after the timing)."""
    out = {"type": "verdict", "ok": True, "code": None, "message": None, "hack": None, "checked": 0}
    if not isinstance(records, list) or not isinstance(expect, list):
        records, expect = [], [0]
    have = {r.get("index"): r for r in records if isinstance(r, dict) and isinstance(r.get("index"), int)}
    for idx in expect:
        rec = have.get(idx)
        try:
            if rec is None:
                raise ValueError("no outputs reported for timed call %d" % idx)
            got = [area.get(d) for d in rec.get("outputs", [])]
            if idx not in prepared:
                raise ValueError("the reference prepared no outputs for timed call %r" % (idx,))
            c = compare_outputs(prepared[idx], got, job, device)
        except (ValueError, TypeError) as e:
            c = {"ok": False, "message": str(e)}
        out["checked"] += 1
        if not c["ok"]:
            out.update(ok=False, code="REWARD_HACK",
                       message="timed call %d: its outputs are wrong although the correctness trials passed: %s"
                       % (idx, c["message"]),
                       hack={"kind": "timed_output_mismatch", "call": idx,
                             "detail": "timed call %d: %s" % (idx, c["message"])})
            break
    return out


def candidate_child(sock, area_fd, area_size, job, limits, job_dir, lib):
    # Every message carries the job's nonce: a frame the candidate's own
    # code writes into this socket (it can find the descriptor) cannot.
    nonce = job.pop("nonce")

    def send(obj):
        send_msg(sock, dict(obj, nonce=nonce))

    def fail(kind, message, code=None):
        send({"type": kind, "code": code, "message": clip(message)})
        os._exit(0)

    probe, probe_status = None, None
    t_start = time.monotonic()
    if job.get("profile"):
        # Before the sandbox: libcupti is loaded from wherever it lies.
        try:
            probe = KernelProbe(limits["kprobe_lib"], limits.get("cupti_library"))
        except (OSError, KeyError, AttributeError) as e:
            probe_status = "unavailable: %s" % e
    try:
        # The compiler profile for this process alone; the reference's is the strict one.
        abi = child_setup("candidate", job, limits, {sock.fileno(), area_fd}, job_dir, lib,
                          job.get("compiler_profile"))
    except Exception as e:  # noqa: BLE001 - fail closed
        fail("error", "the candidate process could not enter the sandbox: %s" % e, "SYSTEM_ERROR")
    send({"type": "cuda_up"})
    if probe is not None:
        # CUPTI's first collection sets itself up (a fraction of a second):
        # here, while the GPU is shared, not in the timing phase's hold.
        t0 = time.monotonic()
        try:
            probe.start()
            probe.stop()
        except OSError as e:
            probe, probe_status = None, "failed: %s" % e
        SETUP_MS["probe_warm"] = (time.monotonic() - t0) * 1e3
    t_load = time.monotonic()
    device = "cuda" if job["device"] != "cpu" else "cpu"
    area = OutputArea(area_fd, area_size)
    try:
        ref = load_module(job["reference_code"], "reference_code")
    except Exception:  # noqa: BLE001 - the reference process reports it
        fail("error", format_exc("the reference could not be loaded:"), "VALIDATION_ERROR")
    try:
        cand = load_module(job["kernel_code"], "kernel_code")
        cls = cand.get(job["entry_point"] + "New")
        if not callable(cls):
            raise NameError("kernel_code defines no %sNew" % job["entry_point"])
        torch.manual_seed(job["init_seed"])
        init = list(ref["get_init_inputs"]())
        torch.manual_seed(job["init_seed"])
        model = cls(*init)
        if isinstance(model, torch.nn.Module):
            model = model.to(device).eval()
    except PermissionError as e:
        fail("violation", "the sandbox refused: %s" % e)
    except Exception:  # noqa: BLE001
        fail("compile_error", format_exc("kernel_code could not be loaded or %sNew built:" % job["entry_point"]))
    SETUP_MS["load"] = (time.monotonic() - t_load) * 1e3
    SETUP_MS["total"] = (time.monotonic() - t_start) * 1e3
    send({"type": "compiled", "landlock_abi": abi, "setup_ms": SETUP_MS})

    records = []
    t0 = time.monotonic()
    first_ms = None
    try:
        with torch.no_grad():
            nonneg = True
            for s in job["seeds"]:
                inputs = make_inputs(ref, s, False, device)
                nonneg = nonneg and all_nonnegative(inputs)
                records.append(run_candidate(model, inputs, s, False, area))
                if first_ms is None:          # Triton's JIT compiles here
                    first_ms = (time.monotonic() - t0) * 1e3
            if nonneg:
                s = derive_seed(job["seed_base"], "signed")
                records.append(run_candidate(model, make_inputs(ref, s, True, device), s, True, area))
    except PermissionError as e:
        fail("violation", "the sandbox refused: %s" % e)
    except MemoryError as e:
        fail("error", str(e), "RESOURCE_ERROR")
    except Exception:  # noqa: BLE001
        fail("runtime_error", format_exc("%sNew raised an exception on its inputs:" % job["entry_point"]))
    seed = (job.get("compiler_profile") or {}).get("cache_seed")
    if seed:
        # Did Triton take the seeded cuda_utils.so, or build its own (a
        # Triton whose cache key we no longer match)?
        built = [f for _, _, files in os.walk(os.path.join(os.getcwd(), ".triton"))
                 for f in files if f.startswith("cuda_utils")]
        seed = "hit" if len(built) == len(seed) else "missed"
    matter = None
    if device != "cpu" and job.get("backend") == "triton":
        # A correctness question, asked here, while the GPU is shared, not in
        # the timing phase's exclusive hold.
        try:
            matter = triton_kernels_matter(model, ref, job, device)
        except Exception:  # noqa: BLE001
            fail("runtime_error", format_exc("%sNew raised an exception on fresh inputs:" % job["entry_point"]))
    send({"type": "outputs", "records": records, "first_call_ms": first_ms,
          "trials_ms": (time.monotonic() - t0) * 1e3, "triton_kernels_matter": matter,
          "triton_cache_seed": seed})

    msg = recv_msg(sock)
    if msg is None or msg.get("type") != "time":
        os._exit(0)
    try:
        area.cursor = 0        # the correctness outputs have been judged
        t0 = time.monotonic()
        s, samples = time_model(model, ref, job, device, msg.get("keep"), area)
        t1 = time.monotonic()
        recs = [{"index": i, "outputs": d} for i, d in samples.items()]
    except PermissionError as e:
        fail("violation", "the sandbox refused: %s" % e)
    except Exception:  # noqa: BLE001
        fail("runtime_error", format_exc("%sNew raised an exception while timed:" % job["entry_point"]))
    profile = {"status": probe_status} if probe_status else None
    if probe is not None:
        try:
            profile = profile_calls(probe, model, ref, job, device)
        except OSError as e:
            profile = {"status": "failed: %s" % e}
        except Exception:  # noqa: BLE001
            fail("runtime_error", format_exc("%sNew raised an exception while profiled:" % job["entry_point"]))
    send({"type": "timing", "stats": s, "samples": recs, "profile": profile,
          "timed_ms": (t1 - t0) * 1e3, "profile_ms": (time.monotonic() - t1) * 1e3})
    os._exit(0)


def run_candidate(model, inputs, seed, signed, area):
    out = flatten_outputs(model(*inputs))
    return {"seed": seed, "signed": signed, "outputs": area.put(out),
            "inputs": area.put([x for _, x in tensor_inputs(inputs)])}

# ------------------------------------------------------------------ the zygote's side of a job


class Child:
    def __init__(self, role, pid, sock):
        self.role, self.pid, self.sock = role, pid, sock
        self.status = None     # waitpid status once reaped
        self.eof = False
        self.quiet = False     # (a lent reference server) given back idle: not to be killed

    def reap(self, block=True):
        if self.status is None:
            try:
                pid, st = os.waitpid(self.pid, 0 if block else os.WNOHANG)
                if pid == self.pid:
                    self.status = st
            except ChildProcessError:
                self.status = 0
        return self.status

    def kill(self, wait=True):
        """SIGKILL; wait=False leaves the reaping (a CUDA context's teardown
        takes a while) to Job.cleanup, after the answer."""
        if self.status is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            if wait:
                self.reap()
        self.sock.close()

    def death(self):
        """A sentence for an unexpected end, and the error code."""
        st = self.reap()
        if os.WIFSIGNALED(st):
            sig = os.WTERMSIG(st)
            if sig == signal.SIGSYS:
                return "SANDBOX_VIOLATION", "the %s process made a system call the sandbox forbids " \
                                            "(killed by SIGSYS)" % self.role
            if sig == signal.SIGXFSZ:
                return "RESOURCE_ERROR", "the %s process wrote past its file size limit" % self.role
            if sig == signal.SIGXCPU:
                return "RESOURCE_ERROR", "the %s process used up its CPU time" % self.role
            if sig == signal.SIGKILL:
                return "RESOURCE_ERROR", "the %s process was killed by SIGKILL (most likely out of " \
                                         "memory)" % self.role
            return "RUNTIME_ERROR", "the %s process crashed: killed by %s" % (self.role, signal.Signals(sig).name)
        return "RUNTIME_ERROR", "the %s process exited (status %d) without a result" % (
            self.role, os.WEXITSTATUS(st) if os.WIFEXITED(st) else -1)


class ServerChild(Child):
    """The zygote's reference server, lent to one job: not this job's to
    reap, nor to kill once Job.release_server has given it back (it said
    it is idle).  A server that did not say so in time -- still at work on
    the GPU for a job that ended early -- is killed, like a reference of
    the job's own, before the answer releases the GPU lock."""

    def kill(self, wait=True):
        if not self.quiet and self.status is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.status = -1       # not ours to reap: the zygote does


class RefServer:
    """The zygote's record of its reference server (reference_server)."""

    def __init__(self, pid, ctl):
        self.pid, self.ctl = pid, ctl
        self.key = None          # the reference it serves, after its first job

    def alive(self):
        try:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
        except ChildProcessError:
            return False
        if pid == 0:
            return True
        # Between jobs it ends only when dropped: say how, for the log.
        sys.stderr.write("kgym_harness: reference server %d ended: %s\n" % (
            self.pid, "signal %d" % os.WTERMSIG(status) if os.WIFSIGNALED(status) else
            "status %d" % os.WEXITSTATUS(status)))
        return False


def remove_tree(path):
    """rm -r, also through directories a candidate made unreadable
    (mkdir with mode 0: its seccomp filter forbids chmod, ours does not);
    what is left would make the worker ask to be replaced.  Gone already
    is fine: the worker empties its directory once it has the answer, and
    may be first."""
    def fix(func, p, exc):
        if isinstance(exc[1], FileNotFoundError):
            return
        try:
            os.chmod(os.path.dirname(p), 0o700)
            if os.path.isdir(p) and not os.path.islink(p):
                os.chmod(p, 0o700)
                shutil.rmtree(p, onerror=lambda *a: None)
            else:
                os.unlink(p)
        except OSError:
            pass
    shutil.rmtree(path, onerror=fix)


def children_of(pid):
    """Pids whose parent is `pid` (from /proc: the comm field may hold
    spaces and parentheses, so the parent is read after the last ')')."""
    kids = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % name, "rb") as f:
                st = f.read()
        except OSError:
            continue
        fields = st[st.rfind(b")") + 2:].split()
        if len(fields) > 1 and int(fields[1]) == pid:
            kids.append(int(name))
    return kids


def reap_descendants(limit_s=10.0):
    """Kill and reap every process still below this one, once both children
    are reaped.  This process is the job's subreaper, so what the
    candidate's compilers left running -- or anything the candidate started
    to outlive the job, in a process group of its own -- is reparented to
    it when its parent dies, and ends here.  Only the compiler profile can
    start processes at all."""
    me, end = os.getpid(), time.monotonic() + limit_s
    while time.monotonic() < end:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return                  # none left
        if pid:
            continue
        kids = children_of(me)
        for k in kids:
            try:
                os.kill(k, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if not kids:
            # A child /proc did not show yet (reparented between the two
            # looks): look again shortly rather than block on it.
            time.sleep(0.01)
            continue
        try:
            os.waitpid(-1, 0)       # one of those just killed: promptly
        except ChildProcessError:
            return


def tail_of(path, n=3000):
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - n))
            return f.read().decode(errors="replace").strip()
    except OSError:
        return ""


# Namespaces of library kernels: a mangled name under one of them is never
# the candidate's, whatever its last component is called.
LIBRARY_NAMESPACES = {"at", "c10", "cub", "thrust", "cutlass", "cute", "torch", "std", "cuda", "cudnn",
                      "cublas", "cublasLt", "flash", "triton", "pytorch_flash", "native", "cusparse",
                      "cufft", "curand", "nvfuser", "xformers", "fbgemm_gpu", "fmha"}


def _mangled_path(name):
    """The components of an Itanium-mangled function name's qualified name
    (_Z3foo..., _ZN2ns3fooE...), or None."""
    if not name.startswith("_Z"):
        return None
    i, nested = 2, name.startswith("_ZN")
    if nested:
        i = 3
        while i < len(name) and name[i] in "KVrRO":    # cv- and ref-qualifiers
            i += 1
    parts = []
    while i < len(name) and name[i].isdigit():
        j = i
        while j < len(name) and name[j].isdigit():
            j += 1
        n = int(name[i:j])
        parts.append(name[j:j + n])
        i = j + n
        if not nested:
            break
    return parts or None


def is_custom_kernel(name, custom):
    """Is the GPU kernel `name` one kernel_code defines?  Triton kernels and
    extern "C" ones keep their identifier; C++ ones are mangled, with the
    identifier as the last component of a path outside the libraries'
    namespaces."""
    if name in custom:
        return True
    path = _mangled_path(name)
    return bool(path) and path[-1] in custom and path[0] not in LIBRARY_NAMESPACES


def judge_profile(profile, custom, backend, kstats, min_share):
    """What the candidate's profiled calls say (DESIGN §8): the metadata
    (KernelGYM's names) and the hack, if any -- a decoy (its own kernels
    never ran), a PyTorch fallback (its kernels a small share of the GPU
    time), or work outside the timed window (more kernel time per call than
    the timed median: another stream, or a forged time)."""
    calls = max(1, int(profile.get("calls") or 1))
    kernels = profile.get("kernels") or []
    total_ns = sum(k["total_ns"] for k in kernels) + int(profile.get("other_ns") or 0)
    mine = [k for k in kernels if is_custom_kernel(k["name"], custom)]
    custom_ns = sum(k["total_ns"] for k in mine)
    table = [{"name": k["name"], "calls": k["calls"], "total_us": k["total_ns"] / 1e3, "grid": k["grid"],
              "block": k["block"], "registers": k["registers"], "shared_bytes": k["shared_bytes"],
              "custom": k in mine} for k in sorted(kernels, key=lambda k: -k["total_ns"])]
    share = custom_ns / total_ns if total_ns > 0 else 0.0
    meta = {"num_custom_kernels": len(mine), "num_total_kernels": len(kernels),
            "custom_kernel_cuda_time_in_profiling_us": custom_ns / 1e3,
            "total_kernel_run_time_in_profiling_us": total_ns / 1e3,
            "custom_kernel_share": round(share, 4), "profiled_calls": calls,
            "custom_kernel_names": custom}
    gpu_ms = total_ns / 1e6 / calls
    hack = None
    if backend in ("triton", "cuda"):
        if custom_ns == 0:
            hack = {"kind": "decoy_kernel",
                    "detail": "none of the kernels kernel_code defines (%s) ran in %d profiled calls; %d other "
                              "kernel(s) did the work" % (", ".join(custom) or "none", calls, len(kernels))}
        elif min_share > 0 and share < min_share:
            hack = {"kind": "pytorch_fallback",
                    "detail": "kernel_code's own kernels took %.1f%% of the GPU kernel time (%.1f of %.1f us), "
                              "below the %.0f%% a %s candidate must do itself; the rest: %s" %
                              (100 * share, custom_ns / 1e3, total_ns / 1e3, 100 * min_share, backend,
                               ", ".join(t["name"][:80] for t in table if not t["custom"])[:600])}
    median = (kstats or {}).get("median_ms")
    if hack is None and isinstance(median, (int, float)) and gpu_ms > 1.5 * median + 0.005:
        hack = {"kind": "timing_mismatch",
                "detail": "the kernels of one call take %.4f ms on the GPU, but the timed median is %.4f ms: "
                          "work ran outside the timed window (another stream or thread) or the time was forged"
                          % (gpu_ms, median)}
    return table, meta, gpu_ms, hack


class Job:
    """One job: fork both children, relay between them, enforce deadlines,
    build the result object (DESIGN §5)."""

    def __init__(self, zygote, request, limits):
        self.z = zygote
        self.req = request
        self.limits = limits
        self.meta = {"backend": request.get("backend"), "device": request.get("device", "cuda"),
                     "torch_version": torch.__version__, "python_version": platform.python_version(),
                     "hardware": zygote.device_name(request.get("device", "cuda")),
                     "harness": "kgym_harness/%d" % PROTOCOL, "zygote_pid": zygote.pid,
                     "zygote_jobs": zygote.jobs}
        self.phase_ms = {}
        self.phase = None          # (name, start) of the phase in progress
        self.job_dir = None
        self.nonce = os.urandom(16).hex()   # the candidate's messages carry it
        self.children = []         # killed, reaped by cleanup()
        self.compiles = False      # the candidate runs compilers (subreaper sweep)
        self.ref_waits = False     # the reference waits for the candidate's CUDA start
        self.server_sock = None    # the job's socket to the zygote's reference server, if lent one
        self.server_key = None     # the reference it serves this job (Job.reference_key)
        self.server_report = {"server": "kept"}   # for the zygote: what became of its server
        self.replacement = None    # the job's own reference, where the lent server failed it
        self.area = None           # (fd, size) of the job's output area
        self.custom = []           # the kernels kernel_code defines
        self.profile = None        # the candidate's profiled calls (KernelProbe)
        self.triton_matter = None  # the candidate's outputs change without its Triton launches?

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

    def run(self):
        t0 = time.monotonic()
        req = self.req
        job = self.job_settings()
        if isinstance(job, dict) and "error" in job:
            return self.fail("VALIDATION_ERROR", job["error"])
        chk = static_check(req["kernel_code"], req.get("backend", "torch"))
        self.phase_ms["static_check"] = (time.monotonic() - t0) * 1e3
        if chk is not None:
            return self.fail(chk[0], chk[1])
        self.custom = custom_kernel_names(req["kernel_code"], req.get("backend", "torch"))
        if job["device"] != "cpu" and req.get("backend") in ("triton", "cuda"):
            if self.limits.get("kprobe_lib"):
                job["profile"] = True
            else:
                self.meta["profile_status"] = "unavailable: no kprobe_lib (a build without CUDA)"
        try:
            ast.parse(req["reference_code"], filename="reference_code")
        except SyntaxError as e:
            return self.fail("VALIDATION_ERROR", "reference_code line %s: SyntaxError: %s" % (e.lineno, e.msg))
        if req.get("backend") in ("triton", "cuda"):
            # The candidate compiles: the compiler profile, or no job (fail closed).
            try:
                job["compiler_profile"] = self.z.compiler_profile(req["backend"])
            except SandboxError as e:
                return self.fail("SYSTEM_ERROR", str(e))
            if req["backend"] == "cuda" and job["device"] != "cpu" and \
                    "nvcc" not in job["compiler_profile"]["programs"]:
                # The machine's fault, not the candidate's COMPILATION_ERROR.
                return self.fail("SYSTEM_ERROR", "backend 'cuda' needs the CUDA toolkit's nvcc, and this worker "
                                 "has none (CUDA_HOME, nvcc on the PATH, or /usr/local/cuda)")
        self.job_dir = os.path.join(os.getcwd(), "job-%d-%d" % (os.getpid(), self.z.jobs))
        os.mkdir(self.job_dir, 0o700)
        return self.supervise(job, self.job_dir)

    def cleanup(self):
        """After the answer is sent (the GPU lock goes with it): wait for the
        children's end, sweep what their compilers left, remove the job's
        files."""
        for c in self.children:
            c.reap()
        if self.compiles:
            reap_descendants()
        if self.job_dir is not None:
            remove_tree(self.job_dir)

    def job_settings(self):
        r = self.req
        for k in ("reference_code", "kernel_code"):
            if not isinstance(r.get(k), str):
                return {"error": "%s: expected a string" % k}
        base = str(r.get("seed", "")) or str(int.from_bytes(os.urandom(8), "little"))
        n = max(MIN_CORRECT_TRIALS, int(r.get("num_correct_trials") or MIN_CORRECT_TRIALS))
        device = r.get("device", "cuda")
        job = {"reference_code": r["reference_code"], "kernel_code": r["kernel_code"],
               "entry_point": r.get("entry_point") or "Model", "device": "cpu" if device == "cpu" else "cuda",
               "reference_backend": r.get("reference_backend", "eager"), "seed_base": base,
               "backend": r.get("backend", "torch"),
               "seeds": [derive_seed(base, "trial", i) for i in range(n)],
               "init_seed": derive_seed(base, "init"),
               "perf_seed": str(r.get("perf_seed") or base),
               "num_perf_trials": int(r.get("num_perf_trials") or 100), "num_warmup": int(r.get("num_warmup", 3)),
               "max_timing_ms": float(r.get("max_timing_ms") or self.limits.get("max_timing_ms", 10000)),
               "timing_rel_precision": float(r.get("timing_rel_precision") or 0.005)}
        for k in ("atol", "rtol"):
            if isinstance(r.get(k), (int, float)) and not isinstance(r.get(k), bool):
                job[k] = float(r[k])
        if not job["entry_point"].isidentifier():
            return {"error": "entry_point: expected a Python identifier"}
        return job

    def supervise(self, job, job_dir):
        lim = self.limits
        size = int(lim.get("max_output_bytes", 4 << 30))
        self.compiles = compiles = job.get("compiler_profile") is not None
        if compiles:
            # Whatever the candidate's compilers leave behind -- in a process
            # group of their own, as ninja puts them -- becomes ours when
            # their parent dies, and dies with the job (reap_descendants).
            ctypes.CDLL(None).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        try:
            # Never executable (Linux >= 6.3): the candidate holds it read-write,
            # and Landlock does not see memfds, so exec of /proc/self/fd/N
            # would run whatever it wrote there.
            area_fd = os.memfd_create("kgym-outputs", os.MFD_ALLOW_SEALING | os.MFD_CLOEXEC | MFD_NOEXEC_SEAL)
        except OSError:
            area_fd = os.memfd_create("kgym-outputs", os.MFD_ALLOW_SEALING | os.MFD_CLOEXEC)
        try:
            os.ftruncate(area_fd, size)
            fcntl.fcntl(area_fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL)
            # Starting a CUDA context is serialised in the driver (~0.15 s
            # each on an H200: 8 at once, 4 jobs' children, took 1.2 s
            # apiece).  A compiling candidate's start is the critical path;
            # its reference starts CUDA once the candidate has, and is ready
            # while the candidate's JIT or nvcc runs on the CPU.  (The same
            # on a CPU, where it costs the candidate's few ms of set-up.)
            self.ref_waits = compiles
            ref = self.lend_server(job, area_fd, size, job_dir)
            if ref is None:
                self.meta["reference_process"] = "per_job"
                ref = self.fork("reference", reference_child, area_fd, size,
                                dict(job, wait_for_start=self.ref_waits), job_dir)
            try:
                cand = self.fork("candidate", candidate_child, area_fd, size, dict(job, nonce=self.nonce),
                                 job_dir)
            except BaseException:
                ref.kill()
                raise
            self.area = (area_fd, size)
            try:
                return self.drive(ref, cand, job)
            finally:
                if isinstance(ref, ServerChild):
                    # Before the answer lets the GPU go: the server says it
                    # is idle, or it is killed like a job's own reference.
                    self.release_server(1.0)
                    ref.quiet = self.server_report.get("server") == "ok"
                ref.kill(wait=False)
                cand.kill(wait=False)
                self.children = [ref, cand]
                if self.replacement is not None:
                    self.replacement.kill(wait=False)
                    self.children.append(self.replacement)
        finally:
            os.close(area_fd)

    def reference_key(self, job):
        """What a reference server must have been set up and loaded with to
        serve this job: the same code, entry point, device and backend
        under the same limits."""
        what = [job["reference_code"], job["entry_point"], job["device"], job.get("reference_backend"),
                sorted(self.limits.items())]
        return hashlib.sha256(json.dumps(what, default=str).encode()).hexdigest()

    def lend_server(self, job, area_fd, size, job_dir):
        """The zygote's reference server as this job's reference, if it is
        free for this reference (a Child), else None: the job forks its own,
        and the zygote replaces a server bound to another reference."""
        srv = self.z.ref_server
        key = self.reference_key(job)
        if srv is None:
            return None
        if srv.key not in (None, key):
            self.server_report = {"server": "drop"}
            return None
        zs, cs = socket.socketpair()
        try:
            socket.send_fds(srv.ctl, [b"j"], [cs.fileno(), area_fd])
            # The reference needs neither the candidate's code nor its compilers.
            ref_job = {k: v for k, v in job.items() if k not in ("kernel_code", "compiler_profile")}
            fresh = srv.key is None
            send_msg(zs, {"type": "job", "key": key, "area_size": size, "job_dir": job_dir, "limits": self.limits,
                          "job": dict(ref_job, wait_for_start=self.ref_waits and fresh)})
        except OSError:
            zs.close()
            self.server_report = {"server": "drop"}
            return None
        finally:
            cs.close()
        if not fresh:
            self.ref_waits = False     # its CUDA is up already
        self.server_sock, self.server_key = zs, key
        self.server_report = {"server": "drop"}      # until release_server says otherwise
        self.meta["reference_process"] = "new_server" if fresh else "reused"
        return ServerChild("reference", srv.pid, zs)

    def release_server(self, timeout):
        """Tell the lent server the job is over and wait (`timeout` s at
        most) until it says nothing of the job runs any more; else the
        zygote drops it."""
        sock, self.server_sock = self.server_sock, None
        if sock is None:
            return
        try:
            send_msg(sock, {"type": "done"})
            end = time.monotonic() + timeout
            while True:
                left = end - time.monotonic()
                if left <= 0 or not select.select([sock], [], [], left)[0]:
                    break
                msg = recv_msg(sock)
                if msg is None:
                    break
                if msg.get("type") == "idle":
                    self.server_report = {"server": "ok", "key": self.server_key}
                    break
        except (OSError, ValueError):
            pass
        sock.close()

    def fork(self, role, fn, area_fd, size, job, job_dir):
        zs, cs = socket.socketpair()
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                zs.close()
                fn(cs, area_fd, size, job, self.limits, job_dir, self.z.sandbox_lib)
            except BaseException:  # noqa: BLE001 - never return into the zygote's loop
                code = 70
                try:
                    traceback.print_exc()
                except BaseException:  # noqa: BLE001
                    pass
            os._exit(code)
        cs.close()
        return Child(role, pid, zs)

    def drive(self, ref, cand, job):
        """The job's state machine: events from both children, deadlines."""
        lim, req = self.limits, self.req
        now = time.monotonic
        t_start = now()
        total = float(req.get("timeout_s") or 0)
        end_total = t_start + total if total > 0 else None
        phase, phase_end = "compile", t_start + float(lim.get("compile_timeout", 50))
        phase_start = t_start
        self.phase = (phase, phase_start)
        compiled = False
        ref_ready = None
        cand_outputs = None
        verdict = None
        kernel_stats = None
        ref_stats = None
        samples = None
        landlock = None
        waiting_for = None     # the next thing to happen, for timeouts' messages
        cached = None          # decided once the reference has named its device
        run_perf = req.get("run_performance", True) is not False
        timed_records = None   # the candidate's outputs of timed calls, checked after timing

        def deadline():
            return min(phase_end, end_total) if end_total else phase_end

        def server_failed(why):
            """Did the lent reference server fail this job before judging
            it?  Then a reference of the job's own takes over -- the same
            seeds, the same expected outputs -- and the zygote drops the
            server: the server is a saving, never a job's failure."""
            nonlocal ref, ref_ready, waiting_for
            if not isinstance(ref, ServerChild) or verdict is not None:
                return False
            self.server_report = {"server": "drop"}
            if self.server_sock is not None:
                self.server_sock.close()
                self.server_sock = None
            self.meta["reference_process"] = "per_job"
            self.meta["reference_server_failed"] = clip(str(why), 300)
            ref = self.replacement = self.fork("reference", reference_child, self.area[0], self.area[1],
                                               dict(job, wait_for_start=False), self.job_dir)
            ref_ready = None
            if waiting_for == "verdict":
                waiting_for = None
            return True

        def enter(name, timeout_key, default, lock=None):
            nonlocal phase, phase_end, phase_start
            self.phase_ms[phase] = (now() - phase_start) * 1e3
            phase, phase_start = name, now()
            self.phase = (name, phase_start)
            phase_end = phase_start + float(lim.get(timeout_key, default))
            self.z.relay_phase(name, lock if job["device"] != "cpu" else None)

        while True:
            socks = [c.sock for c in (ref, cand) if not c.eof]
            wait = deadline() - now()
            if wait <= 0:
                what = {"compile": "loading kernel_code and building %sNew" % job["entry_point"],
                        "correctness": "the correctness trials", "timing": "the timed calls",
                        "checking": "the check of the timed calls' outputs"}[phase]
                self.phase_ms[phase] = (now() - phase_start) * 1e3
                limit = "the task's timeout of %g s" % total if end_total and end_total <= phase_end else \
                    "its deadline of %.0f s" % (phase_end - phase_start)
                r = self.fail("TIMEOUT_ERROR", "the %s phase (%s) ran past %s%s" %
                              (phase, what, limit, "; waiting for " + waiting_for if waiting_for else ""),
                              compiled=compiled)
                return self.finish(r, landlock)
            if not socks:
                return self.finish(self.fail("SYSTEM_ERROR", "both children ended without a verdict",
                                             compiled), landlock)
            rd, _, _ = select.select(socks + [self.z.sock], [], [], wait)
            if self.z.sock in rd:
                # The worker never writes during a job unless it is going away.
                self.z.check_worker_alive()
            for c in (ref, cand):
                if c.sock not in rd:
                    continue
                try:
                    msg = recv_msg(c.sock, 16 << 20)
                except (ValueError, OSError, UnicodeDecodeError) as e:
                    if c is cand:
                        return self.finish(self.fail("SANDBOX_VIOLATION", "the candidate process broke "
                                                     "the harness protocol: %s" % e, compiled), landlock)
                    if server_failed("reference protocol: %s" % e):
                        continue
                    return self.finish(self.fail("SYSTEM_ERROR", "reference protocol: %s" % e, compiled), landlock)
                if msg is None:
                    c.eof = True
                    if c is ref and server_failed("the reference server ended"):
                        continue
                    code, why = c.death()
                    log = tail_of(os.path.join(self.job_dir, c.role, "output.log"))
                    if c is cand and kernel_stats is None:
                        if code == "RUNTIME_ERROR" and compiled:
                            r = self.base("completed", True, False, code, why + ("\n" + log if log else ""))
                        else:
                            r = self.fail(code, why + ("\n" + log if log else ""), compiled)
                        return self.finish(r, landlock)
                    if c is ref:
                        # It only ever ends when told to, after the job.
                        if code == "SANDBOX_VIOLATION":
                            r = self.fail("VALIDATION_ERROR", "the reference made a system call the sandbox "
                                          "forbids (killed by SIGSYS)", compiled)
                        else:
                            r = self.fail("SYSTEM_ERROR", why + ("\n" + log if log else ""), compiled)
                        return self.finish(r, landlock)
                    continue
                t = msg.get("type")
                if c is ref:
                    if t == "error" and msg.get("code") == "SYSTEM_ERROR" and server_failed(msg.get("message")):
                        continue
                    if t == "error":
                        return self.finish(self.fail(msg.get("code") or "SYSTEM_ERROR", msg.get("message"),
                                                     compiled), landlock)
                    if t == "ready":
                        ref_ready = msg
                        self.meta["reference_ms"] = msg.get("ms")
                        self.note_setup("reference", msg.get("setup_ms"))
                        if isinstance(msg.get("device_name"), str):
                            self.meta["hardware"] = msg["device_name"][:200]
                    elif t == "verdict" and verdict is None:
                        verdict = msg
                    elif t == "verdict":
                        samples = msg
                    elif t == "timing":
                        ref_stats = msg.get("stats")
                else:
                    if msg.pop("nonce", None) != self.nonce:
                        r = self.base("completed" if compiled else "failed", compiled, False, "REWARD_HACK",
                                      "a message the harness did not write arrived on the candidate's "
                                      "result channel (type %r): kernel_code wrote into the harness's socket"
                                      % str(t)[:40])
                        self.meta["hack"] = {"kind": "forged_result",
                                             "detail": "a frame without the job's nonce, type %r" % str(t)[:40]}
                        return self.finish(r, landlock)
                    if t == "cuda_up" and not compiled and self.ref_waits:
                        self.ref_waits = False
                        send_msg(ref.sock, {"type": "start"})
                    elif t == "cuda_up" and not compiled:
                        pass
                    elif t == "compiled" and not compiled:
                        compiled = True
                        landlock = msg.get("landlock_abi")
                        self.note_setup("candidate", msg.get("setup_ms"))
                        enter("correctness", "correctness_timeout", 100)
                    elif t == "compile_error":
                        return self.finish(self.fail("COMPILATION_ERROR", msg.get("message")), landlock)
                    elif t == "violation":
                        return self.finish(self.fail("SANDBOX_VIOLATION", msg.get("message"), compiled), landlock)
                    elif t == "runtime_error":
                        return self.finish(self.base("completed", True, False, "RUNTIME_ERROR",
                                                     msg.get("message")), landlock)
                    elif t == "error":
                        return self.finish(self.fail(msg.get("code") or "SYSTEM_ERROR", msg.get("message"),
                                                     compiled), landlock)
                    elif t == "outputs" and compiled and cand_outputs is None:
                        cand_outputs = msg
                        for key in ("first_call_ms", "trials_ms"):
                            if isinstance(msg.get(key), (int, float)):
                                self.meta["candidate_" + key] = msg[key]
                        if msg.get("triton_cache_seed") in ("hit", "missed"):
                            self.meta["triton_cache_seed"] = msg["triton_cache_seed"]
                        if isinstance(msg.get("triton_kernels_matter"), bool):
                            self.triton_matter = msg["triton_kernels_matter"]
                    elif t == "timing" and kernel_stats is None and phase == "timing":
                        kernel_stats = msg.get("stats") or {}
                        self.profile = msg.get("profile")
                        if self.triton_matter is not None:
                            self.profile = dict(self.profile if isinstance(self.profile, dict) else {},
                                                triton_kernels_matter=self.triton_matter)
                        for key in ("timed_ms", "profile_ms"):
                            if isinstance(msg.get(key), (int, float)):
                                self.meta["candidate_" + key] = msg[key]
                        timed_records = msg.get("samples")
                        cached = self.cached_reference_timing()
                        if cached is not None:
                            ref_stats = cached
                        else:
                            send_msg(ref.sock, {"type": "time"})
                            waiting_for = "the reference's timed calls"
                    else:
                        return self.finish(self.fail("SANDBOX_VIOLATION", "the candidate process sent an "
                                                     "unexpected %r message" % t, compiled), landlock)

            # What can happen next, now that these messages are in.
            if ref_ready is not None and cand_outputs is not None and verdict is None and \
                    waiting_for != "verdict":
                send_msg(ref.sock, {"type": "compare", "records": cand_outputs.get("records")})
                waiting_for = "verdict"
            if verdict is not None and waiting_for == "verdict":
                waiting_for = None
                if not verdict["ok"] or not run_perf:
                    return self.finish(self.verdict_result(verdict, None, None, None, None), landlock)
                # Calls whose outputs the candidate keeps even when they are
                # too large to keep them all; otherwise it keeps every call's
                # and the ones to check are drawn after the timing.
                n_calls = max(1, min(job["num_perf_trials"], MIN_TIMING_TRIALS))
                keep = sorted({int.from_bytes(os.urandom(2), "little") % n_calls for _ in range(TIMED_CHECKS)})
                enter("timing", "timing_timeout", 250, lock="exclusive")
                send_msg(cand.sock, {"type": "time", "keep": keep})
                waiting_for = "the candidate's timed calls"
            if kernel_stats is not None and ref_stats is not None and phase == "timing":
                # Both sides are timed: check the timed calls' outputs, then
                # answer (the reference's end waits until after the answer).
                expect = timed_calls_to_check(timed_records)
                # Outputs the reference made before the timing need no
                # forward pass now: the check is a comparison.
                self.meta["timed_outputs_precomputed"] = set(verdict.get("prepared") or []) >= set(expect)
                enter("checking", "correctness_timeout", 100)
                send_msg(ref.sock, {"type": "compare_samples", "records": timed_records, "expect": expect})
                # Meanwhile the candidate's exit, its CUDA context with it,
                # before the GPU lock goes with the answer: nothing it queued
                # may run beside the next timer.
                t_kill = now()
                cand.kill(wait=True)
                cand.eof = True
                self.meta["candidate_exit_ms"] = (now() - t_kill) * 1e3
                waiting_for = "the check of the timed calls' outputs"
            if samples is not None and waiting_for == "the check of the timed calls' outputs":
                if not samples["ok"]:
                    return self.finish(self.verdict_result(verdict, samples, kernel_stats, None, None), landlock)
                return self.finish(self.verdict_result(verdict, samples, kernel_stats, ref_stats, cached), landlock)

    def note_setup(self, role, steps):
        """metadata.<role>_setup_ms: where a child's start went (CUDA, the
        sandbox, CUPTI, loading the code); numbers only, whoever sent them."""
        if isinstance(steps, dict):
            self.meta[role + "_setup_ms"] = {str(k)[:20]: float(v) for k, v in list(steps.items())[:8]
                                             if isinstance(v, (int, float)) and not isinstance(v, bool)}

    def cached_reference_timing(self):
        """The workflow's cached reference timing, if it was measured under
        this worker's torch and device (else we measure it again)."""
        c = self.req.get("reference_timing")
        if not isinstance(c, dict) or not isinstance(c.get("stats"), dict):
            return None
        env = c.get("env") or {}
        if env.get("torch") != torch.__version__ or env.get("device") != self.meta["hardware"]:
            return None
        return c["stats"]

    def verdict_result(self, verdict, samples, kstats, rstats, cached):
        ok = verdict["ok"] and (samples is None or samples["ok"])
        code = verdict.get("code") if not verdict["ok"] else (samples or {}).get("code")
        message = verdict.get("message") if not verdict["ok"] else (samples or {}).get("message")
        r = self.base("completed", True, ok, code if not ok else None, message if not ok else None)
        r["correctness_trials"] = verdict.get("trials", [])
        self.meta["correctness_trials"] = "(%d / %d)" % (verdict.get("passed", 0), verdict.get("judged", 0))
        hack = verdict.get("hack") or (samples or {}).get("hack")
        if hack:
            self.meta["hack"] = hack
        if samples is not None:
            self.meta["timed_outputs_checked"] = samples.get("checked", 0)
        if ok and kstats and isinstance(self.profile, dict):
            ok, r = self.apply_profile(r, kstats)
        if ok and kstats:
            timing = {"kernel": dict(kstats, clock="cpu" if self.req.get("device") == "cpu" else "cuda_events")}
            if self.meta.get("gpu_time_ms") is not None:
                timing["kernel"]["gpu_time_ms"] = self.meta.pop("gpu_time_ms")
            r["kernel_runtime"] = kstats["median_ms"]
            if rstats:
                timing["reference"] = dict(rstats)
                r["reference_runtime"] = rstats["median_ms"]
                if kstats["median_ms"] > 0:
                    r["speedup"] = rstats["median_ms"] / kstats["median_ms"]
            r["timing"] = timing
            self.meta["reference_timing_cached"] = cached is not None
            self.meta["reference_timing_env"] = {"torch": torch.__version__, "device": self.meta["hardware"]}
            if self.req.get("device") == "cpu":
                self.meta["timing_note"] = "CPU timings are informative only (no CUPTI cross-check)"
        return r

    def apply_profile(self, r, kstats):
        """(still correct?, result) after what the candidate's profiled
        calls (CUPTI) and its calls with the Triton launches skipped say."""
        p = self.profile
        self.meta["profile_status"] = str(p.get("status"))[:300]
        hack = None
        if p.get("status") == "ok" and isinstance(p.get("kernels"), list):
            try:
                table, meta, gpu_ms, hack = judge_profile(p, self.custom, self.req.get("backend"), kstats,
                                                          float(self.limits.get("min_custom_share", 0.5)))
            except (KeyError, TypeError, ValueError) as e:
                self.meta["profile_status"] = "unreadable: %s" % e
            else:
                r["profile"] = table[:64]
                self.meta.update(meta)
                self.meta["gpu_time_ms"] = gpu_ms
        if "triton_kernels_matter" in p:
            matter = p["triton_kernels_matter"]
            self.meta["triton_kernels_matter"] = matter
            if matter is False and (hack is None or hack["kind"] == "timing_mismatch"):
                hack = {"kind": "decoy_kernel",
                        "detail": "the outputs are the same with every launch of kernel_code's Triton kernels "
                                  "(%s) skipped: they do not do the work" % ", ".join(self.custom)}
        if hack is None:
            return True, r
        self.meta["hack"] = hack
        r.update(correctness=False, error_code="REWARD_HACK", error_message=clip(hack["detail"]),
                 decoy_kernel=hack["kind"] in ("decoy_kernel", "pytorch_fallback"))
        return False, r

    def finish(self, r, landlock):
        if self.phase is not None:
            name, start = self.phase
            self.phase_ms.setdefault(name, (time.monotonic() - start) * 1e3)
        self.meta["phases_ms"] = self.phase_ms
        self.meta["sandbox"] = {"seccomp": landlock is not None, "landlock_abi": landlock,
                                "candidate_profile": "compilers" if self.req.get("backend") in ("triton", "cuda")
                                else "python"}
        return r


# ------------------------------------------------------------------ the zygote


class Zygote:
    def __init__(self, sock, sandbox_lib, profiles=None):
        self.sock = sock
        self.sandbox_lib = sandbox_lib
        self.pid = os.getpid()
        self.jobs = 0
        self._cpu = None
        self.profiles = profiles or {}     # backend -> compiler_profile(), or the SandboxError
        self.ref_server = None             # RefServer: a reference process kept across jobs
        self.dying = []                    # dropped servers, reaped when they are gone
        self.report_fd = None              # in a supervisor: where it tells the zygote about the server

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
            self.keep_ref_server()
            rd, wr = os.pipe()
            pid = os.fork()
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
        msg = recv_msg(self.sock)
        if msg is None:
            os._exit(0)
        if msg.get("type") != "job":
            return
        if self.report_fd is not None:
            os.write(self.report_fd, b"J")      # a job to answer (take_report)
        request, limits = msg.get("request") or {}, msg.get("limits") or {}
        job = Job(self, request, limits)
        try:
            result = job.run()
        except Exception:  # noqa: BLE001 - the worker gets an answer, whatever happened
            result = {"status": "failed", "compiled": False, "correctness": False,
                      "error_code": "SYSTEM_ERROR",
                      "error_message": clip("the harness failed: " + traceback.format_exc())}
        # seq: the worker takes this answer for the job it sent, and no other.
        send_msg(self.sock, {"type": "result", "seq": msg.get("seq"), "result": result})
        if self.report_fd is not None:
            os.write(self.report_fd, b"A")      # answered (take_report)
        job.cleanup()
        if self.report_fd is not None:
            os.write(self.report_fd, json.dumps(job.server_report).encode())

    def keep_ref_server(self):
        """Before a job: a reference server (reference_server) is there to
        be lent, fresh from this process -- which never holds a task's data
        -- where the last one is gone; dropped ones are reaped."""
        for pid in list(self.dying):
            try:
                if os.waitpid(pid, os.WNOHANG)[0] == 0:
                    continue
            except ChildProcessError:
                pass
            self.dying.remove(pid)
        if self.ref_server is not None and not self.ref_server.alive():
            self.ref_server.ctl.close()
            self.ref_server = None
        if self.ref_server is None and self.sandbox_lib:
            a, b = socket.socketpair()
            pid = os.fork()
            if pid == 0:
                try:
                    a.close()
                    reference_server(b, self.sandbox_lib)
                finally:
                    os._exit(70)
            b.close()
            self.ref_server = RefServer(pid, a)

    def take_report(self, rd):
        """After a job: whether its supervisor took a job ("J") and answered
        it ("A"), then its word on the reference server -- kept (not lent),
        ok and bound to a reference, or to be dropped (also when the
        supervisor said nothing: it died).  Returns (took, answered)."""
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
        srv = self.ref_server
        if srv is None:
            return took, answered
        if report.get("server") == "ok" and isinstance(report.get("key"), str):
            srv.key = report["key"]
        elif report.get("server") != "kept":
            try:
                os.kill(srv.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            srv.ctl.close()
            self.dying.append(srv.pid)
            self.ref_server = None
        return took, answered


def preload(device_hint):
    """Import torch (and triton where a GPU is visible) without touching
    CUDA.  Returns the hello's facts."""
    global torch, triton
    t0 = time.monotonic()
    import torch as _torch
    torch = _torch
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
    pid = os.fork()
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


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--zygote", action="store_true")
    ap.add_argument("--once", action="store_true")
    ap.add_argument("--check", metavar="FILE")
    ap.add_argument("--backend", default="torch")
    ap.add_argument("--fd", type=int, default=3)
    ap.add_argument("--sandbox-lib", default="")
    ap.add_argument("--gpu-lock", metavar="FILE", default="",
                    help="--once: hold FILE's flock as kgymd holds a GPU's lock (the baseline's timing discipline)")
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
    if args.zygote:
        sock = socket.socket(fileno=args.fd)
        try:
            facts = preload(gpu_visible)
        except BaseException as e:  # noqa: BLE001 - tell the worker why, then go
            send_msg(sock, {"type": "fatal", "message": "cannot import torch with %s: %s: %s" %
                            (sys.executable, type(e).__name__, e)})
            return 1
        hello = dict(facts, type="hello", protocol=PROTOCOL, pid=os.getpid(), python=platform.python_version(),
                     executable=sys.executable,
                     ready_ms=(time.time() - args.started_at) * 1e3 if args.started_at else None)
        # Triton and load_inline jobs run only on GPU workers: find their
        # compilers once, here, rather than in every job's supervisor.
        profiles = {}
        if gpu_visible:
            for backend in ("triton", "cuda"):
                try:
                    profiles[backend] = compiler_profile(backend)
                except SandboxError as e:
                    profiles[backend] = e
            if triton is not None and isinstance(profiles["triton"], dict):
                t0 = time.monotonic()
                seed = build_triton_seed(os.path.join(os.getcwd(), "triton-seed"), profiles["triton"])
                profiles["triton"]["cache_seed"] = seed
                hello.update(triton_seed=sorted(seed or ()), triton_seed_ms=(time.monotonic() - t0) * 1e3)
        send_msg(sock, hello)
        Zygote(sock, args.sandbox_lib, profiles).serve()
        return 0

    if args.once:
        # The benchmark's baseline: a fresh process for one task, doing what
        # a zygote's job does (the same code path, the same sandbox).
        msg = json.loads(sys.stdin.read())
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
        job = Job(z, msg.get("request") or {}, msg.get("limits") or {})
        result = job.run()
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
