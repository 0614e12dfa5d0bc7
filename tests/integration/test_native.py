#!/usr/bin/env python3
"""The native path through a private kgymd, no GPU needed: the kernelbench
and kernel_simple workflows refuse malformed native payloads at submit
naming the field at fault, and NVRTC (which needs no GPU) compiles every
example of examples/native through the daemon's sandboxed compile jobs --
the not-compiling ones end failed with COMPILATION_ERROR and NVRTC's log.

The daemon has one GPU slot ("gpus = 0").  On a machine without a GPU that
slot cannot run CUDA, so every task whose candidate compiled goes on to an
evaluate job that fails for want of a device: that such a task ends with
compiled:true and an error other than COMPILATION_ERROR is what shows its
compile job succeeded.  On a machine with a GPU the evaluate jobs really run;
the checks here hold either way (tests/gpu/native_tests.py checks verdicts).

Skips (77) when the nvrtc backend plugin was not built (no CUDA toolkit),
except for the validation test, which needs only the workflows.
"""
import copy
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import kgymtest as k

EXAMPLES = os.path.join(k.srcdir(), "examples", "native")
WORKFLOWS = ("kernelbench", "kernel_simple")
# Compile jobs may take a while on a small CI machine; evaluate jobs on a
# GPU-less slot end at once.
WORKERS = "cpu_workers = 2\ncompile_deadline = 60\ncorrectness_deadline = 120\njob_deadline = 600"


def plugin_path(name):
    return os.path.join(k.builddir(), "plugins", ".libs", name + ".so")


# Toolkits a backend asks for in prepare() (kgym-plugin(3), TOOLKITS), copied
# beside it: without compare nvrtc fails closed and takes no job; without
# cupti it times with events alone.
TOOLKITS = {"nvrtc": ("compare", "cupti")}


def with_toolkits(names):
    """names, and the toolkits the backends among them need, once each."""
    out = list(names)
    for name in names:
        out += [t for t in TOOLKITS.get(name, ()) if t not in out]
    return out


def have_nvrtc():
    return os.path.exists(plugin_path("nvrtc"))


class NativeDaemon(k.Daemon):
    """A private kgymd with the real plugins of plugins/.libs (copied, 0755,
    into a directory only we can write, as the loader wants)."""

    def __init__(self, names, toolkits=True, **kw):
        self.pdir = tempfile.mkdtemp(prefix="kgym-plugins-")
        for name in (with_toolkits(names) if toolkits else names):
            if not os.path.exists(plugin_path(name)):
                raise k.Skip("%s was not built" % plugin_path(name))
            dst = os.path.join(self.pdir, name + ".so")
            shutil.copyfile(plugin_path(name), dst)
            os.chmod(dst, 0o755)
        kw.setdefault("workers_conf", WORKERS)
        super().__init__(plugin_dirs=[self.pdir], **kw)

    def cleanup(self):
        super().cleanup()
        shutil.rmtree(self.pdir, ignore_errors=True)


def example_files():
    """Every generated example task file (examples/native/*/*.task.json)."""
    out = subprocess.run([sys.executable, os.path.join(EXAMPLES, "build.py"), "--list"],
                         cwd=k.srcdir(), capture_output=True, text=True, check=True).stdout
    return [os.path.join(k.srcdir(), p) for p in out.split()]


def load(path):
    with open(path) as f:
        return json.load(f)


def base_task(task_id="base"):
    t = load(os.path.join(EXAMPLES, "vector_add", "fast.task.json"))
    t["task_id"] = task_id
    return t


def submit_wait(d, tasks, timeout=600):
    """Submit and wait for every task; {task_id: event}."""
    c = d.connect()
    c.sock.settimeout(timeout)
    try:
        r = c.request({"op": "submit", "tasks": tasks})
        k.check(r["ok"] and not r["rejected"], "all accepted: %r" % (r,))
        ids = [a["task_id"] for a in r["accepted"]]
        rid = c.send({"op": "wait", "task_ids": ids, "timeout_ms": timeout * 1000})
        events, final = c.collect_wait(rid)
        k.check(final.get("ok") and not final.get("pending"), "all ended: %r" % (final,))
        return {e["task_id"]: e for e in events}
    finally:
        c.close()


# ------------------------------------------------------------ host files

def daemon_paths(d):
    """What the include exploits' @KGYM_CONFIG@ and @KGYM_STORE@ stand for."""
    return {"@KGYM_CONFIG@": d.conf, "@KGYM_STORE@": os.path.join(d.state_dir, "tasks.db")}


def substitute_paths(task, paths):
    """A copy of `task` whose solution source names the daemon's own files."""
    t = copy.deepcopy(task)
    src = t["payload"]["solution"]["source"]
    for key, path in paths.items():
        src = src.replace(key, path)
    t["payload"]["solution"]["source"] = src
    return t


def file_pieces(path, secret=None):
    """Distinctive pieces of a host file: its lines (NUL- or newline-
    separated) of 8 bytes or more, stripped; for the SQLite store its
    header and `secret` (a string only a task in it holds)."""
    try:
        with open(path, "rb") as f:
            data = f.read(1 << 20)
    except OSError:
        return []
    if data.startswith(b"SQLite format 3"):
        return ["SQLite format 3"] + ([secret] if secret else [])
    pieces = []
    for chunk in re.split(rb"[\0\n]", data):
        text = chunk.decode("utf-8", "replace").strip()
        if len(text) >= 8:
            pieces.append(text)
    return pieces


def leaked(result, pieces):
    """The pieces found anywhere in the result (every field, as JSON and as
    the strings it holds)."""
    strings = []

    def walk(v):
        if isinstance(v, dict):
            for key, x in v.items():
                strings.append(key)
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)
        elif isinstance(v, str):
            strings.append(v)
    walk(result)
    text = "\n".join(strings) + "\n" + json.dumps(result)
    return [p for p in pieces if p in text]


# ------------------------------------------------------------ tests

def test_examples_up_to_date():
    """The committed task files are what build.py makes of the .cu sources."""
    p = subprocess.run([sys.executable, os.path.join(EXAMPLES, "build.py"), "--check"],
                       capture_output=True, text=True)
    k.check(p.returncode == 0, "examples/native/build.py --check: %s%s" % (p.stdout, p.stderr))
    files = example_files()
    expected = load(os.path.join(EXAMPLES, "expected.json"))
    ids = [load(f)["task_id"] for f in files]
    k.check(sorted(ids) == sorted(expected), "expected.json covers exactly the task files")
    problems = {i.split("-")[0] for i in ids}
    k.check(len(problems) >= 8, "at least 8 problems: %s" % sorted(problems))
    for p in problems:
        for v in ("fast", "slow", "wrong", "compile_error", "crash"):
            k.check("%s-%s" % (p, v) in expected, "%s has a %s variant" % (p, v))


def mutate(fn, task_id):
    t = base_task(task_id)
    fn(t["payload"])
    return t


def test_validation_errors():
    """Each malformed payload is rejected at submit, naming its field."""
    def set_(path, value):
        def f(p):
            obj = p
            for key in path[:-1]:
                obj = obj[key]
            if value is KeyError:
                del obj[path[-1]]
            else:
                obj[path[-1]] = value
        return f

    sol_args = ["solution", "launch", 0, "args"]
    cases = [
        # mutation, words the message must contain
        (set_(sol_args + [1], "yy"), ["solution.launch[0].args[1]", "yy"]),
        (set_(["solution", "launch", 0, "grid", 0], "cdiv(N,,256)"),
         ["solution.launch[0].grid[0]", "column"]),
        (set_(["solution", "launch", 0, "block", 0], "256 * Q"), ["solution.launch[0].block[0]", "Q"]),
        (set_(["problem", "inputs", 0, "dtype"], "float33"), ["problem.inputs[0].dtype", "float33"]),
        (set_(["problem", "outputs", 0, "shape", 0], "N +"), ["problem.outputs[0].shape[0]"]),
        (set_(["solution", "source"], KeyError), ["solution.source"]),
        (set_(["problem", "reference", "source"], KeyError), ["problem.reference.source"]),
        (set_(["solution", "options"], ["--use_fast_math", "--include-path=/etc"]),
         ["solution.options[1]", "--include-path=/etc"]),
        (set_(["solution", "launch", 0, "shared_byte"], 0), ["solution.launch[0]", "shared_byte"]),
        # a KernelBench-format backend: the payload then needs reference_code
        (set_(["backend"], "triton"), ["reference_code", "backend 'triton'"]),
        (set_(["backend"], KeyError), ["backend"]),
        (set_(["num_correct_trials"], "5"), ["num_correct_trials"]),
        (set_(["num_perf_trials"], 0), ["num_perf_trials"]),
        (set_(["num_warmup"], 1.5), ["num_warmup"]),
        (set_(["run_correctness"], "yes"), ["run_correctness"]),
        (set_(["run_performance"], 1), ["run_performance"]),
        (set_(["enable_profiling"], "no"), ["enable_profiling"]),
        (set_(["force_refresh"], 1), ["force_refresh"]),
        (set_(["problem"], KeyError), ["problem"]),
    ]
    ks_base = {"workflow": "kernel_simple", "payload": None}

    def simple(payload_fn):
        t = copy.deepcopy(ks_base)
        t["payload"] = copy.deepcopy(base_task()["payload"])
        payload_fn(t["payload"])
        return t

    def tc(inputs, outputs):
        return [{"inputs": inputs, "outputs": outputs}]

    ks_cases = [
        (lambda p: p["problem"].pop("reference"), ["test_cases", "required"]),
        (lambda p: p.update(test_cases=tc({"x": [1.0] * 3, "y": [1.0] * 3}, {"out": [2.0] * 3})),
         ["test_cases[0].inputs.x", "33554432"]),
        (lambda p: p.update(test_cases=[]), ["test_cases"]),
        (lambda p: p.update(test_cases=[{"inputs": {}, "outputs": {}, "extra": 1}]),
         ["test_cases[0]", "extra"]),
    ]
    with NativeDaemon(WORKFLOWS) as d:
        tasks = [mutate(fn, "bad%d" % i) for i, (fn, _) in enumerate(cases)]
        tasks += [simple(fn) for fn, _ in ks_cases]
        r = d.request({"op": "submit", "tasks": tasks})
        k.check(r["ok"] and not r["accepted"], "nothing accepted: %r" % (r.get("accepted"),))
        k.check(len(r["rejected"]) == len(tasks), r)
        for rej, (_, words) in zip(r["rejected"], cases + ks_cases):
            msg = rej["error"]["message"]
            k.check(rej["error"]["code"] == "bad_request", rej)
            for w in words:
                k.check(w in msg, "rejection %r should contain %r" % (msg, w))
        # unknown fields are ignored; the good task is accepted
        good = base_task("good")
        good["payload"]["some_field_of_the_future"] = {"x": 1}
        good["payload"]["reference_backend"] = "eager"
        # only validation matters here: no backend runs it, nor waits for it
        r = d.request({"op": "submit", "task": good})
        k.check(r["ok"] and r["accepted"] and not r["rejected"], r)


def test_source_limit_is_a_config_key():
    with NativeDaemon(WORKFLOWS, extra_conf="[plugin.kernelbench]\nmax_source_bytes = 256\n") as d:
        r = d.request({"op": "submit", "task": base_task()})
        k.check(len(r["rejected"]) == 1, r)
        msg = r["rejected"][0]["error"]["message"]
        k.check("source" in msg and "256" in msg, msg)


def test_bad_config_refused():
    """A malformed [plugin.kernelbench] key is refused with its name."""
    d = NativeDaemon(WORKFLOWS, extra_conf="[plugin.kernelbench]\narch = volta\n")
    try:
        d.start()
        r = d.request({"op": "plugins"})
        names = [p["name"] for p in r["plugins"]]
        k.check("kernelbench" not in names and "kernel_simple" in names, r)
        k.check("arch" in d.read_log(), "the log names the key")
        d.stop()
    finally:
        d.cleanup()


def test_compile_error_has_log():
    if not have_nvrtc():
        raise k.Skip("the nvrtc plugin was not built (no CUDA toolkit)")
    with NativeDaemon(WORKFLOWS + ("nvrtc",), gpus="0") as d:
        t = load(os.path.join(EXAMPLES, "vector_add", "compile_error.task.json"))
        e = submit_wait(d, [t])[t["task_id"]]
        res = e["result"]
        k.check(e["state"] == "failed" and res["status"] == "failed", res)
        k.check(res["error_code"] == "COMPILATION_ERROR" and res["compiled"] is False, res)
        msg = res["error_message"]
        # NVRTC's own words, with the line of the fault (line 8 of the .cu)
        k.check(re.search(r"\(8\): error", msg), "line number in %r" % msg)
        k.check("float4" in msg, msg)


def test_missing_toolkit_fails_closed():
    """nvrtc without the compare toolkit: its jobs fail, saying which toolkit
    is missing, and the daemon goes on serving."""
    if not have_nvrtc():
        raise k.Skip("the nvrtc plugin was not built (no CUDA toolkit)")
    with NativeDaemon(WORKFLOWS + ("nvrtc",), toolkits=False, gpus="0") as d:
        t = base_task("notoolkit")
        e = submit_wait(d, [t])["notoolkit"]
        res = e["result"]
        k.check(e["state"] == "failed" and res["status"] == "failed", res)
        k.check(res["error_code"] == "SYSTEM_ERROR", res)
        k.check("'compare' toolkit" in res["error_message"], res)
        k.check("no toolkit serves the 'compare' API" in res["error_message"], res)
        # Still serving: a request is answered, a bad task is still refused.
        k.check(d.request({"op": "plugins"})["ok"], "plugins op")
        bad = base_task("bad")
        del bad["payload"]["problem"]
        r = d.request({"op": "submit", "task": bad})
        k.check(r["ok"] and r["rejected"], r)


def test_reference_that_does_not_compile():
    if not have_nvrtc():
        raise k.Skip("the nvrtc plugin was not built (no CUDA toolkit)")
    with NativeDaemon(WORKFLOWS + ("nvrtc",), gpus="0") as d:
        t = base_task("badref")
        t["payload"]["problem"]["reference"]["source"] += "\nthis is not C\n"
        e = submit_wait(d, [t])["badref"]
        res = e["result"]
        k.check(e["state"] == "failed" and res["error_code"] == "VALIDATION_ERROR", res)
        k.check("reference does not compile" in res["error_message"], res)


def test_every_example_compiles():
    """Every reference and solution of examples/native compiles through the
    daemon; exactly the compile_error variants fail, with NVRTC's log."""
    if not have_nvrtc():
        raise k.Skip("the nvrtc plugin was not built (no CUDA toolkit)")
    tasks = [load(f) for f in example_files()]
    with NativeDaemon(WORKFLOWS + ("nvrtc",), gpus="0") as d:
        events = submit_wait(d, tasks)
        k.check(len(events) == len(tasks), "one result per task")
        for t in tasks:
            tid = t["task_id"]
            res = events[tid]["result"]
            meta = res.get("metadata", {})
            what = "%s: %s %s" % (tid, res.get("error_code"), (res.get("error_message") or "")[:300])
            if tid.endswith("-compile_error"):
                k.check(res["error_code"] == "COMPILATION_ERROR" and res["compiled"] is False, what)
                # NVRTC's log: "solution(12): error: ..." (or a note with the line)
                k.check(re.search(r"\(\d+\)", res["error_message"]) and "error" in res["error_message"], what)
            else:
                k.check(res["compiled"] is True, what)
                k.check(res.get("error_code") not in ("COMPILATION_ERROR", "VALIDATION_ERROR"), what)
            k.check(meta.get("workflow") == "kernelbench" and meta.get("arch", "").startswith("sm_"), what)
            k.check(meta.get("reference_cubin") in ("compiled", "disk", "memory"), what)
            k.check(meta.get("reference_timing_cached") is False, what)


def test_force_refresh_recompiles():
    if not have_nvrtc():
        raise k.Skip("the nvrtc plugin was not built (no CUDA toolkit)")
    with NativeDaemon(WORKFLOWS + ("nvrtc",), gpus="0") as d:
        first = submit_wait(d, [base_task("one")])["one"]["result"]["metadata"]
        again = submit_wait(d, [base_task("two")])["two"]["result"]["metadata"]
        t = base_task("three")
        t["payload"]["force_refresh"] = True
        forced = submit_wait(d, [t])["three"]["result"]["metadata"]
        # "disk" when the compile job's own cache (cache_dir) had it
        k.check(first["reference_cubin"] in ("compiled", "disk"), first)
        k.check(again["reference_cubin"] == "memory" and again["reference_compile_ms"] == 0, again)
        k.check(forced["reference_cubin"] in ("compiled", "disk"), forced)


def test_kernel_simple_compiles():
    """kernel_simple with test cases and no reference: one compile unit, and
    the evaluate job gets as far as the GPU."""
    if not have_nvrtc():
        raise k.Skip("the nvrtc plugin was not built (no CUDA toolkit)")
    src = ('extern "C" __global__ void relu(const float *x, float *y, int n)\n'
           '{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = fmaxf(x[i], 0.0f); }\n')
    payload = {
        "backend": "nvrtc",
        "problem": {"name": "relu", "sizes": {"N": 4},
                    "inputs": [{"name": "x", "dtype": "float32", "shape": ["N"]}],
                    "outputs": [{"name": "y", "dtype": "float32", "shape": ["N"]}]},
        "solution": {"source": src, "launch": [{"kernel": "relu", "grid": [1], "block": [32],
                                                "args": ["x", "y", "N"]}]},
        "test_cases": [{"inputs": {"x": [-1, 0, 2.5, -3]}, "outputs": {"y": [0, 0, 2.5, 0]}}],
    }
    with NativeDaemon(WORKFLOWS + ("nvrtc",), gpus="0") as d:
        e = submit_wait(d, [{"workflow": "kernel_simple", "task_id": "relu", "payload": payload}])["relu"]
        res = e["result"]
        k.check(res["compiled"] is True and res.get("error_code") != "COMPILATION_ERROR", res)
        k.check(res.get("speedup") is None, res)
        k.check("reference_cubin" not in res["metadata"], res)


def test_includes_of_host_files_fail():
    """A candidate that #includes a host file -- /etc/passwd,
    /proc/self/environ, kgymd's configuration, its task store -- fails to
    compile and gets no byte of the file back, in any field of the result:
    the compile thread cannot open it, and the log keeps only diagnostics
    of the candidate's own source.  A victim task's secret in the store
    must not come back either."""
    if not have_nvrtc():
        raise k.Skip("the nvrtc plugin was not built (no CUDA toolkit)")
    secret = "kgym-victim-secret-%s" % os.urandom(6).hex()
    with NativeDaemon(WORKFLOWS + ("nvrtc",), gpus="0") as d:
        victim = base_task("victim")
        victim["payload"]["solution"]["source"] += "\n// %s\n" % secret
        submit_wait(d, [victim])
        paths = daemon_paths(d)
        files = ["/etc/passwd", "/proc/self/environ", paths["@KGYM_CONFIG@"],
                 paths["@KGYM_STORE@"]]
        body = base_task()["payload"]["solution"]["source"]
        tasks = []
        for i, f in enumerate(files):
            t = base_task("include-%d" % i)
            t["payload"]["solution"]["source"] = '#include "%s"\n%s' % (f, body)
            tasks.append(t)
        # The value of the file inside a message about the candidate's own line.
        t = base_task("include-value")
        t["payload"]["solution"]["source"] = (
            'template <int N> struct Leak;\nstatic const char leaked[] = {\n#include "%s"\n};\n'
            'Leak<sizeof(leaked)> probe;\n%s' % (paths["@KGYM_CONFIG@"], body))
        tasks.append(t)
        events = submit_wait(d, tasks)
        for i, t in enumerate(tasks):
            res = events[t["task_id"]]["result"]
            f = files[i] if i < len(files) else paths["@KGYM_CONFIG@"]
            what = "%s (%s): %s %s" % (t["task_id"], f, res.get("error_code"),
                                       (res.get("error_message") or "")[:400])
            k.check(res["error_code"] == "COMPILATION_ERROR" and res["compiled"] is False, what)
            k.check("cannot open source file" in res["error_message"], what)
            pieces = file_pieces(f, secret)
            k.check(not leaked(res, pieces), "%s: leaked %r" % (what, leaked(res, pieces)[:3]))
            if f not in paths.values():
                # Nor a path of the daemon's (its own source names no such path).
                k.check(d.dir not in json.dumps(res), what)


if __name__ == "__main__":
    k.run([test_includes_of_host_files_fail,
           test_examples_up_to_date, test_validation_errors, test_source_limit_is_a_config_key,
           test_bad_config_refused, test_compile_error_has_log, test_missing_toolkit_fails_closed,
           test_reference_that_does_not_compile,
           test_every_example_compiles, test_force_refresh_recompiles, test_kernel_simple_compiles])
