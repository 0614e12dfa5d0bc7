"""kgym_inline.py -- load_inline candidates: the torch prologue precompiled,
and compiler errors that point at kernel_code's own lines.

torch.utils.cpp_extension.load_inline writes main.cpp as
"#include <torch/extension.h>", the candidate's cpp_sources, then a
PYBIND11_MODULE block, and compiles it with flags of its own plus the
candidate's extra_cflags.  Most of that compile is the host compiler
parsing torch's and pybind11's headers, the same for every candidate.

Two halves, two levels of trust:

- build_pch() runs in a trusted process (the zygote at start-up, or the
  --once harness before it forks a job), never in a job: it asks torch for
  the exact flags load_inline gives main.cpp (less TORCH_EXTENSION_NAME,
  the one flag that names the candidate's module), and compiles a header
  holding only "#include <torch/extension.h>" with them into a gcc
  precompiled header (.gch), one per variant (with or without CUDA's
  include directory; an -O level).  Its directory name is a hash of torch's
  version and place, the compiler, the flags and every header the
  prologue read (their size and mtime): nothing a candidate controls.  It
  is built in a temporary directory and renamed into place under a lock,
  so a reader sees a whole one or none.  A candidate's Landlock domain has
  it read-only (kgym_common.child_setup), so no job can change what the
  next one compiles with.

- install() runs in the candidate's process, inside its sandbox, before
  kernel_code: it wraps load_inline so that, when the candidate's flags
  leave the prologue's meaning unchanged, extra_cflags gains
  "-include <dir>/kgym_prologue.h -Winvalid-pch".  main.cpp's first line
  includes the same header, so the translation unit is the same text;
  gcc uses the .gch when it is valid for the command line (it checks the
  macros and options that matter and warns, never fails, when it is not)
  and parses the header otherwise.  Sources, functions and every other
  argument go to load_inline untouched.  A build error is rewritten by
  map_build_error(): the compiler's diagnostics with main.cpp's and
  cuda.cu's lines turned into kernel_code's, the build commands and host
  paths left out.  The candidate could undo the wrapper: it would lose
  the speed-up, nothing else.
"""

import fcntl
import hashlib
import inspect
import json
import os
import re
import shlex
import shutil
import subprocess
import tempfile
import time

PROLOGUE = "kgym_prologue.h"
PROLOGUE_TEXT = "#include <torch/extension.h>\n"
FORMAT = 1                       # bump when what a PCH directory holds changes
O_LEVELS = ("", "-O3")           # the -O levels built: none (load_inline's own) and the usual -O3


# ------------------------------------------------------------------ the trusted half


def torch_cflags(with_cuda):
    """(compiler, flags) load_inline gives main.cpp, TORCH_EXTENSION_NAME
    left out, asked of torch's own build-file writer (a private function:
    any failure means no PCH).  CUDA is never initialised: the arch list is
    given, so torch asks no GPU."""
    import torch.utils.cpp_extension as ce
    write = ce._write_ninja_file_to_build_library
    params = inspect.signature(write).parameters
    tmp = tempfile.mkdtemp(prefix="kgym-pchflags-")
    saved = os.environ.get("TORCH_CUDA_ARCH_LIST")
    try:
        os.environ["TORCH_CUDA_ARCH_LIST"] = saved or "9.0"
        src = os.path.join(tmp, "main.cpp")
        open(src, "w").close()
        sources = [src] + ([os.path.join(tmp, "cuda.cu")] if with_cuda else [])
        kw = {"path": os.path.join(tmp, "build.ninja"), "name": "kgym_pch_probe", "sources": sources,
              "extra_cflags": [], "extra_cuda_cflags": [], "extra_ldflags": [], "extra_include_paths": [],
              "with_cuda": with_cuda, "is_standalone": False}
        for k in params:
            if k not in kw and params[k].default is inspect.Parameter.empty:
                kw[k] = [] if k.startswith("extra_") else False
        write(**{k: v for k, v in kw.items() if k in params})
        cxx, cflags = None, None
        with open(kw["path"]) as f:
            for line in f:
                if line.startswith("cxx = "):
                    cxx = line[6:].strip()
                elif line.startswith("cflags = "):
                    cflags = shlex.split(line[9:].strip())
    finally:
        if saved is None:
            os.environ.pop("TORCH_CUDA_ARCH_LIST", None)
        else:
            os.environ["TORCH_CUDA_ARCH_LIST"] = saved
        shutil.rmtree(tmp, ignore_errors=True)
    if not cxx or cflags is None:
        raise RuntimeError("torch's build file has no cxx or cflags line")
    return cxx, [f for f in cflags if not f.startswith("-DTORCH_EXTENSION_NAME=")]


def _compiler_id(cxx):
    path = shutil.which(cxx) or cxx
    real = os.path.realpath(path)
    out = subprocess.run([real, "--version"], capture_output=True, text=True, timeout=60,
                         stdin=subprocess.DEVNULL).stdout.splitlines()[:1]
    st = os.stat(real)
    return [real, out, st.st_size, st.st_mtime_ns]


def _deps(path):
    """The files a gcc -MD depfile names."""
    with open(path) as f:
        text = f.read().replace("\\\n", " ")
    _, _, rest = text.partition(":")
    return sorted(set(shlex.split(rest)))


def _stamp(files):
    out = {}
    for p in files:
        try:
            st = os.stat(p)
            out[p] = [st.st_size, st.st_mtime_ns]
        except OSError:
            out[p] = None
    return out


def _valid(d):
    """A built PCH directory whose headers are still those it was built
    from."""
    try:
        with open(os.path.join(d, "manifest.json")) as f:
            m = json.load(f)
        return m.get("format") == FORMAT and os.path.isfile(os.path.join(d, PROLOGUE + ".gch")) and \
            _stamp(m["deps"]) == m["deps"]
    except (OSError, ValueError, KeyError, TypeError):
        return False


def build_variant(root, cxx, flags):
    """One PCH variant under root, compiled with cxx and flags: its
    directory, built if missing or stale, and the seconds that took.
    Trusted callers only.  Raises on failure (the caller goes on without)."""
    import torch
    ident = json.dumps([FORMAT, torch.__version__, os.path.dirname(torch.__file__), _compiler_id(cxx), flags])
    key = hashlib.sha256(ident.encode()).hexdigest()[:24]
    os.makedirs(root, 0o755, exist_ok=True)
    final = os.path.join(root, key)
    with open(os.path.join(root, key + ".lock"), "a") as lock:
        # Workers starting together: one builds, the others wait and use it.
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _valid(final):
            return final, 0.0
        t0 = time.monotonic()
        tmp = tempfile.mkdtemp(prefix=key + ".tmp-", dir=root)
        try:
            with open(os.path.join(tmp, PROLOGUE), "w") as f:
                f.write(PROLOGUE_TEXT)
            cmd = [cxx, "-x", "c++-header"] + flags + ["-MD", "-MF", os.path.join(tmp, "deps.d"),
                                                       os.path.join(tmp, PROLOGUE), "-o",
                                                       os.path.join(tmp, PROLOGUE + ".gch")]
            p = subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=900)
            if p.returncode != 0:
                raise RuntimeError("the prologue did not compile: %s" % p.stderr[-2000:])
            deps = [d for d in _deps(os.path.join(tmp, "deps.d")) if not d.startswith(tmp)]
            with open(os.path.join(tmp, "manifest.json"), "w") as f:
                json.dump({"format": FORMAT, "ident": json.loads(ident), "deps": _stamp(deps),
                           "build_s": time.monotonic() - t0}, f)
            os.unlink(os.path.join(tmp, "deps.d"))
            os.chmod(tmp, 0o755)
            for n in os.listdir(tmp):
                os.chmod(os.path.join(tmp, n), 0o444)
            if os.path.exists(final):
                shutil.rmtree(final)      # stale: its headers changed
            os.rename(tmp, final)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return final, time.monotonic() - t0


def build_pch(root, cuda=True):
    """Every variant under root (trusted, before any job), compiled side by
    side: {"root", "variants": {"cpu|cuda:OLEVEL": dir}, "build_s": wall
    seconds, "errors": [...]}; a variant that cannot be built is left out
    (its candidates build plain)."""
    from concurrent.futures import ThreadPoolExecutor
    out = {"root": root, "variants": {}, "build_s": 0.0, "errors": []}
    t0 = time.monotonic()
    todo = {}
    for with_cuda in ((False, True) if cuda else (False,)):
        try:
            cxx, flags = torch_cflags(with_cuda)
        except Exception as e:  # noqa: BLE001 - no PCH is a slower build, never a failure
            out["errors"].append("%s: %s: %s" % ("cuda" if with_cuda else "cpu", type(e).__name__, str(e)[:500]))
            continue
        for olevel in O_LEVELS:
            todo["%s:%s" % ("cuda" if with_cuda else "cpu", olevel)] = (cxx, flags + ([olevel] if olevel else []))
    with ThreadPoolExecutor(max_workers=max(1, len(todo))) as pool:
        futures = {name: pool.submit(build_variant, root, cxx, flags) for name, (cxx, flags) in todo.items()}
    for name, fut in futures.items():
        try:
            out["variants"][name] = fut.result()[0]
        except Exception as e:  # noqa: BLE001
            out["errors"].append("%s: %s: %s" % (name, type(e).__name__, str(e)[:500]))
    out["build_s"] = time.monotonic() - t0
    if not out["errors"]:
        prune(root, set(out["variants"].values()))
    return out


def prune(root, keep):
    """Remove what an older torch, compiler or set of flags left in root
    (650 MB a variant), and torn temporary directories: whatever no one
    holds the lock of.  A candidate whose variant goes meanwhile builds
    plain (install's retry)."""
    for name in os.listdir(root):
        path = os.path.join(root, name)
        if name.endswith(".lock") or path in keep or not os.path.isdir(path):
            continue
        key = name.split(".tmp-")[0]
        try:
            with open(os.path.join(root, key + ".lock"), "a") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                shutil.rmtree(path, ignore_errors=True)
                if not os.path.isdir(os.path.join(root, key)):
                    os.unlink(os.path.join(root, key + ".lock"))
        except OSError:
            continue                   # being built or checked by another worker: not ours to remove


# ------------------------------------------------------------------ the candidate's half

# Flags of the candidate's that leave the prologue's meaning as the PCH
# has it (gcc checks macros itself, -Winvalid-pch): anything else -- an
# include path, -std, -f, -m, -include, -U -- builds plain.
_SAFE = re.compile(r"^(-D\S+|-W(?!p,|a,|l,)[\w=+-]*|-w|-O[0-3sgz]?|-fPIC|-g0?)$")


def variant_for(extra_cflags, extra_include_paths, with_cuda):
    """The PCH variant a call can use ("cpu:" ...), or None: plain."""
    flags = [str(f).strip() for f in (extra_cflags or [])]
    if extra_include_paths or not all(_SAFE.match(f) for f in flags):
        return None
    olevels = [f for f in flags if f.startswith("-O")]
    olevel = olevels[-1] if olevels else ""
    return "%s:%s" % ("cuda" if with_cuda else "cpu", olevel)


def install(pch):
    """Wrap load_inline in this (the candidate's) process; pch is the
    profile's {"variants": ...} or None (errors are still mapped)."""
    import torch.utils.cpp_extension as ce
    real = ce.load_inline
    if getattr(real, "__kgym__", False):
        return
    sig = inspect.signature(real)
    variants = (pch or {}).get("variants") or {}
    stats = STATS

    def load_inline(*args, **kw):
        try:
            bound = sig.bind(*args, **kw)
        except TypeError:
            return real(*args, **kw)        # the candidate's own mistake, as load_inline reports it
        a = bound.arguments
        with_cuda = a.get("with_cuda")
        if with_cuda is None:
            with_cuda = bool(a.get("cuda_sources"))
        v = variant_for(a.get("extra_cflags"), a.get("extra_include_paths"), with_cuda)
        d = variants.get(v) if v else None
        plain = a.get("extra_cflags")
        stats["builds"] += 1
        t0 = time.monotonic()
        try:
            if d and os.path.isfile(os.path.join(d, PROLOGUE + ".gch")):
                a["extra_cflags"] = list(plain or []) + ["-include", os.path.join(d, PROLOGUE), "-Winvalid-pch"]
                try:
                    mod = real(*bound.args, **bound.kwargs)
                    stats["pch"] += 1
                    return mod
                except RuntimeError as e:
                    # A PCH gcc cannot read (a torn or corrupt file) is a
                    # fatal error, not a warning: build again without it.
                    if "PCH file" not in str(e) and PROLOGUE not in str(e):
                        raise
                    stats["pch_failed"] += 1
                    a["extra_cflags"] = plain
            return real(*bound.args, **bound.kwargs)
        except RuntimeError as e:
            if not str(e).startswith("Error building extension"):
                raise
            msg = map_build_error(str(e), KERNEL_CODE.get("text", ""), a.get("cpp_sources"),
                                  a.get("cuda_sources"), a.get("name"))
        finally:
            stats["build_s"] += time.monotonic() - t0
        raise RuntimeError(msg) from None

    load_inline.__kgym__ = True
    load_inline.__doc__ = real.__doc__
    load_inline.__wrapped__ = real
    load_inline.__signature__ = sig
    ce.load_inline = load_inline


STATS = {"builds": 0, "pch": 0, "pch_failed": 0, "build_s": 0.0}
KERNEL_CODE = {}     # {"text": kernel_code}, set by the executor before it runs it


# ------------------------------------------------------------------ diagnostics

def _as_list(x):
    if x is None:
        return []
    return [x] if isinstance(x, str) else [str(s) for s in x]


def _line_map(generated_head, sources, kernel_code):
    """For a generated file made of `generated_head` lines then the
    sources joined by newlines: a function from the file's line number
    to (source index, line within that source) or None."""
    spans = []
    line = generated_head + 1
    for i, s in enumerate(sources):
        n = s.count("\n") + 1
        spans.append((line, line + n - 1, i))
        line += n
    offsets = []
    for s in sources:
        at = kernel_code.find(s) if s.strip() else -1
        offsets.append(kernel_code.count("\n", 0, at) if at >= 0 else None)

    def where(lineno):
        for lo, hi, i in spans:
            if lo <= lineno <= hi:
                k = lineno - lo
                if offsets[i] is not None:
                    return "kernel_code:%d" % (offsets[i] + k + 1)
                return "%s[%d]:%d" % ("source", i, k + 1)
        return None
    return where


_DIAG = re.compile(r"^(?P<path>/[^:\s()]+?)(?::(?P<l1>\d+)(?::(?P<c1>\d+))?|\((?P<l2>\d+)\))?(?P<rest>:.*)$")


def map_build_error(text, kernel_code, cpp_sources, cuda_sources, name):
    """load_inline's "Error building extension" text as a model can use
    it: compiler diagnostics only (no build commands), main.cpp's and
    cuda.cu's lines as kernel_code's (or "cpp_sources[i]:LINE" where the
    source is not verbatim in kernel_code, "load_inline's binding" for the
    PYBIND11_MODULE block it generates from functions=), other files by
    their name below an include directory, never a host path."""
    cpp = _as_list(cpp_sources)
    cu = _as_list(cuda_sources)
    maps = {"main.cpp": (_line_map(1, cpp, kernel_code), "cpp_sources"),
            "cuda.cu": (_line_map(3, cu, kernel_code), "cuda_sources")}
    out = []
    last = None                 # (generated line, kernel_code line) of the last mapped diagnostic
    for raw in text.splitlines():
        line = raw.rstrip()
        s = line.strip()
        g = re.match(r"^(\s*)(\d+)( \| .*)$", line)
        if g and last and int(g.group(2)) == last[0]:
            # gcc's quote of the line: its number as kernel_code's too.
            out.append("%s%s%s" % (g.group(1), str(last[1]).rjust(len(g.group(2))), g.group(3)))
            continue
        if not s or re.match(r"^\[\d+/\d+\]", s) or s.startswith(("FAILED:", "ninja: ", "Error building extension")):
            continue                                   # ninja's own lines
        if " -c " in s and " -o " in s:
            continue                                   # a compile command: flags and host paths
        if "kgym_prologue.h" in s or "precompiled header" in s or "-Winvalid-pch" in s:
            continue                                   # our PCH's notes: not the candidate's business
        m = _DIAG.match(s)
        if m:
            path, rest = m.group("path"), m.group("rest")
            lineno = m.group("l1") or m.group("l2")
            base = os.path.basename(path)
            mapped = None
            if base in maps and lineno:
                where, what = maps[base]
                mapped = where(int(lineno))
                if mapped is None:
                    mapped = "load_inline's %s" % ("binding (functions=)" if base == "main.cpp" else
                                                  "prologue of %s" % what)
                elif mapped.startswith("source["):
                    mapped = mapped.replace("source", what, 1)
                if mapped.startswith("kernel_code:"):
                    last = (int(lineno), int(mapped.split(":")[1]))
                col = m.group("c1")
                if not mapped.startswith(("kernel_code:", "cpp_sources[", "cuda_sources[")):
                    col = None
                line = "%s%s%s" % (mapped, ":" + col if col else "", rest)
            else:
                col = m.group("c1")
                line = "%s%s%s%s" % (_short(path), ":" + lineno if lineno else "", ":" + col if col else "", rest)
        else:
            line = re.sub(r"(/[^\s:'\"()]+)", lambda mm: _short(mm.group(1)), line)
        out.append(line)
    body = "\n".join(out).strip() or "the build failed without a compiler diagnostic"
    return "Error building extension '%s':\n%s" % (name, body)


def _short(path):
    """A host path as the part a model can use: below .../include/, or
    the build's own file names."""
    i = path.rfind("/include/")
    if i >= 0:
        return path[i + len("/include/"):]
    base = os.path.basename(path)
    return base if base else path
