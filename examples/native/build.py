#!/usr/bin/env python3
"""examples/native/build.py -- generate the native example task files.

Each problem lives in examples/native/<problem>/: its CUDA C sources
(reference.cu and one .cu per solution variant) and problem.json, which
holds the problem part of the native payload (kgymd-protocol(7), "Native tasks") with
"source_file" where the payload has "source", and the launch plan of every
solution.  The sources stay readable as .cu files; this script inlines them
into complete kgymd task files, one per solution:

    examples/native/<problem>/<variant>.task.json
        {"workflow": "kernelbench", "task_id": "<problem>-<variant>",
         "payload": {"backend": "nvrtc", "problem": {...}, "solution": {...}}}

and writes examples/native/expected.json, the verdict each task must get:
    {"<problem>-<variant>": {"status", "correctness", "error_code"}, ...}
A variant's verdict follows from its name (fast, slow: correct; wrong:
CORRECTNESS_ERROR; compile_error: COMPILATION_ERROR; crash: RUNTIME_ERROR)
unless problem.json gives one under the solution's "expect".

problem.json may also say "workflow": "kernel_simple" and give
"test_cases" (copied into the payload), for problems judged against given
inputs and outputs instead of (or beside) a reference kernel.

Usage:
    build.py              write the task files and expected.json
    build.py --check      exit 1 if any generated file is missing or stale
    build.py --compile    also compile every source with NVRTC (libnvrtc
                          through ctypes; --arch, default sm_90) and check
                          that exactly the compile_error variants fail
    build.py --list       print the task files, one per line
Standard library only.
"""
import argparse
import ctypes
import ctypes.util
import glob
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

# The verdict a variant gets unless its problem.json says otherwise.
VERDICTS = {
    "fast": {"status": "completed", "correctness": True, "error_code": None},
    "slow": {"status": "completed", "correctness": True, "error_code": None},
    "wrong": {"status": "completed", "correctness": False, "error_code": "CORRECTNESS_ERROR"},
    "compile_error": {"status": "failed", "correctness": False, "error_code": "COMPILATION_ERROR"},
    "crash": {"status": "completed", "correctness": False, "error_code": "RUNTIME_ERROR"},
}

# Keys of problem.json that are ours, not the payload's.
OWN_KEYS = ("description", "workflow", "solutions", "test_cases", "problem")


def read_source(pdir, name):
    with open(os.path.join(pdir, name), encoding="utf-8") as f:
        return f.read()


def inline(pdir, program):
    """A program of problem.json with its source_file read in."""
    out = {}
    for k, v in program.items():
        if k == "source_file":
            out["source"] = read_source(pdir, v)
        elif k != "expect":
            out[k] = v
    return out


def problems():
    """(name, directory, parsed problem.json) for every problem, sorted."""
    for path in sorted(glob.glob(os.path.join(HERE, "*", "problem.json"))):
        pdir = os.path.dirname(path)
        with open(path, encoding="utf-8") as f:
            spec = json.load(f)
        yield os.path.basename(pdir), pdir, spec


def generate():
    """{path: text} of every generated file."""
    files = {}
    expected = {}
    for name, pdir, spec in problems():
        problem = dict(spec["problem"])
        if "reference" in problem:
            problem["reference"] = inline(pdir, problem["reference"])
        workflow = spec.get("workflow", "kernelbench")
        for variant, sol in spec["solutions"].items():
            task_id = "%s-%s" % (name, variant)
            payload = {"backend": "nvrtc", "problem": problem, "solution": inline(pdir, sol)}
            if "test_cases" in spec:
                payload["test_cases"] = spec["test_cases"]
            task = {"workflow": workflow, "task_id": task_id, "payload": payload}
            files[os.path.join(pdir, variant + ".task.json")] = json.dumps(task, indent=1) + "\n"
            verdict = dict(VERDICTS.get(variant, {}))
            verdict.update(sol.get("expect", {}))
            if set(verdict) != {"status", "correctness", "error_code"}:
                raise SystemExit("%s: no verdict for variant %r (add \"expect\")" % (task_id, variant))
            expected[task_id] = verdict
    files[os.path.join(HERE, "expected.json")] = json.dumps(expected, indent=1, sort_keys=True) + "\n"
    return files


def task_files():
    return sorted(p for p in generate() if p.endswith(".task.json"))


# ------------------------------------------------------------ NVRTC check

def find_nvrtc():
    for cand in (os.environ.get("KGYM_LIBNVRTC"), "/usr/local/cuda/lib64/libnvrtc.so",
                 ctypes.util.find_library("nvrtc")):
        if cand and (os.path.exists(cand) or not os.path.isabs(cand)):
            try:
                return ctypes.CDLL(cand)
            except OSError:
                continue
    return None


def nvrtc_compile(lib, source, name, opts):
    """(ok, log) of compiling `source` with NVRTC."""
    prog = ctypes.c_void_p()
    if lib.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), name.encode(), 0, None, None) != 0:
        return False, "nvrtcCreateProgram failed"
    try:
        arr = (ctypes.c_char_p * len(opts))(*[o.encode() for o in opts])
        rc = lib.nvrtcCompileProgram(prog, len(opts), arr)
        size = ctypes.c_size_t()
        lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
        buf = ctypes.create_string_buffer(size.value + 1)
        lib.nvrtcGetProgramLog(prog, buf)
        return rc == 0, buf.value.decode(errors="replace")
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(prog))


def compile_all(arch, include):
    lib = find_nvrtc()
    if lib is None:
        print("build.py: libnvrtc not found (set KGYM_LIBNVRTC)", file=sys.stderr)
        return 2
    bad = 0
    opts = ["--gpu-architecture=" + arch, "-I" + include]
    for name, pdir, spec in problems():
        programs = [("reference", spec["problem"].get("reference"))]
        programs += list(spec["solutions"].items())
        for variant, prog in programs:
            if prog is None:
                continue
            src = read_source(pdir, prog["source_file"])
            ok, log = nvrtc_compile(lib, src, prog["source_file"], opts + prog.get("options", []))
            want = variant != "compile_error"
            verdict = "ok" if ok == want else "UNEXPECTED"
            first = log.strip().splitlines()[0] if log.strip() else ""
            print("%-12s %-14s %-10s %s" % (name, variant, "compiles" if ok else "fails", verdict),
                  (" | " + first) if not ok else "")
            if ok != want:
                bad += 1
                print(log)
    return 1 if bad else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true", help="fail if generated files are stale")
    ap.add_argument("--compile", action="store_true", help="compile every source with NVRTC")
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--include", default="/usr/local/cuda/include")
    ap.add_argument("--list", action="store_true", help="print the task files")
    args = ap.parse_args()

    if args.list:
        for p in task_files():
            print(os.path.relpath(p))
        return 0
    files = generate()
    if args.check:
        stale = []
        for path, text in files.items():
            try:
                with open(path, encoding="utf-8") as f:
                    if f.read() != text:
                        stale.append(path)
            except FileNotFoundError:
                stale.append(path)
        for path in stale:
            print("stale or missing: %s (run examples/native/build.py)" % os.path.relpath(path))
        rc = 1 if stale else 0
    else:
        for path, text in files.items():
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
        print("build.py: wrote %d task files and expected.json" % (len(files) - 1))
        rc = 0
    if args.compile:
        rc = max(rc, compile_all(args.arch, args.include))
    return rc


if __name__ == "__main__":
    sys.exit(main())
