"""kgym_common.py -- what every process of a KernelBench-format job shares.

Framing (a 4-byte big-endian length, then UTF-8 JSON), the sandbox entry
(libkgym_sandbox.so), the compiler profile, the set-up every job process
does before it runs a line of task code (child_setup), loading task code
as a module, and the two kinds of memory the judge shares with an
executor: the control block (go/done words spun on by both sides) and the
buffer areas (a memfd on a CPU, a CUDA allocation of the judge's own,
opened through CUDA IPC, on a GPU).

Nothing here knows a seed, an expected output or a verdict: this module
is in every executor's address space, the candidate's included.  The
judge's code lives in kgym_judge.py, which no executor imports.
"""

import base64
import ctypes
import errno
import fcntl
import faulthandler
import io
import json
import linecache
import math
import mmap
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import time
import traceback
import types

PROTOCOL = 1
MAX_FRAME = 64 << 20
MAX_MESSAGE_CHARS = 16000      # error messages a model reads: keep them readable
MIN_CORRECT_TRIALS = 5         # kgymd-protocol(7), RESULTS
MIN_TIMING_TRIALS = 10
ALIGN = 64
PR_SET_CHILD_SUBREAPER = 36
MFD_NOEXEC_SEAL = 0x8          # Linux >= 6.3; older kernels refuse it (EINVAL)



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


# An absolute path: a slash not inside a word or a number (a colon may
# precede it: PATH=/a:/b), then names; one of two names or more after a
# digit (a repr()'d /proc/self/cmdline has "\\x00" before each argument;
# "1/2" stays); or one under a top-level directory of a host's after a
# compiler's -I or -L, or whatever else is not a letter.
_ABSOLUTE_PATH = re.compile(r"(?<![\w./)\]])/(?:[\w.+@-]+/)*[\w.+@-]+|"
                            r"(?<=\d)/(?:[\w.+@-]+/)+[\w.+@-]+|"
                            r"(?:(?<=-[IL])|(?<![A-Za-z_./]))/(?:usr|opt|tmp|home|root|etc|var|lib\w*|proc|srv|run|"
                            r"sys|dev|work|mnt|media|snap|nix|boot|s?bin)(?:/[\w.+@-]+)+")


def scrub_for_client(value, job_dir=None):
    """What reaches a client names no place of the host and can be carried
    (kgymd-protocol(7): nothing of the host in error text).  In every
    string of `value`: the job's own directory becomes "." and any other
    absolute path -- the harness's, torch's, Python's, in a traceback or an
    exception's text -- keeps only its last name ("\u2026/functional.py":
    enough to read a traceback by); a NUL or a lone surrogate, which the
    result's way to the worker (JSON read by jansson) cannot carry, becomes
    U+FFFD -- else a candidate's exception text could turn its own failure
    into kgymd's SYSTEM_ERROR.  This keeps kgymd's own paths out of error
    text; it is no defence against a candidate that reads what its sandbox
    lets it read and encodes it (ARCHITECTURE.md, "What it does not
    guarantee yet")."""
    if isinstance(value, str):
        if job_dir:
            value = value.replace(job_dir.rstrip("/") + "/", "").replace(job_dir.rstrip("/"), ".")
        value = _ABSOLUTE_PATH.sub(lambda m: "\u2026/" + m.group(0).rsplit("/", 1)[1], value)
        return value.replace("\x00", "\ufffd").encode("utf-8", "replace").decode("utf-8")
    if isinstance(value, dict):
        return {scrub_for_client(k, job_dir): scrub_for_client(v, job_dir) for k, v in value.items()}
    if isinstance(value, list):
        return [scrub_for_client(v, job_dir) for v in value]
    return value


def finite(x):
    """JSON has no NaN or Inf: those become null."""
    return x if isinstance(x, (int, float)) and math.isfinite(x) else None

# ------------------------------------------------------------------ seeds

class SandboxError(Exception):
    pass


SANDBOX_EXEC = 0x1             # KGYM_PY_SANDBOX_EXEC of sandbox_python.c: the compiler profile
SANDBOX_PRIVATE_PROC = 0x2     # KGYM_PY_SANDBOX_PRIVATE_PROC: /proc without the other processes


def enter_sandbox(lib_path, work_dir, gpu, limits, ro_paths, exec_paths=None, private_proc=False):
    """rlimits, Landlock and seccomp for this process, through
    libkgym_sandbox.so (the sandbox library, lib/sandbox.c).  With exec_paths (the
    candidate of a triton or cuda job only), the compiler profile: those
    programs, and nothing else, may be executed, under the same filter and
    Landlock domain.  private_proc: /proc without the other processes'
    directories (their command lines and environments name the host's
    files).  Returns the Landlock ABI in force (0: none); raises
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
            (SANDBOX_EXEC if exec_paths else 0) | (SANDBOX_PRIVATE_PROC if private_proc else 0),
            ctypes.byref(abi), err, len(err), exe)
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
        triton = sys.modules.get("triton")
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

def load_module(source, name):
    """Run source as a fresh module; its namespace (never in sys.modules)."""
    mod = types.ModuleType(name)
    mod.__dict__["__builtins__"] = __builtins__
    # Tracebacks then quote the task's own lines.
    linecache.cache[name] = (len(source), None, source.splitlines(True), name)
    code = compile(source, name, "exec")
    exec(code, mod.__dict__)  # noqa: S102 - this is the point of the harness
    return mod.__dict__


def internal_error(what):
    """The message a client gets for a failure of kgymd's own code: the
    exception's type and text, never a traceback (its paths are the host's);
    the traceback goes to this process's standard error (the worker's log,
    or the job's output log)."""
    et, ev, _ = sys.exc_info()
    try:
        traceback.print_exc()
    except Exception:  # noqa: BLE001 - logging is best effort
        pass
    return clip("%s failed: %s: %s" % (what, et.__name__ if et else "?", ev))


def wait_until(value, enough, until, step=0.1, clock=time.monotonic, sleep=time.sleep):
    """Poll value() every `step` s until enough(it) or the clock would pass
    `until`: (the last value, the seconds waited)."""
    t0 = clock()
    v = value()
    while not enough(v) and clock() + step <= until:
        sleep(step)
        v = value()
    return v, clock() - t0


def out_of_memory(e):
    """Is this exception a failed allocation?  (torch's CUDA one is
    OutOfMemoryError; its CPU allocator raises RuntimeError "can't allocate
    memory"; Python's own is MemoryError; mmap's is OSError ENOMEM.)"""
    text = str(e)
    return isinstance(e, MemoryError) or type(e).__name__ == "OutOfMemoryError" or \
        (isinstance(e, OSError) and e.errno == errno.ENOMEM) or \
        "can't allocate memory" in text or "CUDA out of memory" in text


def inputs_size(tensors):
    """'inputs of 6.0 GiB': what a problem's inputs take, for messages."""
    n = sum(t.numel() * t.element_size() for t in (tensors or []) if hasattr(t, "element_size"))
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return "inputs of %.1f %s" % (n / size, unit)
    return "inputs of %d bytes" % n


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
    import torch
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
        # CUDA must be up before the filter (ARCHITECTURE.md, "Processes").
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
                f.write(base64.b64decode(data) if isinstance(data, str) else data)
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
                ("compile_timeout", 180), ("correctness_timeout", 100), ("timing_timeout", 250)))))
    ro_paths = interpreter_paths(job_dir)
    pch = (profile or {}).get("pch")
    if pch and pch.get("variants") and os.path.isdir(pch.get("root") or ""):
        # load_inline's precompiled prologue (kgym_inline.py): read-only,
        # so that no candidate changes what the next one compiles with.
        ro_paths.append(os.path.realpath(pch["root"]))
    t0 = time.monotonic()
    # /proc without the other processes: on a CPU for now.  On a GPU the
    # driver's and torch's reads of /proc under it have not been run yet,
    # and a compiler the profile starts is a process of its own, whose
    # /proc/PID the rule does not cover (limits.private_proc overrides).
    private_proc = limits.get("private_proc", not gpu) is True and not exec_paths
    abi = enter_sandbox(lib, d, gpu, limits, ro_paths, exec_paths, private_proc)
    SETUP_MS["sandbox"] = (time.monotonic() - t0) * 1e3
    return abi


# ------------------------------------------------------------------ tensors


def dtype_name(dt):
    return str(dt).replace("torch.", "")


def dtype_of(name):
    import torch
    dt = getattr(torch, name, None) if isinstance(name, str) else None
    return dt if isinstance(dt, torch.dtype) else None


MAX_OUTPUT_ITEMS = 4096


def flatten_outputs(out, what="output"):
    """A model's return value as a flat list of tensors (Python numbers
    become 0-d tensors).  Anything else -- a list-like object, None -- is a
    TypeError naming where it is.

    A loop, not a recursive closure: a nested function that calls itself
    is a reference cycle holding the list, so every call's outputs stayed
    alive until the garbage collector ran (off during calls) -- the caching
    allocator could not reuse their memory and took new blocks mid-call,
    and an arena (kgym_executor.OutputArena) filled up."""
    import torch
    flat = []
    todo = [(out, "")]
    seen = 0
    while todo:
        x, path = todo.pop()
        seen += 1
        if seen > MAX_OUTPUT_ITEMS:
            # A list that holds itself would never end.
            raise TypeError("%s holds more than %d items and lists" % (what, MAX_OUTPUT_ITEMS))
        if isinstance(x, torch.Tensor):
            flat.append(x)
        elif type(x) in (tuple, list):
            todo.extend(reversed([(y, "%s[%d]" % (path, i)) for i, y in enumerate(x)]))
        elif type(x) in (bool, int, float):
            flat.append(torch.tensor(x))
        else:
            raise TypeError("%s%s is a %s, not a tensor" % (what, path, type(x).__name__))
    return flat

def unix_socket(fd):
    """A socket object for an inherited or received AF_UNIX stream
    descriptor: family, type and protocol given, so that Python asks the
    kernel nothing (getsockname is not in the sandbox's filter)."""
    import socket
    return socket.socket(socket.AF_UNIX, socket.SOCK_STREAM, 0, fileno=fd)

# ------------------------------------------------------------------ the control block
#
# A few pages of shared memory per executor (a memfd the supervisor makes
# and both the judge and that executor map), of 64-bit words:
#   GO      the judge writes k to start call k (the executor spins on it);
#   DONE    the executor writes k once call k's outputs are in the judge's
#           memory and its GPU work is over (the judge spins on it);
#   STATUS  written before DONE: 0 the call went through, 1 it failed (the
#           executor then says why on its socket);
#   OUTS..  from word CTL_OUTS, one per output of each call of a round (call
#           j's output i at CTL_OUTS + j * n_outputs + i), written before
#           DONE: where that output lies in the executor's arena (a byte
#           offset; kgym_arena / arena.c), or OUT_IN_SLOT where the
#           executor copied it into its output area instead.  The judge
#           checks every offset against the arena's bounds: it is the
#           candidate's word.
# Aligned 8-byte stores and loads are atomic on the machines we run on, and
# each word has one writer.  Spinning keeps the handshake in microseconds;
# the executor's socket carries everything else.

CTL_GO, CTL_DONE, CTL_STATUS = 0, 1, 2
CTL_OUTS = 8
CTL_BYTES = 64 << 10
OUT_IN_SLOT = (1 << 64) - 1


_LIBC = None


def map_shared(fd, size):
    """fd's first `size` bytes mapped shared and writable, as a buffer
    (torch.frombuffer, memoryview) that unmaps itself once its last view
    is gone.  Unlike mmap.mmap, it keeps no duplicate of fd: once the
    caller closes fd, nothing in the process names the memory as a file.
    In an executor that matters: a duplicate is a /proc/self/fd/N that
    the candidate's code could open again (open() and torch.from_file
    only, no ctypes) and map writable -- the judge's output area and the
    control page, whose DONE stops the judge's clock."""
    global _LIBC
    if _LIBC is None:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.mmap.restype = ctypes.c_void_p
        libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                              ctypes.c_long]
        libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        _LIBC = libc
    addr = _LIBC.mmap(None, size, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_SHARED, fd, 0)
    if addr is None or addr == ctypes.c_void_p(-1).value:
        e = ctypes.get_errno()
        raise OSError(e, "mmap: %s" % os.strerror(e))

    class Mapping(ctypes.c_char * size):
        # Views (tensors, memoryviews) hold the buffer: the last one gone
        # takes the mapping with it.
        def __del__(self, _munmap=_LIBC.munmap, _addr=addr, _size=size):
            _munmap(_addr, _size)

    return Mapping.from_address(addr)


class ControlBlock:
    def __init__(self, fd):
        self.mm = map_shared(fd, CTL_BYTES)
        self.words = memoryview(self.mm).cast("B").cast("Q")

    def wait(self, word, value, deadline, patient=False):
        """Spin until words[word] == value; False at the deadline.  Patient
        waiters (an executor between calls) sleep after 50 ms of spinning,
        so that idle processes do not hold a CPU."""
        w = self.words
        n = 0
        t_sleep = time.monotonic() + 0.05 if patient else None
        while w[word] != value:
            n += 1
            if n & 1023 == 0:
                now = time.monotonic()
                if now > deadline:
                    return False
                if t_sleep is not None and now > t_sleep:
                    time.sleep(0.0005)
                else:
                    os.sched_yield()
        return True


def control_memfd():
    fd = os.memfd_create("kgym-control", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    os.ftruncate(fd, CTL_BYTES)
    seal_memfd(fd)
    return fd


def seal_memfd(fd):
    """Fix a shared memfd's size for good.  Every process it is lent to
    can reach it as /proc/self/fd/N; unsealed, a candidate could shrink it
    and make the judge's next read of its own mapping fault (SIGBUS), a
    wrong answer ending as kgymd's SYSTEM_ERROR.  F_SEAL_SEAL: no one adds
    a seal of their own (a write seal would stop the judge) after this."""
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL)

# ------------------------------------------------------------------ buffer areas
#
# An area is one allocation holding tensors at aligned offsets; the judge
# owns it and describes it to an executor as
#   {"kind": "memfd"|"cuda", "size": bytes, "tensors": [{"dtype", "shape", "offset"}]}
# and its descriptor travels with the description (SCM_RIGHTS).  A CPU area
# is a memfd; a
# GPU area is memory the judge allocated with the driver itself -- never
# from torch's caching allocator, whose blocks may hold other tensors of
# the judge's -- exported as a file descriptor (CudaDriver).  An executor maps exactly
# the areas it is given: the candidate's are the inputs and its own
# outputs, never the reference's outputs.

AREA_ALIGN = 256


def area_layout(specs):
    """[(dtype, shape)] -> (offsets, total bytes)."""
    import torch
    offs, cur = [], 0
    for dt, shape in specs:
        cur = (cur + AREA_ALIGN - 1) // AREA_ALIGN * AREA_ALIGN
        offs.append(cur)
        cur += math.prod(shape) * torch.empty((), dtype=dt).element_size()
    return offs, max(cur, AREA_ALIGN)


class _Location(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]


class _AllocFlags(ctypes.Structure):
    _fields_ = [("compressionType", ctypes.c_ubyte), ("gpuDirectRDMACapable", ctypes.c_ubyte),
                ("usage", ctypes.c_ushort), ("reserved", ctypes.c_ubyte * 4)]


class _AllocProp(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("requestedHandleTypes", ctypes.c_int), ("location", _Location),
                ("win32HandleMetaData", ctypes.c_void_p), ("allocFlags", _AllocFlags)]


class _AccessDesc(ctypes.Structure):
    _fields_ = [("location", _Location), ("flags", ctypes.c_int)]


_POSIX_FD = 1                  # CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
_PINNED = 1                    # CU_MEM_ALLOCATION_TYPE_PINNED
_ON_DEVICE = 1                 # CU_MEM_LOCATION_TYPE_DEVICE
_READ_WRITE = 3                # CU_MEM_ACCESS_FLAGS_PROT_READWRITE


class CudaDriver:
    """Device memory shared between processes by file descriptor (the
    driver's virtual memory API): the judge creates an allocation of its
    own -- never a block of torch's caching allocator, which may hold other
    tensors of the judge's -- and exports it as a descriptor, which travels
    like a memfd (SCM_RIGHTS); an executor imports it and maps it into its
    own address space.  Legacy CUDA IPC handles are not used: they need
    the processes to see each other's /proc, which the sandbox forbids."""

    def __init__(self):
        self.lib = ctypes.CDLL("libcuda.so.1")
        dev = ctypes.c_int()
        self.check(self.lib.cuCtxGetDevice(ctypes.byref(dev)), "cuCtxGetDevice")
        self.prop = _AllocProp(type=_PINNED, requestedHandleTypes=_POSIX_FD, location=_Location(_ON_DEVICE, dev.value))
        gran = ctypes.c_size_t()
        self.check(self.lib.cuMemGetAllocationGranularity(ctypes.byref(gran), ctypes.byref(self.prop), 0),
                   "cuMemGetAllocationGranularity")
        self.granularity = gran.value
        self.access = _AccessDesc(location=_Location(_ON_DEVICE, dev.value), flags=_READ_WRITE)
        self.mapped = []            # (pointer, size, allocation handle) of every mapping made here

    def check(self, rc, what):
        if rc != 0:
            name = ctypes.c_char_p()
            self.lib.cuGetErrorName(rc, ctypes.byref(name))
            raise RuntimeError("%s: CUDA error %d (%s)" % (what, rc, (name.value or b"?").decode()))

    def rounded(self, nbytes):
        g = self.granularity
        return max(g, (nbytes + g - 1) // g * g)

    def map(self, handle, size):
        ptr = ctypes.c_uint64()
        self.check(self.lib.cuMemAddressReserve(ctypes.byref(ptr), ctypes.c_size_t(size), ctypes.c_size_t(0),
                                                ctypes.c_uint64(0), ctypes.c_ulonglong(0)), "cuMemAddressReserve")
        self.check(self.lib.cuMemMap(ptr, ctypes.c_size_t(size), ctypes.c_size_t(0), ctypes.c_uint64(handle),
                                     ctypes.c_ulonglong(0)), "cuMemMap")
        self.check(self.lib.cuMemSetAccess(ptr, ctypes.c_size_t(size), ctypes.byref(self.access),
                                           ctypes.c_size_t(1)), "cuMemSetAccess")
        self.mapped.append((ptr.value, size, handle))
        return ptr.value

    def release_all(self):
        """Unmap and release every allocation mapped here (a process kept
        across jobs, once no tensor views them and the device is idle)."""
        for ptr, size, handle in self.mapped:
            self.lib.cuMemUnmap(ctypes.c_uint64(ptr), ctypes.c_size_t(size))
            self.lib.cuMemAddressFree(ctypes.c_uint64(ptr), ctypes.c_size_t(size))
            self.lib.cuMemRelease(ctypes.c_uint64(handle))
        self.mapped = []

    def create(self, nbytes):
        """A new allocation: (device pointer, exported descriptor, size)."""
        size = self.rounded(nbytes)
        h = ctypes.c_uint64()
        self.check(self.lib.cuMemCreate(ctypes.byref(h), ctypes.c_size_t(size), ctypes.byref(self.prop),
                                        ctypes.c_ulonglong(0)), "cuMemCreate")
        fd = ctypes.c_int(-1)
        self.check(self.lib.cuMemExportToShareableHandle(ctypes.byref(fd), h, ctypes.c_int(_POSIX_FD),
                                                         ctypes.c_ulonglong(0)), "cuMemExportToShareableHandle")
        return self.map(h.value, size), fd.value, size

    def open(self, fd, size):
        """An executor's mapping of an allocation the judge exported."""
        h = ctypes.c_uint64()
        self.check(self.lib.cuMemImportFromShareableHandle(ctypes.byref(h), ctypes.c_void_p(fd),
                                                           ctypes.c_int(_POSIX_FD)), "cuMemImportFromShareableHandle")
        return self.map(h.value, self.rounded(size))


class _CudaArray:
    """A raw device range as __cuda_array_interface__, for torch.as_tensor."""

    def __init__(self, ptr, nbytes):
        self.__cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1", "data": (ptr, False),
                                         "version": 2, "strides": None}


def device_bytes(ptr, nbytes):
    """A raw device range as a uint8 tensor (a view: no copy, no ownership)."""
    import torch
    return torch.as_tensor(_CudaArray(ptr, nbytes), device="cuda")


def tensors_of_area(desc, base, mm=None):
    """The tensors an area description names, as views of the mapped area:
    `base` a device pointer (cuda) or the mmap (memfd)."""
    import torch
    out = []
    for t in desc["tensors"]:
        dt = dtype_of(t["dtype"])
        shape = [int(x) for x in t["shape"]]
        numel = math.prod(shape)
        nbytes = numel * torch.empty((), dtype=dt).element_size()
        off = int(t["offset"])
        if off < 0 or off + nbytes > int(desc["size"]):
            raise ValueError("a tensor lies outside its area")
        if numel == 0:
            out.append(torch.empty(shape, dtype=dt, device="cuda" if desc["kind"] == "cuda" else "cpu"))
        elif desc["kind"] == "cuda":
            out.append(device_bytes(base + off, nbytes).view(dt).view(shape))
        else:
            out.append(torch.frombuffer(mm, dtype=dt, count=numel, offset=off).view(shape))
    return out


def map_area(desc, fd=None, cuda=None):
    """An executor's view of an area it was given: (tensors, keepalive)."""
    if desc.get("kind") == "cuda":
        return tensors_of_area(desc, cuda.open(fd, int(desc["size"]))), None
    mm = map_shared(fd, int(desc["size"]))
    return tensors_of_area(desc, None, mm), mm
