#!/usr/bin/env python3
"""The KernelBench-format path end to end through a private kgymd, on the CPU.

kernelbench workflow -> CPU worker -> python backend -> zygote -> reference
and candidate processes (both sandboxed) -> verdict.  Tasks use
"device":"cpu" and torch candidates (the CPU mode), so no GPU is
needed; the plugins come from the build tree, the harness from the source
tree, the sandbox library from the build tree.

Checks: every torch example of examples/kernelbench gets its expected verdict
(correct -> completed, correctness true, timings; wrong -> completed,
correctness false, CORRECTNESS_ERROR); forbidden imports are a
VALIDATION_ERROR naming the line; a candidate opening a socket (past the
static checks) is killed by seccomp and one reading the task store is
stopped by Landlock (SANDBOX_VIOLATION); identity on a ReLU problem fails the
signed-input trial; exceptions and crashes are RUNTIME_ERROR with
compiled:true; a hang is a TIMEOUT_ERROR naming the phase, also when the
task's timeout_s is shorter than the phase's limit; input mutation and
misbehaving timed calls are REWARD_HACKs; the reference timing cache hits on
the second task of a problem and force_refresh bypasses it; malformed
payloads are rejected at submit naming the field; one zygote serves many
jobs.

The compiler profile (backends "triton" and "cuda", whose candidates run
compilers in their sandbox) is checked through the harness's --once mode --
the same Job code and sandbox library as a zygote's job -- because the
kernelbench workflow accepts only torch candidates on a CPU: a "cuda"
candidate whose load_inline builds CPU-only C++ (ninja, /bin/sh, c++,
cc1plus, as, collect2, ld, all in the sandbox) is judged correct; exec of a
program that is not listed (python3) or of a file the candidate wrote fails
with EACCES; socket() still kills, in the candidate and in a process it
forks; a listed program (/bin/sh) cannot read a file outside the sandbox; a
process left running in a group of its own does not outlive the job; the
reference of a "cuda" job and a torch candidate still die on exec (SIGSYS).
These skip without gcc and ninja, or without Landlock (which the profile
requires); the load_inline build also without torch's C++ headers
(Debian: libtorch-dev, pybind11-dev).

Skips (77) when the configured interpreter (KGYM_PYTHON, default
/usr/bin/python3) cannot import torch, or the python plugin was not built.
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import kgymtest as k

PY = os.environ.get("KGYM_PYTHON", "/usr/bin/python3")
EXAMPLES = os.path.join(k.srcdir(), "examples", "kernelbench")
HARNESS = os.path.join(k.srcdir(), "plugins", "python", "kgym_harness.py")


def plugin_path(name):
    return os.path.join(k.builddir(), "plugins", ".libs", name + ".so")


def sandbox_lib():
    return os.path.join(k.builddir(), "plugins", "python", ".libs", "libkgym_sandbox.so")


def have_torch():
    try:
        p = subprocess.run([PY, "-c", "import torch"], capture_output=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return p.returncode == 0


class PyDaemon(k.Daemon):
    """A private kgymd with the kernelbench workflow and the python backend."""

    def __init__(self, python_conf=None, kernelbench_conf=None, **kw):
        self.pdir = tempfile.mkdtemp(prefix="kgym-plugins-")
        for name in ("kernelbench", "python"):
            dst = os.path.join(self.pdir, name + ".so")
            shutil.copyfile(plugin_path(name), dst)
            os.chmod(dst, 0o755)
        keys = {"interpreter": PY, "harness": HARNESS, "sandbox_lib": sandbox_lib(),
                "correctness_timeout": "10", "timing_timeout": "60", "max_output_bytes": "256M"}
        kprobe = os.path.join(k.builddir(), "plugins", "python", ".libs", "libkgym_kprobe.so")
        if os.path.exists(kprobe):      # built with CUDA: GPU candidates are profiled
            keys["kprobe_lib"] = kprobe
        keys.update(python_conf or {})
        conf = "[plugin.python]\n" + "".join("%s = %s\n" % kv for kv in sorted(keys.items()))
        if kernelbench_conf:
            conf += "[plugin.kernelbench]\n" + "".join("%s = %s\n" % kv for kv in sorted(kernelbench_conf.items()))
        kw.setdefault("workers_conf", "cpu_workers = 2\ncompile_deadline = 120\ncorrectness_deadline = 120\n"
                                      "timing_deadline = 120\njob_deadline = 120\nstart_timeout = 60")
        super().__init__(plugin_dirs=[self.pdir], extra_conf=conf, **kw)

    def cleanup(self):
        super().cleanup()
        shutil.rmtree(self.pdir, ignore_errors=True)


def read(path):
    with open(path) as f:
        return f.read()


def task(task_id, reference, kernel, **payload):
    p = {"reference_code": reference, "kernel_code": kernel, "backend": "torch", "device": "cpu",
         "num_correct_trials": 5, "num_perf_trials": 10, "num_warmup": 1}
    p.update(payload)
    return {"task_id": task_id, "workflow": "kernelbench", "timeout_s": 300, "payload": p}


def example(problem, variant, task_id=None, **payload):
    d = os.path.join(EXAMPLES, problem)
    return task(task_id or "%s-%s" % (problem, variant), read(os.path.join(d, "reference.py")),
                read(os.path.join(d, variant + ".py")), **payload)


def run_tasks(d, tasks, timeout=600):
    """Submit and wait; {task_id: result}."""
    c = d.connect()
    c.sock.settimeout(timeout)
    try:
        r = c.request({"op": "submit", "tasks": tasks})
        k.check(r["ok"] and not r["rejected"], "all accepted: %r" % (r,))
        ids = [a["task_id"] for a in r["accepted"]]
        rid = c.send({"op": "wait", "task_ids": ids, "timeout_ms": timeout * 1000})
        events, final = c.collect_wait(rid)
        k.check(final.get("ok") and not final.get("pending"), "all ended: %r" % (final,))
        return {e["task_id"]: e["result"] for e in events}
    finally:
        c.close()


def show(res):
    return json.dumps({key: res.get(key) for key in ("status", "compiled", "correctness", "error_code",
                                                       "error_message", "kernel_runtime")})[:1500]


RELU_REF = read(os.path.join(EXAMPLES, "relu", "reference.py"))

CANDIDATE_HEAD = "import torch\nimport torch.nn as nn\n\n\n"


def relu_candidate(body, prelude=""):
    """A ModelNew for the ReLU problem whose forward is `body` (one line)."""
    return (CANDIDATE_HEAD + prelude + "class ModelNew(nn.Module):\n    def __init__(self):\n"
            "        super().__init__()\n\n    def forward(self, x):\n        %s\n" % body)


# ------------------------------------------------------------ the compiler profile (--once)

ONCE_LIMITS = {"memory_bytes": 16 << 30, "max_files": 256, "max_processes": 1024, "max_file_bytes": 64 << 20,
               "max_output_bytes": 256 << 20, "compile_timeout": 300, "correctness_timeout": 60,
               "timing_timeout": 60}

# What a candidate that got past the static checks could write (a pickle
# naming any function in bytes the checks do not read was such a road; the
# checks now refuse pickle): these tests run with --no-static-checks, so
# that what they test is the sandbox behind the checks.
SNEAK = ("import pickle\n_imp = pickle.loads(b'cbuiltins\\n__import__\\n.')\n"
         "_sp = _imp('sub' + 'process')\n"
         "_os = _imp('o' + 's')\n")

# A "cuda" candidate must call load_inline somewhere (static check); these
# never get that far.
UNUSED_LOAD_INLINE = ("from torch.utils.cpp_extension import load_inline\n\n\n"
                      "def _never():\n    return load_inline(name='x', cpp_sources='', functions=[])\n\n\n")

CPU_LOAD_INLINE = CANDIDATE_HEAD + '''from torch.utils.cpp_extension import load_inline

CPP_SRC = r"""
#include <torch/extension.h>

torch::Tensor relu_forward(torch::Tensor x)
{
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const float *p = xc.data_ptr<float>();
    float *q = y.data_ptr<float>();
    for (int64_t i = 0; i < xc.numel(); i++)
        q[i] = p[i] > 0.f ? p[i] : 0.f;
    return y;
}
"""

ext = load_inline(name="kgym_relu_cpu", cpp_sources=CPP_SRC, functions=["relu_forward"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return ext.relu_forward(x)
'''


def run_once(kernel, backend="cuda", reference=None, static_checks=True, request=None, limits=None, args=()):
    """One job through `kgym_harness.py --once` with a worker's environment;
    the result object.  static_checks=False runs it past kgym_static (tests
    of the defence behind the checks)."""
    tmp = tempfile.mkdtemp(prefix="kgym-once-")
    try:
        job = {"request": dict({"reference_code": reference or RELU_REF, "kernel_code": kernel, "backend": backend,
                                "device": "cpu", "num_correct_trials": 5, "num_perf_trials": 10, "num_warmup": 1},
                               **(request or {})),
               "limits": dict(ONCE_LIMITS, **(limits or {}))}
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": tmp, "TMPDIR": tmp, "LANG": "C.UTF-8"}
        p = subprocess.run([PY, "-I", "-B", HARNESS, "--once", "--sandbox-lib", sandbox_lib()] +
                           ([] if static_checks else ["--no-static-checks"]) + list(args),
                           input=json.dumps(job), capture_output=True, text=True, cwd=tmp, env=env, timeout=900)
        k.check(p.returncode == 0, "the harness exited %d: %s" % (p.returncode, p.stderr[-3000:]))
        r = json.loads(p.stdout)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    msg = r.get("error_message") or ""
    if "needs Landlock" in msg:
        raise k.Skip("this kernel has no Landlock, which the compiler profile needs")
    if r.get("error_code") == "SYSTEM_ERROR" and ("needs ninja" in msg or "needs a C compiler" in msg):
        raise k.Skip(msg)
    return r


def need_toolchain():
    for tool in ("gcc", "c++", "ninja"):
        if shutil.which(tool, path="/usr/local/bin:/usr/bin:/bin") is None:
            raise k.Skip("no %s: the compiler profile's tests need gcc, g++ and ninja" % tool)


def test_load_inline_cpu_in_sandbox():
    """A real build in the compiler profile: ninja -> sh -> c++ -> cc1plus,
    as, collect2, ld, then the .so is loaded and judged."""
    need_toolchain()
    probe = subprocess.run([PY, "-c", "import os, torch.utils.cpp_extension as c\n"
                            "d = c.include_paths() + ['/usr/include']\n"
                            "print(any(os.path.exists(os.path.join(p, 'torch', 'extension.h')) for p in d) and "
                            "any(os.path.exists(os.path.join(p, 'pybind11', 'pybind11.h')) for p in d))"],
                           capture_output=True, text=True, timeout=300)
    if probe.stdout.strip() != "True":
        raise k.Skip("torch's C++ headers are not installed (Debian: libtorch-dev, pybind11-dev)")
    r = run_once(CPU_LOAD_INLINE)
    k.check(r["status"] == "completed" and r["compiled"] is True and r["correctness"] is True, show(r))
    k.check(r["kernel_runtime"] > 0 and r["metadata"]["timed_outputs_checked"] >= 16, show(r))
    sb = r["metadata"]["sandbox"]
    k.check(sb["seccomp"] is True and sb["landlock_abi"] > 0 and sb["candidate_profile"] == "compilers", sb)


def test_compiler_profile_exec_unlisted():
    """python3 is not a compiler: exec fails with EACCES (Landlock), and the
    candidate's PermissionError is a SANDBOX_VIOLATION."""
    need_toolchain()
    r = run_once(CANDIDATE_HEAD + SNEAK + UNUSED_LOAD_INLINE +
                 "_sp.run(['/usr/bin/python3', '-c', 'pass'])\n" + relu_candidate("return x.clamp_min(0)"), static_checks=False)
    k.check(r["status"] == "failed" and r["error_code"] == "SANDBOX_VIOLATION", show(r))
    k.check("Permission denied" in r["error_message"] and "python3" in r["error_message"], show(r))


def test_compiler_profile_exec_own_file():
    """What the candidate writes is never executable, x bits or not."""
    need_toolchain()
    body = ("_fd = _os.open('own.sh', _os.O_WRONLY | _os.O_CREAT, 0o755)\n"
            "_os.write(_fd, b'#!/bin/sh\\nexit 0\\n')\n_os.close(_fd)\n"
            "_sp.run(['./own.sh'])\n")
    r = run_once(CANDIDATE_HEAD + SNEAK + UNUSED_LOAD_INLINE + body + relu_candidate("return x.clamp_min(0)"), static_checks=False)
    k.check(r.get("error_code") == "SANDBOX_VIOLATION", show(r))
    k.check("Permission denied" in r["error_message"] and "own.sh" in r["error_message"], show(r))


def test_compiler_profile_socket_kills():
    """The compiler profile adds no socket: it kills, in the candidate and in
    a process the candidate forks (which inherits the filter)."""
    need_toolchain()
    r = run_once(CANDIDATE_HEAD + SNEAK + UNUSED_LOAD_INLINE + "pickle.loads(b'csocket\\nsocket\\n.')()\n" +
                 relu_candidate("return x"), static_checks=False)
    k.check(r["status"] == "failed" and r["error_code"] == "SANDBOX_VIOLATION", show(r))
    k.check("SIGSYS" in r["error_message"], show(r))
    body = ("_pid = _os.fork()\n"
            "if _pid == 0:\n    pickle.loads(b'csocket\\nsocket\\n.')()\n    _os._exit(0)\n"
            "_st = _os.waitpid(_pid, 0)[1]\n"
            "raise RuntimeError('forked child: signal %d, exit %d' % (_os.WTERMSIG(_st) if _os.WIFSIGNALED(_st) "
            "else 0, _os.WEXITSTATUS(_st) if _os.WIFEXITED(_st) else -1))\n")
    r = run_once(CANDIDATE_HEAD + SNEAK + UNUSED_LOAD_INLINE + body + relu_candidate("return x"), static_checks=False)
    k.check(r.get("error_code") == "COMPILATION_ERROR", show(r))
    k.check("forked child: signal %d, exit -1" % signal.SIGSYS in r["error_message"], show(r))


def test_compiler_profile_landlock_inherited():
    """A listed program (/bin/sh) runs, but inside the candidate's Landlock
    domain: a file outside the sandbox stays unreadable to it."""
    need_toolchain()
    outside = tempfile.mkdtemp(prefix="kgym-outside-")
    try:
        secret = os.path.join(outside, "secret")
        with open(secret, "w") as f:
            f.write("kgym-secret-%s\n" % os.urandom(4).hex())
        os.chmod(outside, 0o755)
        os.chmod(secret, 0o644)
        body = ("_r = _sp.run(['/bin/sh', '-c', 'echo sh-ran; read x < %s && echo \"$x\"'], capture_output=True, "
                "text=True)\nraise RuntimeError('sh: rc %%d: %%r %%r' %% (_r.returncode, _r.stdout, _r.stderr))\n"
                % secret)
        r = run_once(CANDIDATE_HEAD + SNEAK + UNUSED_LOAD_INLINE + body + relu_candidate("return x"), static_checks=False)
        with open(secret) as f:
            content = f.read().strip()
    finally:
        shutil.rmtree(outside, ignore_errors=True)
    k.check(r.get("error_code") == "COMPILATION_ERROR", show(r))
    k.check("sh-ran" in r["error_message"], "the listed shell ran: %s" % show(r))
    k.check(content not in r["error_message"] and "rc 0" not in r["error_message"], show(r))
    k.check("cannot open" in r["error_message"] or "Permission denied" in r["error_message"], show(r))


def test_compiler_profile_no_leftovers():
    """A process the candidate leaves running, in a process group of its
    own, dies with the job (the supervisor is the job's subreaper)."""
    need_toolchain()
    marker = "kgym-leftover-%s" % os.urandom(4).hex()
    body = "_sp.Popen(['/bin/sh', '-c', ': %s; while :; do :; done'], process_group=0)\n" % marker
    r = run_once(CANDIDATE_HEAD + SNEAK + UNUSED_LOAD_INLINE + body + relu_candidate("return x.clamp_min(0)"), static_checks=False)
    k.check(r["status"] == "completed" and r["correctness"] is True, show(r))
    left = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                if marker.encode() in f.read():
                    left.append(pid)
        except OSError:
            pass
    for pid in left:
        os.kill(int(pid), signal.SIGKILL)
    k.check(not left, "processes outlived the job: %r" % left)


def test_strict_profile_still_kills_exec():
    """The reference of a "cuda" job, and a torch candidate, keep the strict
    profile: exec is death by SIGSYS."""
    need_toolchain()
    ref = RELU_REF.replace("import torch\n", "import torch\nimport subprocess\n"
                           "subprocess.run(['/bin/sh', '-c', 'true'])\n", 1)
    k.check(ref != RELU_REF, "the reference was changed")
    r = run_once(CANDIDATE_HEAD + UNUSED_LOAD_INLINE + relu_candidate("return x.clamp_min(0)"), reference=ref)
    k.check(r["status"] == "failed" and r["error_code"] == "VALIDATION_ERROR", show(r))
    k.check("reference" in r["error_message"] and "SIGSYS" in r["error_message"], show(r))
    r = run_once(CANDIDATE_HEAD + SNEAK + "_sp.run(['/bin/sh', '-c', 'true'])\n" +
                 relu_candidate("return x.clamp_min(0)"), backend="torch", static_checks=False)
    k.check(r.get("error_code") == "SANDBOX_VIOLATION" and "SIGSYS" in r["error_message"], show(r))
    k.check(r["metadata"]["sandbox"]["candidate_profile"] == "python", r["metadata"]["sandbox"])


# ------------------------------------------------------------ tests

D = None   # one daemon for the whole file: each worker's zygote starts once


def test_examples():
    """Every torch example gets the verdict expected.json gives it."""
    expected = json.loads(read(os.path.join(EXAMPLES, "expected.json")))
    tasks = []
    for key, exp in sorted(expected.items()):
        problem, variant = key.split("/")
        if exp.get("device") == "cpu":
            tasks.append(example(problem, variant, task_id=key.replace("/", "-")))
    k.check(len(tasks) >= 12, "at least 6 problems with a correct and a wrong torch candidate")
    results = run_tasks(D, tasks)
    precomputed = 0
    for t in tasks:
        key = t["task_id"].replace("-", "/", 1)
        exp, res = expected[key], results[t["task_id"]]
        what = "%s: %s" % (key, show(res))
        for field in ("status", "correctness", "error_code"):
            k.check(res.get(field) == exp[field], "%s (expected %s %r)" % (what, field, exp[field]))
        k.check(res["compiled"] is True, what)
        meta = res["metadata"]
        k.check(meta["sandbox"]["seccomp"] is True, "%s: the candidate ran under seccomp" % what)
        k.check(meta["device"] == "cpu" and meta["workflow"] == "kernelbench", what)
        trials = res["correctness_trials"]
        k.check(len([x for x in trials if not x["signed_inputs"]]) == 5, "%s: 5 seeded trials" % what)
        if exp["correctness"]:
            k.check(all(x["passed"] for x in trials if x.get("passed") is not None), what)
            k.check(res["kernel_runtime"] > 0 and res["reference_runtime"] > 0 and res["speedup"] > 0, what)
            tk = res["timing"]["kernel"]
            # A median under the clock's resolution is reported as the
            # resolution (an upper bound; a loaded CPU's can be large).
            k.check(tk["trials"] >= 1 and (tk["below_resolution"] or tk["min_ms"] <= tk["median_ms"] <= tk["max_ms"]),
                    what)
            k.check(tk["median_ms"] >= tk["resolution_ms"] > 0, what)
            # Every call of the candidate is checked: trials, warm-up, timed.
            k.check(meta["timed_outputs_checked"] >= tk["trials"] + 1 + len(trials),
                    "%s: every call checked (%s)" % (what, meta["timed_outputs_checked"]))
            k.check(tk["clock"] == "judge_wall_clock" and tk["overhead_ms"] >= 0, what)
            precomputed += 1
        else:
            k.check(res["kernel_runtime"] == -1 and res["speedup"] == -1, what)
            k.check("differ" in res["error_message"], what)
    k.check(precomputed > 0, "no correct example")


def test_forbidden_import():
    src = relu_candidate("return x.clamp_min(0)", "import os\n")
    line = src.splitlines().index("import os") + 1
    others = [
        (relu_candidate("return x.clamp_min(0)", "from subprocess import run\n"), "subprocess"),
        (relu_candidate("return x.clamp_min(0)", "t = torch.cuda.Event(enable_timing=True)\n"),
         "torch.cuda.Event"),
        (relu_candidate("return x.clamp_min(0)", "class T(torch.Tensor):\n    pass\n"), "subclass"),
        (relu_candidate("return x.clamp_min(0)", "torch.allclose = lambda *a, **k: True\n"), "patching"),
        (relu_candidate("return __import__('os').getpid()"), "__import__"),
        (relu_candidate("return x.clamp_min(0)", "import time\n"), "time"),
    ]
    tasks = [task("forbid-os", RELU_REF, src)] + [task("forbid-%d" % i, RELU_REF, s) for i, (s, _) in
                                                  enumerate(others)]
    res = run_tasks(D, tasks)
    r = res["forbid-os"]
    k.check(r["status"] == "failed" and r["error_code"] == "VALIDATION_ERROR" and r["compiled"] is False, show(r))
    k.check("line %d" % line in r["error_message"] and "'os'" in r["error_message"], show(r))
    for i, (_, word) in enumerate(others):
        r = res["forbid-%d" % i]
        k.check(r["error_code"] == "VALIDATION_ERROR" and word in r["error_message"], "%s: %s" % (word, show(r)))


def test_syntax_error_is_compilation_error():
    r = run_tasks(D, [task("syntax", RELU_REF, relu_candidate("return x.clamp_min(0"))])["syntax"]
    k.check(r["status"] == "failed" and r["error_code"] == "COMPILATION_ERROR" and not r["compiled"], show(r))
    k.check("SyntaxError" in r["error_message"] and "line" in r["error_message"], show(r))


def test_sandbox_socket_killed():
    """Past the static checks (--no-static-checks; socket.socket named in a
    pickle), socket() meets seccomp."""
    prelude = "import pickle\npickle.loads(b'csocket\\nsocket\\n.')()\n"
    r = run_once(relu_candidate("return x", prelude), backend="torch", static_checks=False)
    k.check(r["status"] == "failed" and r["error_code"] == "SANDBOX_VIOLATION", show(r))
    k.check("SIGSYS" in r["error_message"], show(r))


def test_sandbox_task_store_unreadable():
    store = os.path.join(D.state_dir, "tasks.db")
    k.check(os.path.exists(store), "the store is at %s" % store)
    prelude = "_stolen = open(%r, 'rb').read()\n" % store
    r = run_tasks(D, [task("store", RELU_REF, relu_candidate("return x", prelude))])["store"]
    if r["metadata"].get("sandbox", {}).get("landlock_abi") == 0:
        raise k.Skip("the kernel has no Landlock: files are not restricted here")
    k.check(r["status"] == "failed" and r["error_code"] == "SANDBOX_VIOLATION", show(r))
    k.check("tasks.db" in r["error_message"], show(r))


def test_identity_fails_signed_trial():
    r = run_tasks(D, [task("identity", RELU_REF, relu_candidate("return x.clone()"))])["identity"]
    k.check(r["status"] == "completed" and r["correctness"] is False, show(r))
    k.check(r["error_code"] == "CORRECTNESS_ERROR" and "signed-input trial" in r["error_message"], show(r))
    signed = [x for x in r["correctness_trials"] if x["signed_inputs"]]
    k.check(len(signed) == 1 and signed[0]["passed"] is False, r["correctness_trials"])
    k.check(all(x["passed"] for x in r["correctness_trials"] if not x["signed_inputs"]), show(r))
    k.check(r["metadata"]["hack"]["kind"] == "only_correct_on_nonnegative_inputs", r["metadata"])


def test_runtime_error_and_crash():
    raising = relu_candidate("return self.helper(x)").replace(
        "    def forward", "    def helper(self, x):\n        raise ValueError('kernel exploded')\n\n    def forward")
    crash = relu_candidate("return faulthandler._sigsegv()", "import faulthandler\n")
    res = run_tasks(D, [task("raises", RELU_REF, raising), task("crash", RELU_REF, crash)])
    r = res["raises"]
    k.check(r["status"] == "completed" and r["compiled"] is True and r["correctness"] is False, show(r))
    k.check(r["error_code"] == "RUNTIME_ERROR" and "kernel exploded" in r["error_message"], show(r))
    k.check("ValueError" in r["error_message"] and "line" in r["error_message"], show(r))
    r = res["crash"]
    k.check(r["status"] == "completed" and r["compiled"] is True and r["correctness"] is False, show(r))
    k.check(r["error_code"] == "RUNTIME_ERROR" and "SIGSEGV" in r["error_message"], show(r))


def test_hang_times_out():
    t0 = time.monotonic()
    r = run_tasks(D, [task("hang", RELU_REF, relu_candidate("return self.spin(x)").replace(
        "    def forward", "    def spin(self, x):\n        while True:\n            pass\n\n    def forward"))])["hang"]
    took = time.monotonic() - t0
    # The candidate's hang, once its model is ready: scored (completed), so
    # that a wrong kernel cannot hang to have its task dropped.
    k.check(r["status"] == "completed" and r["error_code"] == "TIMEOUT_ERROR", show(r))
    k.check("correctness phase" in r["error_message"], show(r))
    k.check(r["compiled"] is True, show(r))
    # By the plugin's correctness_timeout (10 s here), which python.c sends
    # with the job, not by a default of the harness's own (100 s).
    k.check(took < 60, "%.1f s: %s" % (took, show(r)))


def test_task_deadline_owns_the_phases():
    """The task's timeout_s (the daemon's clock) reaches the harness: a hang
    ends as the harness's TIMEOUT_ERROR naming the phase before the daemon's
    own deadline fires, even with phase limits longer than the task."""
    P = PyDaemon(python_conf={"correctness_timeout": "100", "timing_timeout": "100"},
                 workers_conf="cpu_workers = 1\ncompile_deadline = 120\ncorrectness_deadline = 120\n"
                              "timing_deadline = 120\njob_deadline = 120\nstart_timeout = 60")
    try:
        P.start()
        # The first job waits for the zygote's imports: warm it up.
        r = run_tasks(P, [task("warm", RELU_REF, relu_candidate("return torch.relu(x)"))])["warm"]
        k.check(r["status"] == "completed" and r["correctness"] is True, show(r))
        hang = task("hang-deadline", RELU_REF, relu_candidate("return self.spin(x)").replace(
            "    def forward", "    def spin(self, x):\n        while True:\n            pass\n\n    def forward"))
        hang["timeout_s"] = 24
        t0 = time.monotonic()
        r = run_tasks(P, [hang])["hang-deadline"]
        took = time.monotonic() - t0
        k.check(r["status"] == "completed" and r["error_code"] == "TIMEOUT_ERROR", show(r))
        # Without the task's deadline the harness would wait 100 s and the
        # daemon end the task first: "the task ran past its timeout".
        k.check("correctness phase" in r["error_message"], show(r))
        k.check("ran past its timeout" not in r["error_message"], show(r))
        k.check(r["compiled"] is True and took < 24, "%.1f s: %s" % (took, show(r)))
    finally:
        try:
            P.stop()
        finally:
            P.cleanup()


def test_reward_hacks():
    mutate = relu_candidate("return x.clamp_min_(0)")
    # Right for the correctness trials (5 seeded + the signed one), wrong when timed.
    twofaced = relu_candidate("return self.f(x)", "calls = [0]\n\n\n").replace(
        "    def forward", "    def f(self, x):\n        calls[0] += 1\n"
        "        return x.clamp_min(0) if calls[0] <= 6 else torch.zeros_like(x)\n\n    def forward")
    res = run_tasks(D, [task("mutate", RELU_REF, mutate), task("twofaced", RELU_REF, twofaced)])
    r = res["mutate"]
    k.check(r["correctness"] is False and r["error_code"] == "REWARD_HACK", show(r))
    k.check(r["metadata"]["hack"]["kind"] == "input_mutation", r["metadata"])
    r = res["twofaced"]
    k.check(r["status"] == "completed" and r["correctness"] is False and r["error_code"] == "REWARD_HACK", show(r))
    k.check(r["metadata"]["hack"]["kind"] == "timed_output_mismatch", r["metadata"])


def test_reference_timing_cache():
    # A reference no earlier test used (the key covers its code).
    tag = "\n# cache test %s\n" % os.urandom(8).hex()

    def t(task_id, **kw):
        x = example("softmax", "torch_correct", task_id=task_id, **kw)
        x["payload"]["reference_code"] += tag
        return x
    first = run_tasks(D, [t("cache-1")])["cache-1"]
    second = run_tasks(D, [t("cache-2")])["cache-2"]
    forced = run_tasks(D, [t("cache-3", force_refresh=True)])["cache-3"]
    k.check(first["metadata"]["reference_timing_cache"] == "miss", first["metadata"])
    k.check(first["metadata"]["reference_timing_cached"] is False, first["metadata"])
    k.check(second["metadata"]["reference_timing_cache"] == "hit", second["metadata"])
    k.check(second["metadata"]["reference_timing_cached"] is True, second["metadata"])
    k.check(second["reference_runtime"] == first["reference_runtime"], "the cached median is the first's")
    k.check(forced["metadata"]["reference_timing_cache"] == "refresh", forced["metadata"])
    k.check(forced["metadata"]["reference_timing_cached"] is False, forced["metadata"])
    # A measurement under load (here the test's own CPU burners, as another
    # job's candidate could) must not raise the entry: it only goes down.
    with cpu_burners(4):
        loaded = run_tasks(D, [t("cache-4", force_refresh=True)])["cache-4"]
    after = run_tasks(D, [t("cache-5")])["cache-5"]
    k.check(after["metadata"]["reference_timing_cache"] == "hit", after["metadata"])
    lowest = min(first["reference_runtime"], forced["reference_runtime"], loaded["reference_runtime"])
    k.check(after["reference_runtime"] == lowest, "the cache keeps the lowest median: %r, measured %r" % (
        after["reference_runtime"], [first["reference_runtime"], forced["reference_runtime"],
                                     loaded["reference_runtime"]]))


def test_no_host_paths_in_errors():
    """Error text names no place of the host: an exception quoting torch's
    own file, an executor that prints it and crashes (its output's tail
    is quoted), and its own command line repr()'d keep only the file's
    last name."""
    where = "torch.__file__"
    cases = {
        "hostpath-raise": relu_candidate("raise RuntimeError('torch lives at ' + %s)" % where),
        "hostpath-exit": relu_candidate("print('torch lives at', %s, flush=True); faulthandler._sigsegv()" % where,
                                        "import faulthandler\n"),
        # A command line, repr()'d: "\\x00" before each path (its own
        # /proc/self/cmdline is out of reach on a CPU: built here instead).
        "hostpath-cmdline": relu_candidate("raise RuntimeError('torch lives at \u2026/__init__.py; ' + "
                                           "repr(chr(0).join(['python3', torch.__file__, '--fd', '3'])))"),
    }
    res = run_tasks(D, [task(tid, RELU_REF, code) for tid, code in cases.items()])
    host = re.compile(r"(?<![\w.:/])/(usr|opt|tmp|home|root|etc|var|lib|proc|srv|run)\b")
    for tid, r in res.items():
        msg = r.get("error_message") or ""
        k.check(r["status"] == "failed" or r.get("correctness") is False, show(r))
        k.check("torch lives at" in msg and "\u2026/__init__.py" in msg, "%s: the path's last name stays: %s"
                % (tid, show(r)))
        leaked = host.search(json.dumps(r, ensure_ascii=False))
        k.check(leaked is None, "%s: a host path in the result (%r): %s" % (tid, leaked and leaked.group(0), show(r)))
        k.check(os.path.dirname(HARNESS) not in msg and D.dir not in msg, "%s: %s" % (tid, msg))


class cpu_burners:
    """n processes spinning on the CPU while the block runs."""

    def __init__(self, n):
        self.n = n

    def __enter__(self):
        self.procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(self.n)]
        return self

    def __exit__(self, *exc):
        for p in self.procs:
            p.kill()
            p.wait()


def test_reference_recheck_config():
    """A bad reference_recheck: the kernelbench workflow is refused (kgymd
    keeps serving what it can), and the refusal names the key and what it
    expects (op plugins)."""
    B = PyDaemon(kernelbench_conf={"reference_recheck": "often"})
    try:
        B.start()
        refused = B.request({"op": "plugins"}).get("refused") or []
        why = [r.get("reason", "") for r in refused if r.get("path", "").endswith("kernelbench.so")]
        k.check(why and "reference_recheck = often: expected a number from 0 to 1000000" in why[0], refused)
        B.stop()
    finally:
        B.cleanup()


def test_max_output_bytes_config():
    """max_output_bytes: auto (the default; 4G on a CPU, a sixth of the
    device's memory on a GPU) loads the python backend; a value that is
    neither a size nor auto is refused, naming the key."""
    for value, ok in (("auto", True), ("lots", False)):
        D = PyDaemon(python_conf={"max_output_bytes": value})
        try:
            D.start()
            refused = D.request({"op": "plugins"}).get("refused") or []
            why = [r.get("reason", "") for r in refused if r.get("path", "").endswith("python.so")]
            if ok:
                k.check(not why, "%s: %s" % (value, refused))
            else:
                k.check(why and "max_output_bytes = lots: expected a number or a size" in why[0],
                        "%s: %s" % (value, refused))
            D.stop()
        finally:
            D.cleanup()


def test_reference_timing_recheck():
    """reference_recheck = 1: every would-be hit is measured again (1 in n
    at random otherwise; 0 never), and says so."""
    R = PyDaemon(kernelbench_conf={"reference_recheck": "1"},
                 workers_conf="cpu_workers = 1\nstart_timeout = 60")
    try:
        R.start()
        tag = "\n# recheck test %s\n" % os.urandom(8).hex()
        res = []
        for i in range(2):
            x = example("relu", "torch_correct", task_id="recheck-%d" % i)
            x["payload"]["reference_code"] += tag
            res.append(run_tasks(R, [x])["recheck-%d" % i])
        k.check(res[0]["metadata"]["reference_timing_cache"] == "miss", res[0]["metadata"])
        k.check(res[1]["metadata"]["reference_timing_cache"] == "recheck", res[1]["metadata"])
        k.check(res[1]["metadata"]["reference_timing_cached"] is False, res[1]["metadata"])
        R.stop()
    finally:
        R.cleanup()


def test_zygote_serves_many_jobs():
    res = run_tasks(D, [example("relu", "torch_correct", task_id="z%d" % i) for i in range(4)])
    pids = {}
    for r in res.values():
        k.check(r["correctness"] is True and "zygote_pid" in r.get("metadata", {}), show(r))
        pids.setdefault(r["metadata"]["zygote_pid"], []).append(r["metadata"]["zygote_jobs"])
    k.check(len(pids) <= 2, "one zygote per CPU worker: %r" % pids)
    k.check(max(max(v) for v in pids.values()) >= 3, "a zygote served several jobs: %r" % pids)


def test_jobs_of_one_reference_in_a_row():
    """Jobs of one reference in a row, right and wrong candidates mixed, a
    candidate that fails early, then another reference, then a reference
    that fails its own trials: every verdict is its own."""
    seq = []
    for i, variant in enumerate(["torch_correct", "torch_correct", "torch_wrong", "torch_correct",
                                 "torch_wrong", "torch_correct"]):
        t = example("mlp", variant, task_id="seq%d" % i)
        seq.append(run_tasks(D, [t])[t["task_id"]])
    for i, r in enumerate(seq):
        want = i not in (2, 4)          # the torch_wrong ones
        k.check(r["correctness"] is want and r["status"] == "completed", "job %d: %s" % (i, show(r)))
    broken = example("mlp", "torch_correct", task_id="seqbroken")
    broken["payload"]["kernel_code"] = "raise RuntimeError('no module for you')\n" + broken["payload"]["kernel_code"]
    r = run_tasks(D, [broken])["seqbroken"]
    k.check(r["error_code"] == "COMPILATION_ERROR" and "no module for you" in r["error_message"], show(r))
    other = [run_tasks(D, [example("relu", "torch_correct", task_id="seqr%d" % i)])["seqr%d" % i]
             for i in range(2)]
    k.check(all(r["correctness"] is True for r in other), [show(r) for r in other])
    bad = task("seqbad", RELU_REF.replace("return torch.relu(x)", "raise RuntimeError('reference broke')"),
               relu_candidate("return torch.relu(x)"))
    r = run_tasks(D, [bad])["seqbad"]
    k.check(r["error_code"] == "VALIDATION_ERROR" and "reference broke" in r["error_message"], show(r))
    after = run_tasks(D, [example("relu", "torch_correct", task_id="seqafter")])["seqafter"]
    k.check(after["correctness"] is True, show(after))


def copy_of(problem, tag, task_id, **extra):
    """The example's correct torch candidate for a copy of its reference
    that differs by a comment: a problem of its own (another affinity key,
    another judge server) that costs the same."""
    t = example(problem, "torch_correct", task_id=task_id)
    t["payload"]["reference_code"] += "\n# copy %s\n" % tag
    t.update(extra)
    return t


def submit_in_turn(*batches):
    """Submit each batch once the one before is accepted (the jobs of the
    first start while the rest are queued), then wait for all."""
    c = D.connect()
    c.sock.settimeout(600)
    try:
        ids = []
        for batch in batches:
            r = c.request({"op": "submit", "tasks": batch})
            k.check(r["ok"] and not r["rejected"], "all accepted: %r" % (r,))
            ids += [a["task_id"] for a in r["accepted"]]
        rid = c.send({"op": "wait", "task_ids": ids, "timeout_ms": 600000})
        events, final = c.collect_wait(rid)
        k.check(final.get("ok") and not final.get("pending"), "all ended: %r" % (final,))
        res = {e["task_id"]: e["result"] for e in events}
    finally:
        c.close()
    for r in res.values():
        k.check(r["correctness"] is True, show(r))
    return res


def reused_of(res, prefix):
    return sorted(tid for tid, r in res.items() if tid.startswith(prefix) and
                  (r.get("metadata") or {}).get("reference_process") == "reused")


def where_of(res):
    return sorted((tid, (r.get("metadata") or {}).get("reference_process"), (r.get("metadata") or {}).get("worker"))
                  for tid, r in res.items())


def test_affinity_keeps_a_problem_on_its_worker():
    """The pool sends a job to the worker whose judge server already has
    its reference (kgym_job_spec.affinity), looking past the head of the
    queue: two problems of equal cost queued in pairs (A A B B A A B B ...)
    behind two busy CPU workers.  In queue order a worker would mostly get
    the other problem's job and start a judge and a reference again; with
    affinity each keeps its problem, and most jobs find their reference's
    judge server set up ("reused")."""
    block = [copy_of("relu", "C", "keep-block%d" % i) for i in range(2)]
    rest = [copy_of("relu", "AB"[(i // 2) % 2], "keep%d-%s" % (i, "AB"[(i // 2) % 2])) for i in range(12)]
    res = submit_in_turn(block, rest)
    reused = reused_of(res, "keep")
    print("  %d of 12 jobs on their reference's judge server" % len(reused))
    # Expected 8: all but each worker's first two jobs of its problem (a
    # worker switching pays a judge of its own, then a fresh server); about
    # none in queue order.
    k.check(len(reused) >= 5, "at least 5 of 12 jobs on their reference's judge server: %d; %r" % (
        len(reused), where_of(res)))


def test_affinity_spreads_problems():
    """Two problems of equal cost queued one after the other (A x4, B x4)
    behind two busy CPU workers: the second to be free starts on B rather
    than on A's second job, so each worker keeps one problem and most jobs
    find their judge server set up; without the spread both start on A and
    both switch to B."""
    block = [copy_of("relu", "C", "spread-block%d" % i) for i in range(2)]
    rest = [copy_of("relu", p, "spread%d-%s" % (i, p)) for i, p in enumerate("AAAABBBB")]
    res = submit_in_turn(block, rest)
    reused = [t for t in reused_of(res, "spread") if "block" not in t]
    print("  %d of 8 jobs on their reference's judge server" % len(reused))
    # Expected 4 or more (each worker's jobs of its problem after its first
    # two); about none without the spread, both workers switching twice.
    k.check(len(reused) >= 3, "at least 3 of 8 jobs on their reference's judge server: %d; %r" % (
        len(reused), where_of(res)))


def test_affinity_keeps_priorities():
    """Affinity never lets a task pass a more urgent one queued before it.
    Both workers busy with problem X, then queued: (1) a high-priority task
    of B before four low-priority ones of X: the first worker free (X's
    judge server set up) takes B all the same; (2) a low-priority task of A
    at the head, a high-priority one of B, a low-priority one of X: X's job
    does not pass B's (it may pass A's, of its own priority)."""
    def started(res, tid):
        m = res[tid].get("metadata") or {}
        return m.get("queue_ms", 0) + m.get("job_ms", 0) - m.get("backend_ms", 0)
    block = [copy_of("relu", "X", "prio1-block%d" % i) for i in range(2)]
    high = [copy_of("relu", "B", "prio1-high", priority="high")]
    low = [copy_of("relu", "X", "prio1-low%d" % i, priority="low") for i in range(4)]
    res = submit_in_turn(block, high + low)
    lows = sorted(started(res, "prio1-low%d" % i) for i in range(4))
    k.check(started(res, "prio1-high") < lows[1], "the high-priority task started at %.0f ms, after low ones "
            "(%s): %r" % (started(res, "prio1-high"), ", ".join("%.0f" % x for x in lows), where_of(res)))
    block = [copy_of("relu", "X", "prio2-block%d" % i) for i in range(2)]
    res = submit_in_turn(block, [copy_of("relu", "A", "prio2-a", priority="low")],
                         [copy_of("relu", "B", "prio2-b", priority="high"),
                          copy_of("relu", "X", "prio2-x", priority="low")])
    k.check(started(res, "prio2-b") < started(res, "prio2-x"), "the low-priority job of the idle worker's key "
            "passed the high-priority one queued before it: %r" % where_of(res))


def test_affinity_passes_the_head_8_times_at_most():
    """A job passed over for other workers' keys starts after 8 passes at
    most: both workers busy with problem X, then one job of A queued before
    twelve of X.  Each worker free would take X's next job; after 8 of
    them, A's goes first."""
    def started(res, tid):
        m = res[tid].get("metadata") or {}
        return m.get("queue_ms", 0) + m.get("job_ms", 0) - m.get("backend_ms", 0)
    block = [copy_of("relu", "X", "patience-block%d" % i) for i in range(2)]
    rest = [copy_of("relu", "A", "patience-a")] + [copy_of("relu", "X", "patience-x%d" % i) for i in range(12)]
    res = submit_in_turn(block, rest)
    xs = sorted(started(res, "patience-x%d" % i) for i in range(12))
    before = sum(1 for x in xs if x < started(res, "patience-a"))
    print("  %d of X's 12 jobs started before A's" % before)
    k.check(before <= 9, "%d of X's jobs started before A's (8 passes allowed, and one more may start "
            "beside it): %r" % (before, where_of(res)))


def test_remove_tree_tolerates_the_wipe():
    """The worker empties its directory once it has the answer, maybe
    before the job's supervisor removes the job's files: that must not make
    the supervisor fail after answering (its exit status would be taken for
    a job it did not answer)."""
    sys.path.insert(0, os.path.dirname(HARNESS))
    import kgym_harness as h
    # remove_tree may chmod a failing path's parent: keep the trees in a
    # directory of this test's own, never directly in /tmp.
    top = tempfile.mkdtemp(prefix="kgym-rmtree-")
    try:
        d = os.path.join(top, "job")
        os.makedirs(os.path.join(d, "a", "b"))
        os.chmod(os.path.join(d, "a"), 0)          # what a candidate may leave
        h.remove_tree(d)
        k.check(not os.path.exists(d), "the tree is gone")
        h.remove_tree(d)                            # gone already: no exception
        # Gone between shutil's look and its open (the worker's wipe, racing).
        os.mkdir(d)
        real_open = os.open

        def vanished(path, *a, **kw):
            if path == d and os.path.isdir(d):
                os.rmdir(d)                         # the wipe got there first
            return real_open(path, *a, **kw)
        os.open = vanished
        try:
            h.remove_tree(d)
        finally:
            os.open = real_open
    finally:
        shutil.rmtree(top, ignore_errors=True)


def test_validation_at_submit():
    base = example("relu", "torch_correct")["payload"]
    cases = [
        ({"kernel_code": None}, ["kernel_code", "required"]),
        ({"reference_code": 5}, ["reference_code", "string"]),
        ({"num_correct_trials": "5"}, ["num_correct_trials"]),
        ({"num_perf_trials": 0}, ["num_perf_trials"]),
        ({"run_performance": "yes"}, ["run_performance"]),
        ({"entry_point": "1abc"}, ["entry_point"]),
        ({"reference_backend": "jit"}, ["reference_backend", "jit"]),
        ({"device": "tpu"}, ["device", "tpu"]),
        ({"backend": "triton"}, ["device", "triton"]),
        ({"timeout": -1}, ["timeout"]),
        ({"min_custom_share": 1.5}, ["min_custom_share", "0 to 1"]),
        ({"min_custom_share": "half"}, ["min_custom_share", "number"]),
    ]
    tasks = []
    for i, (change, _) in enumerate(cases):
        p = dict(base)
        for key, v in change.items():
            if v is None:
                p.pop(key)
            else:
                p[key] = v
        tasks.append({"task_id": "bad%d" % i, "workflow": "kernelbench", "payload": p})
    r = D.request({"op": "submit", "tasks": tasks})
    k.check(r["ok"] and not r["accepted"] and len(r["rejected"]) == len(cases), r)
    for rej, (_, words) in zip(r["rejected"], cases):
        for w in words:
            k.check(w in rej["error"]["message"], "%r should name %r" % (rej["error"]["message"], w))
    # unknown fields are ignored
    good = example("relu", "torch_correct", task_id="unknown-fields")
    good["payload"].update(is_valid=True, verbose_errors=True, uuid="x")
    r = D.request({"op": "submit", "task": good})
    k.check(r["ok"] and r["accepted"], r)


def test_gpu_backends_need_a_gpu():
    """backend triton/cuda go to a GPU slot: with none, RESOURCE_ERROR."""
    t = example("relu", "torch_correct", task_id="no-gpu", device="cuda")
    t["payload"]["backend"] = "triton"
    r = run_tasks(D, [t])["no-gpu"]
    k.check(r["status"] == "failed" and r["error_code"] == "RESOURCE_ERROR", show(r))


def main():
    global D
    if not os.path.exists(plugin_path("python")) or not os.path.exists(sandbox_lib()):
        print("SKIP: the python plugin or libkgym_sandbox.so was not built")
        sys.exit(k.SKIP)
    if not have_torch():
        print("SKIP: %s cannot import torch (apt-get install python3-torch)" % PY)
        sys.exit(k.SKIP)
    # Cache hits are not re-measured at random here: test_reference_timing_cache
    # counts on a hit (test_reference_timing_recheck has a daemon of its own).
    D = PyDaemon(kernelbench_conf={"reference_recheck": "0"})
    try:
        D.start()
        tests = [test_examples, test_forbidden_import, test_syntax_error_is_compilation_error,
                 test_sandbox_socket_killed, test_sandbox_task_store_unreadable, test_identity_fails_signed_trial,
                 test_runtime_error_and_crash, test_hang_times_out, test_task_deadline_owns_the_phases,
                 test_reward_hacks,
                 test_reference_timing_cache, test_reference_timing_recheck, test_reference_recheck_config,
                 test_max_output_bytes_config,
                 test_no_host_paths_in_errors, test_zygote_serves_many_jobs, test_jobs_of_one_reference_in_a_row,
                 test_affinity_keeps_a_problem_on_its_worker, test_affinity_spreads_problems,
                 test_affinity_keeps_priorities, test_affinity_passes_the_head_8_times_at_most,
                 test_remove_tree_tolerates_the_wipe,
                 test_validation_at_submit,
                 test_gpu_backends_need_a_gpu,
                 test_compiler_profile_exec_unlisted, test_compiler_profile_exec_own_file,
                 test_compiler_profile_socket_kills, test_compiler_profile_landlock_inherited,
                 test_compiler_profile_no_leftovers, test_strict_profile_still_kills_exec,
                 test_load_inline_cpu_in_sandbox]
        try:
            k.run(tests)
        except SystemExit as e:
            if e.code not in (0, k.SKIP):
                sys.stderr.write("--- kgymd log (tail) ---\n" + D.read_log()[-15000:])
            raise
    finally:
        try:
            D.stop()
        finally:
            D.cleanup()


if __name__ == "__main__":
    main()
