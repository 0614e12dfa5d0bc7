#!/usr/bin/env python3
"""test_judge.py -- the trust boundary of the KernelBench-format path
(ARCHITECTURE.md, "The judge"): one candidate per class of reward
hack that an in-process harness cannot stop, run past the static checks
(`kgym_harness.py --once --no-static-checks`) so that what is tested is the
defence behind them, on the CPU (judge's wall clock, memfd buffers):

  clock_patch_mock     patches every timer in its process, sleeps 30 ms a
                       call: kernel_runtime must show the 30 ms
  seed_scan            searches gc, frames, modules and raw memory for the
                       task's seed: finds nothing (a control run with the
                       seed planted in its own code finds it: the scanner
                       works)
  lazy_subclass        a tensor subclass doing its work when materialised:
                       the 30 ms are on the judge's clock
  lazy_listlike        a list-like output: CORRECTNESS_ERROR naming the call
  right_where_checked  wrong on one random timed call: REWARD_HACK
                       timed_output_mismatch, every time (3 runs)
  mutate_inputs_timed  changes its input in timed calls only: REWARD_HACK
                       input_mutation
and the bad outputs a candidate may return (wrong shape, wrong dtype, not a
tensor, never done): a specific error naming the call.

Skips (77) without torch or the sandbox library, like test_python.py.
"""
import os
import subprocess
import sys

import kgymtest as k
import test_python as tp

EXPLOITS = os.path.join(k.srcdir(), "tests", "exploits", "python")
SOFTMAX = tp.read(os.path.join(tp.EXAMPLES, "softmax", "reference.py"))
SEED = "kgym-secret-seed-5f1d2c"


def exploit(name):
    return tp.read(os.path.join(EXPLOITS, name + ".py"))


def once(kernel, **request):
    return tp.run_once(kernel, backend="torch", reference=SOFTMAX, static_checks=False, request=request)


def correct_and_slow(r, what):
    k.check(r["correctness"] is True, "%s: %s" % (what, tp.show(r)))
    k.check(r["kernel_runtime"] >= 25.0, "%s: the judge's clock shows the 30 ms a call: %s" % (what, tp.show(r)))
    k.check(r["speedup"] < 0.5, "%s: no speedup gained: %s" % (what, tp.show(r)))


def test_clock_patch_has_no_effect():
    correct_and_slow(once(exploit("clock_patch_mock")), "clock_patch_mock")


def test_seed_scan_finds_nothing():
    # The scanner walks its mappings (/proc/self/maps), which a CPU
    # executor no longer reads and a GPU one still does: with that /proc
    # list off, what is tested is what matters -- no seed in its memory.
    def scan(kernel):
        return tp.run_once(kernel, backend="torch", reference=SOFTMAX, static_checks=False,
                           request={"seed": SEED}, limits={"private_proc": False})
    r = scan(exploit("seed_scan"))
    k.check(r["correctness"] is True and "FOUND" not in (r.get("error_message") or ""), tp.show(r))
    # The control: the same scanner with the needle in its own source.
    planted = exploit("seed_scan").replace("import ctypes", "# %s\nimport ctypes" % SEED, 1)
    r = scan(planted)
    k.check(r.get("error_code") == "RUNTIME_ERROR" and "FOUND" in (r.get("error_message") or ""),
            "the scanner finds a planted seed: %s" % tp.show(r))


def test_work_before_go_caught():
    r = once(exploit("early_done"))
    k.check(r.get("error_code") == "REWARD_HACK" and r["metadata"]["hack"]["kind"] == "work_before_go", tp.show(r))


def test_lazy_subclass_is_timed():
    correct_and_slow(once(exploit("lazy_subclass")), "lazy_subclass")


def test_lazy_listlike_refused():
    r = once(exploit("lazy_listlike"))
    k.check(r["correctness"] is False and r.get("error_code") == "CORRECTNESS_ERROR", tp.show(r))
    msg = r.get("error_message") or ""
    k.check("correctness trial 1 of 5" in msg and "LazyList" in msg, msg)


def test_right_where_checked_always_caught():
    for i in range(3):
        r = once(exploit("right_where_checked"))
        k.check(r.get("error_code") == "REWARD_HACK", "run %d: %s" % (i, tp.show(r)))
        k.check(r["metadata"]["hack"]["kind"] == "timed_output_mismatch", tp.show(r))


def test_unrepeatable_inputs_checked_interleaved():
    """A get_inputs() that gives other inputs for the same seed: the
    reference's runs cannot be deferred (inputs made again), so they
    interleave with the candidate's calls -- and every call is still
    checked: right_where_checked is caught, an honest candidate is not."""
    ref = SOFTMAX.replace("def get_inputs():\n    return [torch.randn(M, N) * 4]",
                          "def get_inputs():\n    import random\n    return [torch.randn(M, N) * 4 + random.random()]")
    k.check(ref != SOFTMAX, "the reference was rewritten")
    honest = "import torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n" \
             "    def forward(self, x):\n        return torch.softmax(x, dim=-1)\n"
    r = tp.run_once(honest, backend="torch", reference=ref, static_checks=False)
    k.check(r["correctness"] is True and r["metadata"]["reference_runs_deferred"] is False, tp.show(r))
    r = tp.run_once(exploit("right_where_checked"), backend="torch", reference=ref, static_checks=False)
    k.check(r.get("error_code") == "REWARD_HACK" and r["metadata"]["hack"]["kind"] == "timed_output_mismatch",
            tp.show(r))
    r = once(honest)
    k.check(r["correctness"] is True and r["metadata"]["reference_runs_deferred"] is True, tp.show(r))


def test_mutate_inputs_timed_caught():
    r = once(exploit("mutate_inputs_timed"))
    k.check(r.get("error_code") == "REWARD_HACK" and r["metadata"]["hack"]["kind"] == "input_mutation", tp.show(r))
    k.check("timed call" in r["error_message"] or "warm-up" in r["error_message"], r["error_message"])


CALL_COUNTER = """import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0
        self.first = None

    def forward(self, x):
        self.calls += 1
        out = torch.softmax(x, dim=-1)
%s
        return out
"""


def test_cached_first_output_caught():
    """Every call gets inputs from a new seed: the first call's outputs,
    returned again, are wrong at the second trial."""
    r = once(CALL_COUNTER % "        if self.first is None:\n            self.first = out.clone()\n"
                            "        out = self.first")
    k.check(r.get("error_code") == "CORRECTNESS_ERROR" and "correctness trial 2 of 5" in r["error_message"],
            tp.show(r))


def test_wrong_at_one_trial_caught():
    """Every correctness trial is compared: wrong at the third alone fails it."""
    r = once(CALL_COUNTER % "        if self.calls == 3:\n            out = out * 0.5")
    k.check(r.get("error_code") == "CORRECTNESS_ERROR" and "correctness trial 3 of 5" in r["error_message"],
            tp.show(r))


def test_outputs_poisoned():
    """The judge's poison: floating outputs all NaN before a call, so an
    element the candidate never writes fails the comparison (in the
    interpreter the harness runs under: it has torch)."""
    code = ("import sys, torch\nsys.path.insert(0, %r)\nimport kgym_judge\n"
            "outs = [torch.zeros(64, 3), torch.zeros(5, dtype=torch.float16), torch.zeros(0)]\n"
            "kgym_judge.Judge.poison(None, outs)\n"
            "print(bool(torch.isnan(outs[0]).all()) and bool(torch.isnan(outs[1]).all()))\n"
            % os.path.join(k.srcdir(), "plugins", "python"))
    p = subprocess.run([tp.PY, "-c", code], capture_output=True, text=True, timeout=300)
    k.check(p.stdout.strip() == "True", "poisoned: %r %s" % (p.stdout, p.stderr[-2000:]))


COMPARE_CHUNKED = r"""
import sys, torch
sys.path.insert(0, sys.argv[1])
import kgym_judge_compare as C
torch.manual_seed(1)
r = torch.randn(50, 33)
cases = [(r, r.clone())]
g = r.clone(); g[3, 4] += 1; g[10, 0] = float("nan"); cases.append((r, g))
g = r.clone(); g[49, 32] += 1; g[20, 1] += 1e-7; cases.append((r, g))
g = r.clone(); g[0, 0] = float("inf"); cases.append((r, g))
i = torch.arange(30).view(5, 6); cases.append((i, i + (i == 17)))
c = torch.randn(9, 4, dtype=torch.complex64); d = c.clone(); d[2, 1] += 1j; cases.append((c, d))
cases.append((r, r + 1e-6))
# The decoy check's two hard cases: a kernel that redoes one row torch
# already did (last bits apart: nearly the same, a decoy), and an unwritten
# softmax over long rows (values of 1e-5; zeros are right at the default
# atol 1e-4, yet not nearly them).
row = r.clone(); row[7] = row[7] * (1 + 1e-7); cases.append((r, row))
sm = torch.full((4, 1000), 1e-5); cases.append((sm, torch.zeros_like(sm)))
whole = [C.compare_tensor(a, b, {}) for a, b in cases]
near = [C.nearly_same(a, b) for a, b in cases]
C.COMPARE_CHUNK = 7
print(whole == [C.compare_tensor(a, b, {}) for a, b in cases] and near == [C.nearly_same(a, b) for a, b in cases])
print([w["mismatches"] for w in whole], near)
# The timed calls' quick check says "ok" exactly where the full one does,
# also at the tolerance's edge, in half precision and with infinities.
h = torch.randn(64, dtype=torch.float16)
edge = r.clone(); edge[0, 0] = r[0, 0] + (1e-4 + 1e-4 * abs(float(r[0, 0]))) * 0.999
over = r.clone(); over[0, 0] = r[0, 0] + (1e-4 + 1e-4 * abs(float(r[0, 0]))) * 1.01
ri = r.clone(); ri[1, 1] = float("inf"); gi = ri.clone(); gn = ri.clone(); gn[1, 1] = -float("inf")
cases += [(r, edge), (r, over), (h, h.clone()), (h, h + 0.5), (ri, gi), (ri, gn),
          (torch.full((5,), float("nan")), torch.full((5,), float("nan")))]
# A NaN alone, on either side, where every other element is right: the
# quick check must not pass it (NaN compares false whichever way is asked).
gnan = r.clone(); gnan[5, 5] = float("nan"); rnan = r.clone(); rnan[2, 2] = float("nan")
cases += [(r, gnan), (rnan, r), (h, h.clone().index_fill_(0, torch.tensor([1]), float("nan")))]
print([C.compare_tensor(a, b, {}, detail=False)["ok"] for a, b in cases] == [C.compare_tensor(a, b, {})["ok"] for a, b in cases])
nan = torch.tensor([float("nan"), 1.0])
print([C.same_tensor(a, b) for a, b in ((r, r.clone()), (r, g), (nan, nan.clone()), (nan, nan + 1), (i, i.clone()),
                                        (i, i + 1), (torch.zeros(1), -torch.zeros(1)), (r, r.double()))])
"""


def test_compare_chunked_as_whole():
    """The comparison goes COMPARE_CHUNK elements at a time (a 6 GiB
    output compared whole took 12 GiB more per float64 temporary and ran
    the device out of memory): in chunks of 7 it says exactly what it says
    in one (counts, first index, errors, NaN and inf), and so does the
    decoy check's nearly_same; the timed calls' quick check (detail=False)
    passes exactly what the full one passes; same_tensor (the inputs'
    check, torch.equal first) matches NaN for NaN and nothing else."""
    p = subprocess.run([tp.PY, "-c", COMPARE_CHUNKED, os.path.join(k.srcdir(), "plugins", "python")],
                       capture_output=True, text=True, timeout=300)
    lines = p.stdout.split("\n")
    k.check(lines[0] == "True", "chunked comparison differs: %r %s" % (p.stdout, p.stderr[-2000:]))
    k.check(lines[1] == "[0, 2, 1, 1, 1, 1, 0, 0, 0] [True, False, False, False, False, False, True, True, False]", "counts: %r" % p.stdout)
    k.check(lines[2] == "True", "the timed calls' quick check differs from the full one: %r" % p.stdout)
    k.check(lines[3] == "[True, False, True, False, True, False, True, False]",
            "same_tensor (the inputs' check): %r" % p.stdout)


WAIT_UNTIL = r"""
import sys
sys.path.insert(0, sys.argv[1])
from kgym_common import wait_until
t = [0.0]
clock, sleep = (lambda: t[0]), (lambda s: t.__setitem__(0, t[0] + s))
frees = iter([1, 2, 3, 10, 10])
print(wait_until(lambda: next(frees), lambda f: f >= 10, 5.0, step=0.5, clock=clock, sleep=sleep))
t[0] = 0.0
print(wait_until(lambda: 1, lambda f: f >= 10, 2.0, step=0.5, clock=clock, sleep=sleep))
print(wait_until(lambda: 10, lambda f: f >= 10, 0.0, step=0.5, clock=clock, sleep=sleep))
"""


ADMIT_ALONE = r"""
import sys, types
sys.path.insert(0, sys.argv[1])
import torch
import kgym_judge as J
asked = []
judge = types.SimpleNamespace(gpu=True, meta={}, phase=lambda name, lock=None: asked.append((name, lock)))
torch.cuda.current_device = lambda: 0
torch.cuda.get_device_properties = lambda d: types.SimpleNamespace(total_memory=140 << 30)
J.Judge.admit_alone(judge, 6 << 30, 6 << 30)        # KernelBench's 19_ReLU on an H200
print(asked, judge.meta)
asked.clear(); judge.meta.clear()
J.Judge.admit_alone(judge, 256 << 20, 256 << 20)    # a softmax of 0.25 GiB
print(asked, judge.meta)
"""


def test_big_problem_runs_alone():
    """A problem whose buffers take a big share of the device asks for the
    GPU's exclusive lock from its set-up on (two 6 GiB problems side by
    side ran a judge out of memory); a small one shares the GPU."""
    p = subprocess.run([tp.PY, "-c", ADMIT_ALONE, os.path.join(k.srcdir(), "plugins", "python")],
                       capture_output=True, text=True, timeout=300)
    lines = p.stdout.split("\n")
    k.check(lines[:2] == ["[('compile', 'exclusive')] {'gpu_alone_from': 'set-up'}", "[] {}"],
            "admit_alone: %r %s" % (p.stdout, p.stderr[-2000:]))


PHASE_AFTER_LOCK = r"""
import sys, time, types
sys.path.insert(0, sys.argv[1])
from kgym_supervisor import Job
zygote = types.SimpleNamespace(relay_phase=lambda name, lock=None: time.sleep(1.0))   # another job's 1 s on the GPU
job = Job(zygote)
job.limits, job.req = {"timing_timeout": 5}, {"device": "cuda"}
job.enter("timing", "exclusive")
left = job.deadline - time.monotonic()
print(4.8 < left <= 5.0, job.phase_limit)
"""


def test_phase_deadline_counts_from_the_lock():
    """A phase's deadline counts from the moment its GPU lock is held (as
    kgymd's does): a job that waited 1 s for another job's timing still
    has its whole timing_timeout."""
    p = subprocess.run([tp.PY, "-c", PHASE_AFTER_LOCK, os.path.join(k.srcdir(), "plugins", "python")],
                       capture_output=True, text=True, timeout=300)
    k.check(p.stdout.split("\n")[:1] == ["True 5.0"], "enter(): %r %s" % (p.stdout, p.stderr[-2000:]))


def test_device_memory_waited_for():
    """The judge's wait for device memory another job holds (make_arena):
    it polls until there is enough, and gives up at its deadline with
    the last figure (the arena then fails as the problem's RESOURCE_ERROR);
    enough at once costs no wait."""
    p = subprocess.run([tp.PY, "-c", WAIT_UNTIL, os.path.join(k.srcdir(), "plugins", "python")],
                       capture_output=True, text=True, timeout=300)
    k.check(p.stdout.split("\n")[:3] == ["(10, 1.5)", "(1, 2.0)", "(10, 0.0)"],
            "wait_until: %r %s" % (p.stdout, p.stderr[-2000:]))


def test_outputs_over_the_limit_refused():
    """A reference whose outputs exceed [plugin.python] max_output_bytes
    is the problem's: RESOURCE_ERROR naming the key, nothing run."""
    honest = "import torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n" \
             "    def forward(self, x):\n        return torch.softmax(x, dim=-1)\n"
    r = tp.run_once(honest, backend="torch", reference=SOFTMAX, static_checks=False,
                    limits={"max_output_bytes": 4096})
    k.check(r.get("error_code") == "RESOURCE_ERROR" and "max_output_bytes" in r.get("error_message", ""), tp.show(r))
    k.check(r["status"] == "failed", tp.show(r))


def test_judge_death_tells_nothing_of_the_host():
    """A reference whose get_inputs() (run in the judge) prints and kills
    its process: the job fails, and the message carries neither what the
    judge's process printed nor a path of kgymd's own files."""
    ref = SOFTMAX.replace("def get_inputs():\n",
                          "def get_inputs():\n    import os, sys\n    print('JUDGE-LOG-LINE', sys.path)\n"
                          "    sys.stdout.flush()\n    os.kill(os.getpid(), 9)\n")
    k.check(ref != SOFTMAX, "the reference was rewritten")
    honest = "import torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n" \
             "    def forward(self, x):\n        return torch.softmax(x, dim=-1)\n"
    r = tp.run_once(honest, backend="torch", reference=ref, static_checks=False)
    msg = r.get("error_message") or ""
    k.check(r["status"] == "failed" and r.get("error_code") in ("SYSTEM_ERROR", "RESOURCE_ERROR"), tp.show(r))
    k.check("JUDGE-LOG-LINE" not in msg and k.srcdir() not in msg and "kgym_" not in msg, msg)


BAD = {  # forward's body -> (error_code, fragments of the message)
    "return torch.softmax(x, dim=-1)[:, :10]": ("CORRECTNESS_ERROR", ["correctness trial 1 of 5", "shape"]),
    "return torch.softmax(x, dim=-1).double()": ("CORRECTNESS_ERROR", ["correctness trial 1 of 5", "float64"]),
    "return None": ("CORRECTNESS_ERROR", ["correctness trial 1 of 5", "NoneType"]),
}


def test_reference_out_of_memory_is_the_problems():
    """An allocation the problem cannot make -- in get_inputs() or in the
    reference's forward -- is a RESOURCE_ERROR naming the reference (and
    its inputs' size), never a verdict on the candidate."""
    for where, reference in (
            ("get_inputs", tp.RELU_REF.replace("def get_inputs():\n    return [",
                                               "def get_inputs():\n    return [torch.empty(1 << 40)] or [", 1)),
            ("forward", tp.RELU_REF.replace("return torch.relu(x)",
                                            "return torch.relu(x) + torch.zeros(1 << 40).sum()", 1))):
        k.check(reference != tp.RELU_REF, "%s: the reference was changed" % where)
        r = tp.run_once(tp.relu_candidate("return x.clamp_min(0)"), backend="torch", reference=reference)
        k.check(r["status"] == "failed" and r["error_code"] == "RESOURCE_ERROR" and r["compiled"] is False,
                "%s: %s" % (where, tp.show(r)))
        k.check("ran out of memory" in r["error_message"] and "reference" in r["error_message"],
                "%s: %s" % (where, tp.show(r)))


def test_judge_short_of_memory_is_the_problems():
    """The judge's own buffers for a big problem (570 MiB of inputs and
    of outputs) that the limits cannot hold: RESOURCE_ERROR naming what
    ran short, nothing of the host (torch's own text lists the host's
    processes), never SYSTEM_ERROR.  max_file_size bounds a CPU job's
    memfds; memory (RLIMIT_AS) its mappings."""
    big = tp.RELU_REF.replace("return [torch.rand(M, N)]", "return [torch.rand(150_000_000)]", 1)
    k.check(big != tp.RELU_REF, "the reference was changed")
    for limits, words in (({"max_file_bytes": 64 << 20}, "max_file_size"),
                          ({"memory_bytes": 3 << 30, "max_file_bytes": 4 << 30}, "ran out of host memory")):
        r = tp.run_once(tp.relu_candidate("return torch.relu(x)"), backend="torch", reference=big,
                        limits=dict(limits, max_output_bytes=1 << 30))
        k.check(r["status"] == "failed" and r.get("error_code") == "RESOURCE_ERROR" and
                words in (r.get("error_message") or ""), "%s: %s" % (limits, tp.show(r)))


def test_bad_outputs_named():
    for body, (code, parts) in BAD.items():
        cand = "import torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n" \
               "    def forward(self, x):\n        %s\n" % body
        r = once(cand)
        k.check(r["correctness"] is False and r.get("error_code") == code, "%s: %s" % (body, tp.show(r)))
        for p in parts:
            k.check(p in (r.get("error_message") or ""), "%s: %r lacks %r" % (body, r.get("error_message"), p))


def test_never_done_times_out_naming_the_call():
    cand = "import torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n" \
           "    def forward(self, x):\n        while True:\n            pass\n"
    r = tp.run_once(cand, backend="torch", reference=SOFTMAX, static_checks=False,
                    limits={"correctness_timeout": 3})
    k.check(r.get("error_code") == "TIMEOUT_ERROR", tp.show(r))
    k.check("correctness trial 1 of 5" in (r.get("error_message") or ""), r.get("error_message"))


def test_rounds_time_and_check_every_call():
    """Rounds of k calls per "go" (kgym_judge_timing.py; forced here, chosen
    on a GPU): every call of a round has inputs of its own and its outputs
    checked; a sample is a round's time over k."""
    r = once(tp.read(os.path.join(tp.EXAMPLES, "softmax", "torch_correct.py")), calls_per_round=4,
             num_perf_trials=20)
    m = r.get("metadata") or {}
    k.check(r["correctness"] is True and m.get("calls_per_round") == 4, tp.show(r))
    k.check(m.get("timed_rounds", 0) >= 10, "at least 10 rounds: %s" % tp.show(r))
    # Every timed call (4 per round, the first untimed round too) is checked.
    k.check(m.get("timed_outputs_checked", 0) >= 5 + m["candidate_warmup_calls"] + 4 * (m["timed_rounds"] + 1),
            "every call checked: %s" % tp.show(r))
    # Wrong on calls in the middle of rounds only (every 4th from the 11th):
    # the round's later slots are checked as the first.
    r = once(CALL_COUNTER % "        if self.calls > 10 and self.calls % 4 == 2:\n            out = out * 0.5",
             calls_per_round=4, num_perf_trials=20)
    k.check(r.get("error_code") == "REWARD_HACK" and r["metadata"]["hack"]["kind"] == "timed_output_mismatch",
            "wrong inside rounds: %s" % tp.show(r))
    # Inputs changed by a call inside a round.
    r = once(CALL_COUNTER % "        if self.calls > 10 and self.calls % 4 == 3:\n            x.mul_(2)",
             calls_per_round=4, num_perf_trials=20)
    k.check(r.get("error_code") == "REWARD_HACK" and r["metadata"]["hack"]["kind"] == "input_mutation",
            "an input mutated inside a round: %s" % tp.show(r))
    for bad in (0, 65, "4", True):
        r = once(tp.read(os.path.join(tp.EXAMPLES, "softmax", "torch_correct.py")), calls_per_round=bad)
        k.check("calls_per_round: expected an integer from 1 to 64" in (r.get("error_message") or ""),
                "calls_per_round %r: %s" % (bad, tp.show(r)))


def test_judge_death_blamed_where_it_happened():
    """A judge killed by the sandbox is the reference's fault only while it
    runs the reference's code (its import, get_inputs()); elsewhere it is
    kgymd's (SYSTEM_ERROR), whatever phase the job was in."""
    honest = tp.read(os.path.join(tp.EXAMPLES, "softmax", "torch_correct.py"))
    forks = SOFTMAX.replace("def get_inputs():\n", "def get_inputs():\n    import os\n    os.fork()\n", 1)
    k.check(forks != SOFTMAX, "the reference was changed")
    r = tp.run_once(honest, backend="torch", reference=forks, static_checks=False)
    k.check(r.get("error_code") == "VALIDATION_ERROR" and "reference" in r.get("error_message", ""), tp.show(r))
    # The reference's import patches the judge (it runs there): the judge
    # then dies in its own code, after get_inputs() has returned.
    patches = SOFTMAX + ("\nimport os, sys\nif 'kgym_judge' in sys.modules:\n"
                         "    sys.modules['kgym_judge'].Judge.poison = lambda *a: os.fork()\n")
    r = tp.run_once(honest, backend="torch", reference=patches, static_checks=False)
    k.check(r.get("error_code") == "SYSTEM_ERROR" and "outside the reference's code" in r.get("error_message", ""),
            tp.show(r))


def test_memfds_sealed_past_the_static_checks():
    """No descriptor of the judge's areas stays in an executor, but code past
    the static checks can keep one as it arrives (socket.recv_fds wrapped
    at import, each descriptor duplicated): truncating it must still fail
    -- the areas are sealed -- or the judge's next read faults and a wrong
    answer ends as kgymd's failure (shrink_shared_memfd.py, the road it
    had before)."""
    cand = ("import os, socket\nimport torch.nn as nn\n\n"
            "kept = []\n_recv = socket.recv_fds\n\n\n"
            "def recv_fds(*a, **kw):\n"
            "    got = _recv(*a, **kw)\n"
            "    kept.extend(os.dup(fd) for fd in got[1])\n"
            "    return got\n\n\n"
            "socket.recv_fds = recv_fds\n\n\n"
            "class ModelNew(nn.Module):\n"
            "    def forward(self, x):\n"
            "        shrunk = 0\n"
            "        for fd in kept:\n"
            "            try:\n"
            "                os.ftruncate(fd, 0)\n"
            "                shrunk += 1\n"
            "            except OSError:\n"
            "                pass\n"
            "        if not kept:\n"
            "            raise RuntimeError('no descriptor was kept: the test proves nothing')\n"
            "        return x * 0.5\n")
    r = once(cand)
    k.check(r.get("error_code") == "CORRECTNESS_ERROR" and r.get("status") == "completed",
            "truncation refused, the wrong answer scored: %s" % tp.show(r))


def test_candidate_cannot_blame_kgymd():
    """Once its code is loaded, the candidate's process reports failures of
    the candidate only, and the judge picks their code and status: no
    SYSTEM_ERROR (kgymd's), no VALIDATION_ERROR (the reference's), no
    RESOURCE_ERROR (the problem's), whatever code it sends -- RUNTIME_ERROR,
    "completed" (scored), from forward; COMPILATION_ERROR before its model
    is ready, a clean exit there too."""
    r = once(exploit("claim_system_error"))
    k.check(r.get("error_code") == "RUNTIME_ERROR" and "KeyboardInterrupt" in (r.get("error_message") or "")
            and r.get("status") == "completed", "a BaseException from forward: %s" % tp.show(r))
    for claim in ("SYSTEM_ERROR", "VALIDATION_ERROR", "RESOURCE_ERROR", "NOT_A_CODE"):
        cand = ("import gc, sys\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n"
                "    def forward(self, x):\n"
                "        ex = [o for o in gc.get_objects() if type(o).__name__ == 'Executor'][0]\n"
                "        ex.fail('error', 'kgymd failed, not me', %r)\n" % claim)
        r = once(cand)
        k.check(r.get("error_code") == "RUNTIME_ERROR" and r.get("status") == "completed",
                "a forged %s: %s" % (claim, tp.show(r)))
    for name in ("blame_frame_import", "exit_in_init"):
        r = once(exploit(name))
        k.check(r.get("error_code") == "COMPILATION_ERROR", "%s: %s" % (name, tp.show(r)))


def main():
    if not os.path.exists(tp.sandbox_lib()):
        print("SKIP: libkgym_sandbox.so was not built")
        sys.exit(k.SKIP)
    if not tp.have_torch():
        print("SKIP: %s cannot import torch (apt-get install python3-torch)" % tp.PY)
        sys.exit(k.SKIP)
    k.run([test_clock_patch_has_no_effect, test_seed_scan_finds_nothing, test_work_before_go_caught, test_lazy_subclass_is_timed,
           test_lazy_listlike_refused, test_right_where_checked_always_caught, test_unrepeatable_inputs_checked_interleaved,
           test_mutate_inputs_timed_caught,
           test_bad_outputs_named, test_never_done_times_out_naming_the_call, test_cached_first_output_caught,
           test_wrong_at_one_trial_caught, test_outputs_poisoned, test_compare_chunked_as_whole,
           test_device_memory_waited_for, test_big_problem_runs_alone, test_phase_deadline_counts_from_the_lock,
           test_outputs_over_the_limit_refused,
           test_judge_death_tells_nothing_of_the_host, test_reference_out_of_memory_is_the_problems,
           test_judge_short_of_memory_is_the_problems,
           test_memfds_sealed_past_the_static_checks, test_candidate_cannot_blame_kgymd, test_rounds_time_and_check_every_call,
           test_judge_death_blamed_where_it_happened])


if __name__ == "__main__":
    main()
