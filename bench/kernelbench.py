#!/usr/bin/env python3
"""bench/kernelbench.py -- a folder of KernelBench-format problems through
kgymd and through a fresh-process baseline that does what KernelBench's
harness does; per problem the verdicts, speedups and end-to-end seconds,
and evaluations per GPU-hour.

usage: KGYM_BUILDDIR=build bench/kernelbench.py --python /opt/torch/.venv/bin/python3
           [--dir bench/kernelbench] [--problems GLOB] [--workers 1,default]
           [--trials 100] [--correct-trials 5] [--baseline all|ok|none]
           [--kgymd-budget-s 75] [--e2e-budget-s 25] [--baseline-budget-s 60]
           [--baseline-big] [--no-e2e] [--small [--small-repeat 4]]
           [--python-conf KEY=VALUE ...]
           [--dry-run] [--report-only] [--json FILE]

The folder is in KernelBench's layout: levelN/NN_Name.py holds Model,
get_inputs and get_init_inputs; candidates lie beside it as
levelN/NN_Name.VARIANT.py, VARIANT being BACKEND_ok (expected correct) or
BACKEND_wrong (expected to be caught), e.g. 19_ReLU.triton_ok.py.
--problems selects problems by a glob on "levelN/NN_Name" (default: all).
manifest.json gives each problem's input size and its --dry-run sizes.

Phases (progress on stderr, the tables on stdout):
  kgymd     for each entry of --workers ("default": the daemon's own
            workers_per_gpu; a number: that many), a private kgymd on GPU 0
            (kernelbench workflow, python backend, --python as its
            interpreter, the plugins from KGYM_BUILDDIR); one warm-up task
            per worker slot, then every candidate of every problem submitted
            at once, each with a unique comment (no two alike, as in
            training).  Evaluations per GPU-hour = tasks ended / wall time.
            After --kgymd-budget-s (75 s; 0: no limit) what has not ended
            is cancelled and the rate counts what ended.  The verdicts,
            speedups and each task's service time in the worker
            (metadata.backend_ms) are kept per W.
  e2e       on the last daemon, each problem's correct candidate alone
            (>= 6 GiB problems first), submit to result on the client's
            clock, until --e2e-budget-s (25 s) is spent (--no-e2e: none).
  baseline  per candidate, a fresh `python bench/kernelbench_eval.py` (a
            new interpreter per evaluation, as KernelBench's harness:
            Python and torch start, CUDA and Triton start with an empty
            Triton cache, inputs made on the CPU by get_inputs() and copied,
            5 correctness trials with torch.allclose(atol=rtol=1e-2), 100
            timed trials of each model between CUDA events; speedup =
            reference median / candidate median), one at a time on GPU 0.
            --baseline ok runs only the correct candidates; --baseline-budget-s
            stops starting new evaluations once that many seconds are spent
            (default 60; 0: no limit), its rate counting what ran: it goes
            problem by problem, both candidates each, as kgymd's batch.
            Problems of >= 6 GiB only with --baseline-big: KernelBench's way
            (inputs made on the CPU for every trial) takes a minute or more
            for one, and kgymd's rate, which includes them, is the more
            conservative for it.

Runtime (one H100), bounded by the budgets whatever kgymd's speed: two
daemon starts and warm-ups (~10-20 s each), two kgymd batches of at most
75 s, 25 s of one-alone runs (plus the one running then), 60 s of
baseline: at most about 4.5 minutes, less when kgymd's batches end early.
For the issue's closing run, with every case judged on both sides:
--kgymd-budget-s 0 --e2e-budget-s 0 --baseline-budget-s 0 [--baseline-big].

Targets (exit 1 when one is missed, unless --report-only; 2 when the bench
could not run): kgymd judges every _ok candidate correct, with no REWARD_HACK
or decoy flag, and every _wrong one incorrect, in every run that judged it,
and every candidate in at least one run; the baseline
agrees with the expected verdicts where it ran (else the dataset is
wrong); on a GPU: kgymd's evaluations per GPU-hour >= 3x the baseline's at
workers_per_gpu 1 and >= 6x at the default (issue 15), every problem of
>= 6 GiB correct end to end in <= 10 s, and kgymd's speedup within 10% of
the baseline's where the baseline's candidate median is >= 100 us.

--small runs the GPU at manifest.json's dry_run sizes (the real Triton
candidates on small inputs: what an RL step on small problems looks like),
each candidate --small-repeat times (4) in the one batch, so that many tasks
are in flight; the target is then kgymd >= 5,000 evaluations per GPU-hour
at the default workers_per_gpu (issue 15), and the table after each kgymd
run says where a task's time went, phase by phase (p50).  The 3x/6x, the
10 s and the speedup targets are the real sizes' and do not apply.

--dry-run checks the bench itself on a machine without a GPU: the
problems at manifest.json's small sizes; kgymd on CPU workers with torch
candidates made from each reference (the reference itself as ModelNew for
_ok, its output times 1.5 plus 0.1 for _wrong: the kernelbench workflow takes only
torch candidates on a CPU); the baseline on the CPU, running the real
Triton candidates under TRITON_INTERPRET=1 when --python has triton, else
the same torch candidates.  No speedup or rate target applies.

Standard library only; --python needs torch (and triton on a GPU).
"""
import argparse
import fnmatch
import glob
import json
import os
import subprocess
import sys
import tempfile
import time

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "tests", "integration"))
os.environ.setdefault("KGYM_BUILDDIR", os.path.abspath(os.path.join(here, "..", "build")))
import test_python as tp  # noqa: E402

EVAL = os.path.join(here, "kernelbench_eval.py")
BIG_BYTES = 6 << 30
BIG_E2E_S = 10.0
SMALL_RATE = 5000.0         # evaluations per GPU-hour at small sizes, the default W (issue 15)
WORKERS_CONF = ("cpu_workers = %d\ncompile_deadline = 600\ncorrectness_deadline = 600\n"
                "timing_deadline = 600\njob_deadline = 900\nstart_timeout = 300")


def log(msg):
    print("[%7.1f s] %s" % (time.monotonic() - T0, msg), file=sys.stderr, flush=True)


T0 = time.monotonic()


def read(path):
    with open(path) as f:
        return f.read()


# ------------------------------------------------------------------ the dataset

def discover(root, pattern):
    """[{key, ref_path, candidates: [{variant, backend, expect, path}]}] in order."""
    out = []
    for ref in sorted(glob.glob(os.path.join(root, "level*", "*.py")),
                      key=lambda p: (os.path.dirname(p), int(os.path.basename(p).split("_")[0])
                                     if os.path.basename(p).split("_")[0].isdigit() else 0, p)):
        base = os.path.basename(ref)[:-3]
        if "." in base:
            continue        # a candidate, NN_Name.VARIANT.py
        key = "%s/%s" % (os.path.basename(os.path.dirname(ref)), base)
        if pattern and not fnmatch.fnmatch(key, pattern):
            continue
        cands = []
        for c in sorted(glob.glob(os.path.join(os.path.dirname(ref), base + ".*.py"))):
            variant = os.path.basename(c)[len(base) + 1:-3]
            if variant.endswith("_ok"):
                expect = True
            elif variant.endswith("_wrong"):
                expect = False
            else:
                continue
            cands.append({"variant": variant, "backend": variant.split("_")[0], "expect": expect, "path": c})
        out.append({"key": key, "ref_path": ref, "candidates": cands})
    return out


def derived_torch_candidate(ref_src, correct):
    """--dry-run's stand-in for kgymd's CPU workers (torch candidates only)."""
    if correct:
        return ref_src + "\n\nclass ModelNew(Model):\n    pass\n"
    return (ref_src + "\n\nclass ModelNew(Model):\n    def forward(self, *args):\n"
            "        return super().forward(*args) * 1.5 + 0.1\n")


class Case:
    """One (problem, candidate) evaluation, as kgymd and the baseline see it."""

    def __init__(self, prob, cand, args, manifest):
        self.key = prob["key"]
        self.variant = cand["variant"]
        self.expect = cand["expect"]
        self.input_bytes = (manifest.get(self.key) or {}).get("input_bytes")
        small = args.dry_run or args.small
        extra = (manifest.get(self.key) or {}).get("dry_run") if small else None
        if small and extra is None:
            raise SystemExit("bench/kernelbench: %s has no dry_run sizes in manifest.json" % self.key)
        self.ref_extra = ("\n# bench/kernelbench.py --dry-run/--small sizes\n%s\n" % extra) if extra else ""
        self.ref_src = read(prob["ref_path"]) + self.ref_extra
        self.ref_path = prob["ref_path"]
        self.cand_path = cand["path"]
        if args.dry_run:
            self.backend, self.cand_src = "torch", derived_torch_candidate(self.ref_src, self.expect)
        else:
            self.backend, self.cand_src = cand["backend"], read(cand["path"])
        self.results = {}       # W label -> kgymd result (one of them, with --small)
        self.all_results = {}   # W label -> every result (--small-repeat of them)
        self.e2e_s = None
        self.baseline = None

    @property
    def name(self):
        return "%s.%s" % (self.key, self.variant)

    def task(self, args, tag):
        tid = "kb-%s-%s-%s" % (tag, self.name.replace("/", "-"), os.urandom(4).hex())
        return {"task_id": tid, "workflow": "kernelbench", "timeout_s": 1800,
                "payload": {"backend": self.backend, "device": args.device, "reference_code": self.ref_src,
                            "kernel_code": self.cand_src + "\n# bench %s\n" % tid,
                            "num_correct_trials": args.correct_trials, "num_perf_trials": args.trials,
                            "atol": 1e-2, "rtol": 1e-2}}


def phase_breakdown(results):
    """Where a task's service time went: p50 of each harness phase, of the
    wait for the GPU lock, and of the set-up steps inside them."""
    parts = {}
    for r in results:
        m = (r or {}).get("metadata") or {}
        for name, ms in (m.get("phases_ms") or {}).items():
            parts.setdefault(name, []).append(ms)
        parts.setdefault("gpu_lock_wait", []).append(m.get("gpu_lock_wait_ms") or 0.0)
        for role in ("candidate", "reference"):
            for step, ms in (m.get(role + "_setup_ms") or {}).items():
                parts.setdefault("%s.%s" % (role[:4], step), []).append(ms)
    return {k: sorted(v)[len(v) // 2] for k, v in sorted(parts.items()) if v}


def verdict(r):
    """A kgymd result in a word."""
    if r is None:
        return "-"
    hack = ((r.get("metadata") or {}).get("hack") or {}).get("kind")
    if r.get("error_code") == "REWARD_HACK" or r.get("decoy_kernel"):
        return "HACK:%s" % (hack or "decoy")
    if r.get("correctness") is True:
        return "correct"
    if r.get("error_code") == "CORRECTNESS_ERROR" or (r.get("status") == "completed" and r.get("correctness") is False):
        return "incorrect"
    return r.get("error_code") or r.get("status") or "?"


def base_verdict(b):
    if b is None:
        return "-"
    if b.get("correct"):
        return "correct"
    err = b.get("error") or "?"
    return "incorrect" if err.startswith(("mismatch", "shape")) else err.split(":")[0]


# ------------------------------------------------------------------ kgymd

def submit_wait(d, tasks, what, budget_s=0, timeout=7200):
    """Submit all and wait; {task_id: result}, with progress on stderr.
    With budget_s, stop waiting after that many seconds and cancel what has
    not ended (it is left out of the answer)."""
    c = d.connect()
    c.sock.settimeout(timeout)
    t0 = time.monotonic()
    try:
        r = c.request({"op": "submit", "tasks": tasks})
        if not r.get("ok") or r.get("rejected"):
            raise RuntimeError("kgymd rejected tasks: %s" % json.dumps(r)[:2000])
        ids = [a["task_id"] for a in r["accepted"]]
        rid = c.send({"op": "wait", "task_ids": ids, "timeout_ms": timeout * 1000})
        res, last = {}, time.monotonic()
        while True:
            if budget_s:
                left = t0 + budget_s - time.monotonic()
                if left <= 0:
                    break
                c.sock.settimeout(left)
            try:
                msg = c.read_for(rid)
            except OSError:
                if budget_s:
                    break       # the budget's end while waiting
                raise
            if msg is None:
                raise RuntimeError("kgymd closed the connection")
            if msg.get("event") == "result":
                res[msg["task_id"]] = msg["result"]
                if time.monotonic() - last > 5 or len(res) == len(ids):
                    log("%s: %d/%d done" % (what, len(res), len(ids)))
                    last = time.monotonic()
            elif msg.get("done") or msg.get("ok") is False:
                if msg.get("pending"):
                    raise RuntimeError("%d tasks still pending after %d s" % (len(msg["pending"]), timeout))
                return res
    finally:
        c.close()
    pending = [i for i in ids if i not in res]
    log("%s: budget of %.0f s spent, %d of %d done; cancelling the rest" % (what, budget_s, len(res), len(ids)))
    c = d.connect()
    c.sock.settimeout(120)
    try:
        for tid in pending:
            c.send({"op": "cancel", "task_id": tid})
        for _ in pending:
            c.read_line()
    finally:
        c.close()
    return res


def slots(d):
    w = d.request({"op": "workers"})
    return w, sum(len(g["workers"]) for g in w["gpus"]) or len(w["cpu_workers"])


def wait_workers(d, timeout=300):
    deadline = time.time() + timeout
    while time.time() < deadline:
        w, _ = slots(d)
        states = [x["state"] for x in w["cpu_workers"]] + [x["state"] for g in w["gpus"] for x in g["workers"]]
        if states and all(s == "idle" for s in states):
            return w
        time.sleep(0.2)
    raise RuntimeError("kgymd's workers did not start in %d s" % timeout)


def daemon(args, wlabel):
    # The plugin's documented defaults where tests/integration's daemon
    # sets its own (max_output_bytes 256M there, auto in kgymd.conf(5)).
    conf = {"interpreter": args.python, "compile_timeout": "300", "correctness_timeout": "300",
            "timing_timeout": "300", "max_output_bytes": "auto"}
    for kv in args.python_conf:
        key, _, val = kv.partition("=")
        conf[key.strip()] = val.strip()
    if args.dry_run:
        n = 2 if wlabel == "default" else int(wlabel)
        return tp.PyDaemon(python_conf=conf, workers_conf=WORKERS_CONF % n)
    kconf = "" if wlabel == "default" else "workers_per_gpu = %d" % int(wlabel)
    return tp.PyDaemon(python_conf=conf, gpus="0", kgymd_conf=kconf, workers_conf=WORKERS_CONF % 2)


def run_kgymd(args, cases, wlabel, e2e):
    """One daemon: warm-up, all cases at once, then (e2e) each correct one alone."""
    row = {"mode": "kgymd", "W": wlabel}
    d = daemon(args, wlabel)
    try:
        d.start()
        w = wait_workers(d)
        _, nslots = slots(d)
        row["slots"] = nslots
        row["workers_per_gpu"] = len(w["gpus"][0]["workers"]) if w["gpus"] else None
        row["gpu"] = w["gpus"][0].get("name") if w["gpus"] else None
        t0 = time.monotonic()
        # Warm-up: the correct candidate of the smallest problem, per slot.
        small = min(cases, key=lambda c: (not c.expect, c.input_bytes or 0))
        warm = [small.task(args, "warm") for _ in range(nslots)]
        submit_wait(d, warm, "W=%s warm-up (%d tasks)" % (wlabel, len(warm)))
        row["warmup_s"] = time.monotonic() - t0
        tasks = {}
        for c in cases:
            for _ in range(args.small_repeat if args.small else 1):
                t = c.task(args, "w%s" % wlabel)
                tasks[t["task_id"]] = (c, t)
        log("W=%s: %d tasks submitted at once (%d worker slots)" % (wlabel, len(tasks), nslots))
        t0 = time.monotonic()
        res = submit_wait(d, [t for _, t in tasks.values()], "W=%s" % wlabel, budget_s=args.kgymd_budget_s)
        row["wall_s"] = time.monotonic() - t0
        row["tasks"] = len(res)
        row["planned"] = len(tasks)
        row["evals_per_gpu_hour"] = len(res) / row["wall_s"] * 3600.0
        for tid, (c, _) in tasks.items():
            if tid in res or wlabel not in c.results:
                c.results[wlabel] = res.get(tid)
            c.all_results.setdefault(wlabel, []).append(res.get(tid))
        row["phases_p50_ms"] = phase_breakdown(res.values())
        row["reference_process"] = {}
        for r in res.values():
            how = ((r or {}).get("metadata") or {}).get("reference_process") or "-"
            row["reference_process"][how] = row["reference_process"].get(how, 0) + 1
        if e2e:
            # Problems of >= 6 GiB first: theirs is a target.
            t_e2e = time.monotonic()
            for c in sorted([c for c in cases if c.expect], key=lambda c: -(c.input_bytes or 0)):
                if args.e2e_budget_s and time.monotonic() - t_e2e >= args.e2e_budget_s:
                    log("e2e: budget of %.0f s spent" % args.e2e_budget_s)
                    break
                t = c.task(args, "e2e")
                t0 = time.monotonic()
                if submit_wait(d, [t], "e2e %s" % c.name, budget_s=max(60.0, args.e2e_budget_s) if args.e2e_budget_s else 0):
                    c.e2e_s = time.monotonic() - t0
        d.stop()
    except Exception:
        sys.stderr.write("--- kgymd log (tail) ---\n%s\n" % d.read_log()[-6000:])
        raise
    finally:
        d.cleanup()
    return row


# ------------------------------------------------------------------ baseline

def baseline_python(args):
    """The interpreter for the baseline and whether it runs Triton (dry run)."""
    if not args.dry_run:
        return args.python, False
    p = subprocess.run([args.python, "-c", "import triton"], capture_output=True)
    return args.python, p.returncode == 0


def run_baseline_one(args, c, interpret):
    wd = tempfile.mkdtemp(prefix="kgym-kb-base-")
    try:
        env = dict(os.environ, TRITON_CACHE_DIR=os.path.join(wd, "triton-cache"), HOME=wd, TMPDIR=wd,
                   CUDA_VISIBLE_DEVICES="" if args.dry_run else "0", PYTHONDONTWRITEBYTECODE="1")
        env.pop("TRITON_INTERPRET", None)
        cmd = [args.baseline_python, "-B", EVAL, c.ref_path, c.cand_path if (interpret or not args.dry_run) else
               os.path.join(wd, "candidate.py"), "--device", args.device, "--trials", str(args.trials),
               "--correct-trials", str(args.correct_trials)]
        if args.dry_run and not interpret:
            with open(os.path.join(wd, "candidate.py"), "w") as f:
                f.write(c.cand_src)
        if interpret:
            cmd.append("--interpret")
        if c.ref_extra:
            with open(os.path.join(wd, "ref_extra.py"), "w") as f:
                f.write(c.ref_extra)
            cmd += ["--append-ref", os.path.join(wd, "ref_extra.py")]
        t0 = time.monotonic()
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, cwd=wd, env=env, timeout=args.baseline_timeout)
            out, err = p.stdout, p.stderr
        except subprocess.TimeoutExpired:
            out, err = "", "timed out after %d s" % args.baseline_timeout
        wall = time.monotonic() - t0
        try:
            b = json.loads(out.strip().splitlines()[-1])
        except (ValueError, IndexError):
            b = {"correct": False, "error": "crashed: %s" % err.strip()[-600:]}
        b["process_s"] = wall
        return b
    finally:
        subprocess.run(["rm", "-rf", wd])


def run_baseline(args, cases):
    _, interpret = baseline_python(args)
    # The same mix as kgymd's batch, problem by problem (a budget cut keeps
    # it representative); >= 6 GiB problems only with --baseline-big (the
    # issue measured 87 s for one: it would take the whole budget).
    order = [c for c in cases if (c.expect or args.baseline == "all") and
             (args.baseline_big or args.small or not c.input_bytes or c.input_bytes < BIG_BYTES)]
    if args.dry_run:
        log("baseline: %s" % ("Triton candidates under TRITON_INTERPRET=1" if interpret else
                              "%s has no triton: the torch stand-ins" % args.baseline_python))
    spent, done = 0.0, 0
    for c in order:
        if args.baseline_budget_s and spent >= args.baseline_budget_s:
            log("baseline: budget of %.0f s spent; %d of %d evaluations ran" % (args.baseline_budget_s, done,
                                                                                 len(order)))
            break
        c.baseline = run_baseline_one(args, c, interpret)
        spent += c.baseline["process_s"]
        done += 1
        log("baseline %s: %s, %.1f s" % (c.name, base_verdict(c.baseline), c.baseline["process_s"]))
    return {"mode": "baseline", "W": "1", "tasks": done, "wall_s": spent,
            "evals_per_gpu_hour": done / spent * 3600.0 if spent else None, "planned": len(order)}


# ------------------------------------------------------------------ report

def fmt(v, spec="%.2f", none="-"):
    return spec % v if isinstance(v, (int, float)) else none


def table(header, rows):
    widths = [max(len(str(r[i])) for r in [header] + rows) for i in range(len(header))]
    print("  ".join("%-*s" % (w, h) for w, h in zip(widths, header)).rstrip())
    print("  ".join("-" * w for w in widths))
    for r in rows:
        print("  ".join("%-*s" % (w, c) for w, c in zip(widths, r)).rstrip())


def report(args, cases, rows):
    wl = [r["W"] for r in rows if r["mode"] == "kgymd"]
    first = wl[0] if wl else None
    misses = []
    print("\nbench/kernelbench: %d problems, %d candidates, %s, %d correctness + %d timed trials%s\n" % (
        len({c.key for c in cases}), len(cases), "CPU dry run" if args.dry_run else "GPU 0",
        args.correct_trials, args.trials, "" if args.dry_run else
        " (%s)" % next((r["gpu"] for r in rows if r.get("gpu")), "?")))
    hdr = ["problem", "candidate", "input (real)", "expect"] + ["kgymd W=%s" % w for w in wl] + \
        ["baseline", "speedup kgymd", "speedup base", "kgymd/base", "e2e kgymd s", "e2e base s",
         "service s"]
    out = []
    for c in cases:
        r0 = next((c.results[w] for w in wl if c.results.get(w) is not None), None)
        sk = r0.get("speedup") if r0 and r0.get("correctness") else None
        sb = (c.baseline or {}).get("speedup")
        out.append([c.key, c.variant, fmt(c.input_bytes / 2 ** 30, "%.2f GiB") if c.input_bytes else "-",
                    "correct" if c.expect else "wrong"] + [verdict(c.results.get(w)) for w in wl] +
                   [base_verdict(c.baseline), fmt(sk), fmt(sb),
                    fmt(sk / sb if isinstance(sk, (int, float)) and isinstance(sb, (int, float)) and sb > 0
                        else None),
                    fmt(c.e2e_s, "%.1f"), fmt((c.baseline or {}).get("process_s"), "%.1f"),
                    fmt(((r0 or {}).get("metadata") or {}).get("backend_ms", None) and
                        r0["metadata"]["backend_ms"] / 1e3, "%.1f")])
        if all(c.results.get(w) is None for w in wl):
            misses.append("%s: not judged by kgymd within the budget (--kgymd-budget-s)" % c.name)
        for w in wl:
            for r in c.all_results.get(w) or [c.results.get(w)]:
                if r is None:
                    continue        # cut by the budget in this run
                v = verdict(r)
                if c.expect and v != "correct":
                    misses.append("W=%s: correct candidate %s judged %s: %s" % (
                        w, c.name, v, (r.get("error_message") or "")[:300]))
                if not c.expect and v not in ("incorrect",):
                    misses.append("W=%s: wrong candidate %s judged %s (want incorrect)" % (w, c.name, v))
        bv = base_verdict(c.baseline)
        if c.baseline is not None and bv != ("correct" if c.expect else "incorrect"):
            misses.append("baseline: %s judged %s (the dataset or the baseline is wrong): %s" % (
                c.name, bv, (c.baseline.get("error") or "")[:300]))
        if not args.dry_run and not args.small and c.expect and c.input_bytes and c.input_bytes >= BIG_BYTES and \
                (c.e2e_s is None or c.e2e_s > BIG_E2E_S or verdict(r0) != "correct"):
            misses.append("%s (%.1f GiB of inputs): end to end %s s, %s (target: correct in <= %.0f s)" % (
                c.name, c.input_bytes / 2 ** 30, fmt(c.e2e_s, "%.1f"), verdict(r0), BIG_E2E_S))
        cm = (c.baseline or {}).get("cand_median_ms")
        if not args.dry_run and not args.small and isinstance(sk, (int, float)) and isinstance(sb, (int, float)) and \
                isinstance(cm, (int, float)) and cm >= 0.1 and abs(sk / sb - 1) > 0.10:
            misses.append("%s: kgymd's speedup %.2f vs the baseline's %.2f (kernel %.3f ms >= 0.1 ms: "
                          "want within 10%%)" % (c.name, sk, sb, cm))
    table(hdr, out)
    print("\nspeedup kgymd, service s: from the first run that judged it (W=%s, unless its budget cut it); "
          "service s: the task's time in kgymd's worker (metadata.backend_ms); e2e: one task alone, submit to "
          "result (kgymd), or the fresh process's wall time (baseline)." % first)

    base = next((r for r in rows if r["mode"] == "baseline"), None)
    rate_b = base and base.get("evals_per_gpu_hour")
    print()
    trows = []
    for r in rows:
        ratio = r["evals_per_gpu_hour"] / rate_b if r["mode"] == "kgymd" and rate_b else None
        target = rate_target = None
        if r["mode"] == "kgymd" and args.small:
            rate_target = SMALL_RATE if r["W"] == "default" else None
        elif r["mode"] == "kgymd" and not args.dry_run:
            target = 3.0 if str(r["W"]) == "1" else 6.0 if r["W"] == "default" else None
        trows.append([r["mode"], r["W"] if r["mode"] == "baseline" else "%s (%s)" % (
            r["W"], r.get("workers_per_gpu") or r.get("slots")), r["tasks"], fmt(r["wall_s"], "%.1f"),
            fmt(r["evals_per_gpu_hour"], "%.0f"), fmt(ratio, "%.2fx"),
            fmt(target, ">= %.0fx") if target else fmt(rate_target, ">= %.0f/h"),
            fmt(r.get("warmup_s"), "%.1f")])
        if rate_target and r["evals_per_gpu_hour"] < rate_target:
            misses.append("kgymd W=%s at small sizes: %.0f evaluations/GPU-hour (target >= %.0f)"
                          % (r["W"], r["evals_per_gpu_hour"], rate_target))
        if target and ratio is not None and ratio < target:
            misses.append("kgymd W=%s: %.0f evaluations/GPU-hour = %.2fx the baseline's %.0f (target >= %.0fx)"
                          % (r["W"], r["evals_per_gpu_hour"], ratio, rate_b, target))
    table(["mode", "W (slots)", "evals", "wall s", "evals/GPU-hour", "vs baseline", "target", "warm-up s"],
          trows)
    for r in rows:
        if r.get("phases_p50_ms"):
            print("kgymd W=%s, where a task's service time went (p50 ms): %s" % (r["W"], ", ".join(
                "%s %.0f" % kv for kv in r["phases_p50_ms"].items())))
            print("kgymd W=%s, the reference's process (reused: its judge server was set up): %s" % (
                r["W"], ", ".join("%s %d" % kv for kv in sorted(r["reference_process"].items()))))
    for r in rows:
        if r["mode"] == "kgymd" and r["tasks"] < r["planned"]:
            print("kgymd W=%s: %d of %d evaluations ended within --kgymd-budget-s %.0f (the rest cancelled); its "
                  "rate is theirs" % (r["W"], r["tasks"], r["planned"], args.kgymd_budget_s))
    if base and base["tasks"] < base["planned"]:
        print("baseline: %d of %d evaluations ran within --baseline-budget-s %.0f; its rate is theirs"
              % (base["tasks"], base["planned"], args.baseline_budget_s))
    return misses


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", default=os.path.join(here, "kernelbench"))
    ap.add_argument("--problems", default=None, help="glob on levelN/NN_Name (default: all)")
    ap.add_argument("--workers", default="1,default",
                    help="workers_per_gpu of each kgymd run: numbers or 'default' (1,default)")
    ap.add_argument("--python", default=None,
                    help="interpreter with torch (GPU: /opt/torch/.venv/bin/python3); kgymd's and the baseline's")
    ap.add_argument("--trials", type=int, default=100, help="timed trials (100)")
    ap.add_argument("--correct-trials", type=int, default=5)
    ap.add_argument("--baseline", choices=("all", "ok", "none"), default="all")
    ap.add_argument("--baseline-budget-s", type=float, default=60.0,
                    help="stop starting baseline evaluations after this many seconds (0: no limit)")
    ap.add_argument("--baseline-timeout", type=int, default=600)
    ap.add_argument("--baseline-big", action="store_true",
                    help="the baseline runs problems of >= 6 GiB of inputs too (a minute or more each)")
    ap.add_argument("--no-e2e", action="store_true", help="skip the one-task-alone end-to-end runs")
    ap.add_argument("--kgymd-budget-s", type=float, default=75.0,
                    help="per kgymd run, cancel what has not ended after this many seconds (0: no limit)")
    ap.add_argument("--e2e-budget-s", type=float, default=25.0,
                    help="stop starting one-alone runs after this many seconds (0: no limit)")
    ap.add_argument("--python-conf", action="append", default=[], metavar="KEY=VALUE",
                    help="a [plugin.python] key for kgymd (repeatable), e.g. max_output_bytes=8G")
    ap.add_argument("--dry-run", action="store_true", help="CPU, small sizes: checks the bench, not kgymd")
    ap.add_argument("--small", action="store_true",
                    help="GPU at the dry_run sizes: the small-problem rate (target >= 5,000/GPU-hour)")
    ap.add_argument("--small-repeat", type=int, default=4, help="with --small, each candidate this many times")
    ap.add_argument("--report-only", action="store_true", help="exit 0 even when a target is missed")
    ap.add_argument("--json", metavar="FILE")
    args = ap.parse_args()
    if args.small_repeat < 1:
        ap.error("--small-repeat: expected 1 or more, got %d" % args.small_repeat)
    args.device = "cpu" if args.dry_run else "cuda"
    args.python = args.python or (tp.PY if args.dry_run else "/opt/torch/.venv/bin/python3")
    args.baseline_python = args.python
    tp.PY = args.python
    if not args.dry_run and not (os.path.isdir("/proc/driver/nvidia/gpus") and os.listdir("/proc/driver/nvidia/gpus")):
        print("bench/kernelbench: no NVIDIA GPU here (use --dry-run to check the bench on the CPU)")
        return 2
    if not os.path.exists(tp.plugin_path("python")):
        print("bench/kernelbench: the python plugin is not built (%s)" % tp.plugin_path("python"))
        return 2
    if not tp.have_torch():
        print("bench/kernelbench: %s cannot import torch" % args.python)
        return 2
    manifest = {}
    if os.path.exists(os.path.join(args.dir, "manifest.json")):
        manifest = json.loads(read(os.path.join(args.dir, "manifest.json")))
    probs = discover(args.dir, args.problems)
    cases = [Case(p, c, args, manifest) for p in probs for c in p["candidates"]]
    if not cases:
        print("bench/kernelbench: no problem with candidates matches %r in %s" % (args.problems, args.dir))
        return 2
    log("%d problems, %d candidates" % (len(probs), len(cases)))
    rows = []
    wlabels = [w.strip() for w in args.workers.split(",") if w.strip()]
    try:
        for i, w in enumerate(wlabels):
            if w != "default" and not w.isdigit():
                raise SystemExit("--workers: expected numbers or 'default', got %r" % w)
            rows.append(run_kgymd(args, cases, w, e2e=not args.no_e2e and i == len(wlabels) - 1))
            log("kgymd W=%s: %d evaluations in %.1f s" % (w, rows[-1]["tasks"], rows[-1]["wall_s"]))
        if args.baseline != "none":
            rows.append(run_baseline(args, cases))
    except (RuntimeError, OSError, AssertionError) as e:
        print("bench/kernelbench: could not run: %s" % e)
        return 2
    misses = report(args, cases, rows)
    log("total %.0f s" % (time.monotonic() - T0))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": rows, "cases": [{"name": c.name, "expect": c.expect, "kgymd": c.results,
                                                "baseline": c.baseline, "e2e_s": c.e2e_s} for c in cases]},
                      f, indent=1)
    if misses:
        print("\nbench/kernelbench: %d target(s) missed%s:" % (len(misses), " (--report-only)" if args.report_only
                                                               else ""))
        for m in misses:
            print("  - " + m)
        return 0 if args.report_only else 1
    print("\nbench/kernelbench: every target met")
    return 0


if __name__ == "__main__":
    sys.exit(main())
