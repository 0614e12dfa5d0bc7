"""kgym-eval: evaluate a problem set with kgymd and print a table per level.

    kgym-eval PROBLEMS [-c CANDIDATES] [-o results.jsonl] [-s ADDRESS] [--backend cuda]
              [--device cpu] [--field KEY=VALUE]... [--plot speedups.png]

PROBLEMS is a KernelBench-layout folder (level1/19_ReLU.py, ...) or a JSONL
of tasks; CANDIDATES a folder in the same layout or a JSONL (see
kgym.dataset).  Each result is appended to the output JSONL as it ends.  A
task's id is a hash of what it evaluates (and of the user), so running
again skips every task whose result the output already holds, and a task
the server still has (an interrupted run) is attached to, not run again.

Prints, per level and for all: tasks, correct %, fast_p for p = 0, 1, 1.5,
2 (the share of tasks that are correct and more than p times as fast as the
reference), the geometric mean speedup of the correct ones, and the
failures by error code.  Exit status: 0 when every task has a result, 1
when some could not be evaluated (CLIENT_ERROR lines), 2 on usage errors.
"""
from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import math
import os
import sys
from typing import Any, Dict, List, Optional

from . import dataset
from .client import build_task
from .errors import KgymError
from .sync import Client


def _field(text: str) -> "tuple[str, Any]":
    if "=" not in text:
        raise argparse.ArgumentTypeError("expected KEY=VALUE, not %r" % text)
    k, v = text.split("=", 1)
    try:
        return k, json.loads(v)
    except ValueError:
        return k, v


def parse_args(argv: Optional[List[str]]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="kgym-eval", description="Evaluate a KernelBench-layout folder or a JSONL "
                                "of tasks with kgymd; print correctness and fast_p per level.")
    p.add_argument("problems", help="KernelBench-layout folder (level1/19_ReLU.py ...) or JSONL of tasks")
    p.add_argument("-c", "--candidates", help="folder in the same layout, or JSONL, of candidates (ModelNew)")
    p.add_argument("-o", "--output", default="kgym-eval.jsonl", help="JSONL of results, appended (default: %(default)s)")
    p.add_argument("-s", "--server", default=None,
                   help="kgymd's socket or an http:// URL (default: $KGYM_URL, $KGYM_SOCKET, /run/kgym/kgymd.sock)")
    p.add_argument("--backend", default="cuda", help="triton, cuda, torch or nvrtc (default: %(default)s)")
    p.add_argument("--device", help="the payload's device (cpu runs torch candidates without a GPU)")
    p.add_argument("--field", action="append", type=_field, default=[], metavar="KEY=VALUE",
                   help="a task field (JSON value), such as num_perf_trials=100; repeatable")
    p.add_argument("--timeout-s", type=float, help="each task's timeout_s")
    p.add_argument("--priority", choices=("high", "normal", "low"))
    p.add_argument("--levels", help="only these levels, such as 1,2")
    p.add_argument("-j", "--concurrency", type=int, default=16, help="tasks in flight (default: %(default)s)")
    p.add_argument("--plot", metavar="FILE.png", help="draw the speedup distribution (needs matplotlib)")
    p.add_argument("--no-progress", action="store_true", help="no progress line, even on a terminal")
    a = p.parse_args(argv)
    if a.concurrency < 1:
        p.error("--concurrency: expected at least 1")
    return a


def task_id(problem: dataset.Problem, task: Dict[str, Any]) -> str:
    """Same content, same user: same id (resumable, idempotent on the server)."""
    h = hashlib.sha256(json.dumps([os.getuid(), problem.key, task], sort_keys=True).encode()).hexdigest()
    return "kgym-eval-" + h[:40]


def read_stored(path: str) -> Dict[str, Dict[str, Any]]:
    """{task_id: record} of the output's lines that hold a result."""
    out: Dict[str, Dict[str, Any]] = {}
    if not os.path.exists(path):
        return out
    with open(path, encoding="utf-8") as f:
        for line in f:
            try:
                rec = json.loads(line)
            except ValueError:
                continue        # a line cut short by an interrupted run
            if isinstance(rec, dict) and rec.get("task_id") and rec.get("state") in ("completed", "failed",
                                                                                      "cancelled"):
                out[rec["task_id"]] = rec
    return out


def plot(path: str, records: List[Dict[str, Any]]) -> None:
    import matplotlib  # type: ignore
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # type: ignore
    by_level: Dict[str, List[float]] = {}
    for rec in records:
        r = rec.get("result") or {}
        s = r.get("speedup")
        if r.get("correctness") is True and isinstance(s, (int, float)) and s > 0:
            by_level.setdefault("level %s" % rec.get("level"), []).append(math.log2(s))
    fig, ax = plt.subplots(figsize=(7, 4))
    if by_level:
        ax.hist(list(by_level.values()), bins=30, label=list(by_level.keys()), stacked=True)
        ax.legend()
    ax.axvline(0.0, color="black", linewidth=1)
    ax.set_xlabel("log2(speedup) of correct candidates")
    ax.set_ylabel("tasks")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def main(argv: Optional[List[str]] = None) -> int:
    a = parse_args(argv)
    prog = "kgym-eval"
    if a.plot:
        if importlib.util.find_spec("matplotlib") is None:
            print("%s: --plot needs matplotlib (pip install 'kgym[plot]')" % prog, file=sys.stderr)
            return 2
    try:
        problems = dataset.load_problems(a.problems)
        cands = dataset.load_candidates(a.candidates, problems) if a.candidates else {}
    except (dataset.DatasetError, OSError, UnicodeDecodeError) as e:
        print("%s: %s" % (prog, e), file=sys.stderr)
        return 2
    if a.levels:
        try:
            want = {int(x) for x in a.levels.split(",") if x.strip()}
        except ValueError:
            print("%s: --levels: expected numbers such as 1,2" % prog, file=sys.stderr)
            return 2
        problems = [p for p in problems if p.level in want]
    fields = dict(a.field)
    if a.device:
        fields["device"] = a.device
    if a.timeout_s is not None:
        fields["timeout_s"] = a.timeout_s
    if a.priority:
        fields["priority"] = a.priority

    jobs = []
    missing = 0
    for p in problems:
        code = cands.get(p.key, p.kernel_code)
        if code is None:
            missing += 1
            continue
        f = dict(p.fields)
        f.update(fields)
        f.setdefault("backend", a.backend)
        task = build_task(p.reference_code, code, **f)
        task["task_id"] = task_id(p, task)
        jobs.append((p, task))
    if not jobs:
        print("%s: no problem has a candidate (%d problems)" % (prog, len(problems)), file=sys.stderr)
        return 2

    stored = read_stored(a.output)
    todo = [(p, t) for p, t in jobs if t["task_id"] not in stored]
    print("%s: %d tasks: %d stored results reused, %d to evaluate%s" % (
        prog, len(jobs), len(jobs) - len(todo), len(todo),
        ", %d problems without a candidate" % missing if missing else ""), file=sys.stderr)

    records: Dict[str, Dict[str, Any]] = {t["task_id"]: stored[t["task_id"]] for _, t in jobs
                                          if t["task_id"] in stored}
    errors = 0
    if todo:
        try:
            client = Client(a.server)
        except (KgymError, ValueError) as e:
            print("%s: %s" % (prog, e), file=sys.stderr)
            return 2
        try:
            with open(a.output, "a", encoding="utf-8") as out:
                for r in client.evaluate_many([t for _, t in todo], concurrency=a.concurrency,
                                              progress=not a.no_progress):
                    p, t = todo[r.index if r.index is not None else 0]
                    rec = {"key": p.key, "level": p.level, "problem": p.name, "task_id": t["task_id"],
                           "state": r.state, "result": r.to_dict()}
                    if r.state == "error":
                        errors += 1
                    out.write(json.dumps(rec, sort_keys=True) + "\n")
                    out.flush()
                    records[t["task_id"]] = rec
        finally:
            client.close()

    ordered = [records[t["task_id"]] for _, t in jobs if t["task_id"] in records]
    print(dataset.table(dataset.summarize(ordered)))
    if a.plot:
        plot(a.plot, ordered)
        print("%s: speedup plot written to %s" % (prog, a.plot), file=sys.stderr)
    if errors:
        print("%s: %d tasks could not be evaluated (CLIENT_ERROR in %s); run again to retry them"
              % (prog, errors, a.output), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
