#!/usr/bin/env python3
"""load_inline candidates with the precompiled torch prologue
(plugins/python/kgym_inline.py), on the CPU, through the harness's --once
mode (the same Job code and sandbox as a zygote's job; see test_python.py).

Checks: a CPU load_inline candidate builds with the PCH (the candidate's
setup says so) and gets the same verdict as without it; a PCH that gcc
cannot read (a torn .gch) falls back to a plain build, still correct; a
compile error names kernel_code's own line and quotes no host path or
build command; the candidate cannot write the PCH directory (Landlock: the
tests run as root here, so file modes alone would not stop it); the
candidate's flags that change the prologue (an include path) build plain.

Skips (77) without torch, gcc/g++/ninja, torch's C++ headers (Debian:
libtorch-dev, pybind11-dev) or Landlock.  The PCH is built once into a
temporary directory (about 40 s on two cores) and shared by the tests.
"""
import os
import shutil
import subprocess
import tempfile

import sys

import kgymtest as k
import test_python as tp

sys.path.insert(0, os.path.join(k.srcdir(), "plugins", "python"))
import kgym_inline  # noqa: E402

PCH_ROOT = None


def need_headers():
    tp.need_toolchain()
    probe = subprocess.run([tp.PY, "-c", "import os, torch.utils.cpp_extension as c\n"
                            "d = c.include_paths() + ['/usr/include']\n"
                            "print(any(os.path.exists(os.path.join(p, 'torch', 'extension.h')) for p in d) and "
                            "any(os.path.exists(os.path.join(p, 'pybind11', 'pybind11.h')) for p in d))"],
                           capture_output=True, text=True, timeout=300)
    if probe.stdout.strip() != "True":
        raise k.Skip("torch's C++ headers are not installed (Debian: libtorch-dev, pybind11-dev)")


def pch_args(root=None):
    return ["--pch-dir", root or PCH_ROOT, "--pch-cpu-only"]


def used_pch(r):
    return (r.get("metadata", {}).get("candidate_setup_ms") or {}).get("inline_pch")


def test_pch_same_verdict():
    """With the PCH: built with it (inline_pch 1), correct, as without it."""
    need_headers()
    r = tp.run_once(tp.CPU_LOAD_INLINE, args=pch_args())
    k.check(r["status"] == "completed" and r["correctness"] is True, tp.show(r))
    k.check("cpu:" in r["metadata"]["inline_pch"]["variants"], r["metadata"].get("inline_pch"))
    k.check(used_pch(r) == 1, r["metadata"].get("candidate_setup_ms"))
    plain = tp.run_once(tp.CPU_LOAD_INLINE)
    k.check(plain["status"] == r["status"] and plain["correctness"] == r["correctness"], tp.show(plain))
    k.check(not used_pch(plain), plain["metadata"].get("candidate_setup_ms"))


def test_pch_torn_falls_back():
    """A .gch gcc cannot read is a fatal error to gcc: the wrapper builds
    again without it, and the verdict is the same."""
    need_headers()
    torn = tempfile.mkdtemp(prefix="kgym-pch-torn-")
    try:
        for name in os.listdir(PCH_ROOT):
            src = os.path.join(PCH_ROOT, name)
            if not os.path.isdir(src) or ".tmp-" in name:
                continue
            os.mkdir(os.path.join(torn, name))
            for f in os.listdir(src):
                with open(os.path.join(src, f), "rb") as a, open(os.path.join(torn, name, f), "wb") as b:
                    b.write(a.read(1 << 20) if f.endswith(".gch") else a.read())
        r = tp.run_once(tp.CPU_LOAD_INLINE, args=pch_args(torn))
        k.check(r["status"] == "completed" and r["correctness"] is True, tp.show(r))
        k.check(r["metadata"]["inline_pch"]["build_s"] < 5, "the torn PCH was rebuilt: %s" %
                r["metadata"]["inline_pch"])
        k.check(used_pch(r) == 0, r["metadata"].get("candidate_setup_ms"))
    finally:
        shutil.rmtree(torn, ignore_errors=True)


def test_compile_error_names_kernel_line():
    """gcc's error at the candidate's own line, as kernel_code:LINE, and
    nothing of the host: no build command, no temporary path."""
    need_headers()
    bad = "        q[i] = p[i] > 0.f ? p[i] : undeclared_thing;"
    kernel = tp.CPU_LOAD_INLINE.replace("        q[i] = p[i] > 0.f ? p[i] : 0.f;", bad)
    line = kernel.splitlines().index(bad) + 1
    r = tp.run_once(kernel, args=pch_args())
    msg = r.get("error_message") or ""
    k.check(r["status"] == "failed" and r["error_code"] == "COMPILATION_ERROR", tp.show(r))
    k.check("kernel_code:%d:" % line in msg and "undeclared_thing" in msg, msg)
    k.check("%4d | " % line in msg, "gcc's quote of the line keeps main.cpp's number: %s" % msg)
    for leak in ("/tmp", "-isystem", "ninja:", "kgym_prologue", PCH_ROOT):
        k.check(leak not in msg, "%r in the message: %s" % (leak, msg))


def test_candidate_cannot_write_pch():
    """The PCH directory is read-only in the candidate's Landlock domain:
    neither a new file nor a write to the .gch (as root, which file modes
    do not stop)."""
    need_headers()
    variant = [n for n in os.listdir(PCH_ROOT) if os.path.isdir(os.path.join(PCH_ROOT, n))][0]
    gch = os.path.join(PCH_ROOT, variant, "kgym_prologue.h.gch")
    before = os.stat(gch)
    for body in ("_os.open(%r, _os.O_WRONLY | _os.O_CREAT, 0o644)\n" % os.path.join(PCH_ROOT, "poison"),
                 "_os.open(%r, _os.O_WRONLY)\n" % gch,
                 "_os.rename(%r, %r)\n" % (gch, gch + ".x")):
        r = tp.run_once(tp.CANDIDATE_HEAD + tp.SNEAK + tp.UNUSED_LOAD_INLINE + body +
                        tp.relu_candidate("return x.clamp_min(0)"), static_checks=False, args=pch_args())
        k.check(r.get("error_code") == "SANDBOX_VIOLATION" and "Permission denied" in r["error_message"],
                tp.show(r))
    k.check(not os.path.exists(os.path.join(PCH_ROOT, "poison")), "the candidate wrote into the PCH directory")
    after = os.stat(gch)
    k.check((after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns), "the .gch changed")


def test_include_path_builds_plain():
    """An extra include path could change what torch/extension.h means:
    no PCH, a plain build, the same verdict."""
    need_headers()
    kernel = tp.CPU_LOAD_INLINE.replace('functions=["relu_forward"],',
                                        'functions=["relu_forward"], extra_include_paths=["/usr/include"],')
    r = tp.run_once(kernel, args=pch_args())
    k.check(r["status"] == "completed" and r["correctness"] is True, tp.show(r))
    k.check(used_pch(r) == 0, r["metadata"].get("candidate_setup_ms"))


def test_map_nvcc_error():
    """nvcc's "cuda.cu(L): error" at kernel_code's line (3 prologue lines
    before cuda_sources); ninja's lines, the commands and paths gone."""
    cu = "\n__global__ void k(float *y)\n{\n    y[0] = q;\n}\n"
    kernel = 'from torch.utils.cpp_extension import load_inline\n\nCUDA_SRC = r"""%s"""\n' % cu
    gen = "\n".join(["#include <torch/types.h>", "#include <cuda.h>", "#include <cuda_runtime.h>", cu])
    line_cu = gen.splitlines().index("    y[0] = q;") + 1
    want = kernel.splitlines().index("    y[0] = q;") + 1
    text = ("Error building extension 'x': [1/3] /opt/cuda/bin/nvcc -DX -c /tmp/j/cuda.cu -o cuda.cuda.o\n"
            "FAILED: cuda.cuda.o\n/opt/cuda/bin/nvcc -DX -c /tmp/j/cuda.cu -o cuda.cuda.o\n"
            "/tmp/j/cuda.cu(%d): error: identifier \"q\" is undefined\n\n"
            "1 error detected in the compilation of \"/tmp/j/cuda.cu\".\n"
            "ninja: build stopped: subcommand failed.\n" % line_cu)
    out = kgym_inline.map_build_error(text, kernel, "void f();", cu, "x")
    k.check("kernel_code:%d: error: identifier \"q\" is undefined" % want in out, out)
    for leak in ("/tmp", "/opt", "ninja", "FAILED"):
        k.check(leak not in out, "%r in %s" % (leak, out))


def test_flags_choose_variant():
    """Defines, warnings, -O and -g keep the PCH (the -O level picks the
    variant); include paths, -std, -f, -m, -include, -U build plain."""
    v = kgym_inline.variant_for
    k.check(v(None, None, False) == "cpu:" and v(["-O3", "-DX=1", "-Wall"], [], True) == "cuda:-O3", "safe flags")
    k.check(v(["-O2", "-O3"], None, False) == "cpu:-O3", "the last -O wins")
    for bad in (["-I/x"], ["-std=c++20"], ["-ffast-math"], ["-march=native"], ["-include", "x.h"], ["-UNDEBUG"],
                ["-Wp,-DX"]):
        k.check(v(bad, None, False) is None, "%s kept the PCH" % bad)
    k.check(v([], ["/x"], False) is None, "an include path kept the PCH")


def test_prune_leaves_locked():
    """What an older torch or compiler left is removed, torn temporary
    directories too; a variant whose lock another worker holds is not."""
    import fcntl
    root = tempfile.mkdtemp(prefix="kgym-pch-prune-")
    try:
        for d in ("old", "busy", "new", "old2.tmp-1"):
            os.mkdir(os.path.join(root, d))
        for f in ("old.lock", "busy.lock", "new.lock"):
            open(os.path.join(root, f), "w").close()
        with open(os.path.join(root, "busy.lock"), "a") as held:
            fcntl.flock(held, fcntl.LOCK_EX)
            p = subprocess.run([tp.PY if shutil.which(tp.PY) else sys.executable, "-c",
                                "import sys; sys.path.insert(0, %r); import kgym_inline; "
                                "kgym_inline.prune(%r, {%r})" % (os.path.dirname(kgym_inline.__file__), root,
                                                                 os.path.join(root, "new"))],
                               capture_output=True, text=True, timeout=60)
            k.check(p.returncode == 0, p.stderr)
        left = sorted(os.listdir(root))
        k.check(left == ["busy", "busy.lock", "new", "new.lock"], left)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main():
    global PCH_ROOT
    if not os.path.exists(tp.sandbox_lib()):
        print("SKIP: libkgym_sandbox.so was not built")
        raise SystemExit(k.SKIP)
    if not tp.have_torch():
        print("SKIP: %s cannot import torch" % tp.PY)
        raise SystemExit(k.SKIP)
    PCH_ROOT = tempfile.mkdtemp(prefix="kgym-pch-")
    os.chmod(PCH_ROOT, 0o755)
    try:
        k.run([test_map_nvcc_error, test_flags_choose_variant, test_prune_leaves_locked, test_pch_same_verdict, test_pch_torn_falls_back, test_compile_error_names_kernel_line,
               test_candidate_cannot_write_pch, test_include_path_builds_plain])
    finally:
        shutil.rmtree(PCH_ROOT, ignore_errors=True)


if __name__ == "__main__":
    main()
