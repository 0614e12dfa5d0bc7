#!/usr/bin/env python3
"""examples/native/run.py -- evaluate the native examples on a running kgymd
and print a table (scripts/run-examples calls it; so can you).

    run.py --socket PATH [--compile-only] [--only SUBSTRING] [--json FILE]

Submits every examples/native/*/*.task.json (build.py writes them), waits for
all of them, and prints one row per task: problem, variant, status,
correctness, speedup, error_code, and whether the verdict is the one
examples/native/expected.json gives.  Exit status 0 when every verdict
matches, 1 when one does not, 2 when the daemon could not be used.

--compile-only is for a machine without a GPU: the daemon can compile (NVRTC
needs no GPU) but not evaluate, so the check is only that each candidate
compiled -- or, for the compile_error variants, failed with
COMPILATION_ERROR -- and the table shows the compile figures instead.
Standard library only.
"""
import argparse
import glob
import json
import os
import socket
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


class Conn:
    """One protocol-v1 connection (line-delimited JSON)."""

    def __init__(self, path, timeout):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect(path)
        self.buf = b""
        self.next_id = 0

    def send(self, obj):
        self.next_id += 1
        obj = dict(obj, v=1, id=self.next_id)
        self.sock.sendall(json.dumps(obj).encode() + b"\n")
        return self.next_id

    def line(self):
        while b"\n" not in self.buf:
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise ConnectionError("kgymd closed the connection")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)


def task_files(only=None):
    files = sorted(glob.glob(os.path.join(HERE, "*", "*.task.json")))
    return [f for f in files if only is None or only in os.path.basename(os.path.dirname(f)) + "-" +
            os.path.basename(f)]


def evaluate(sock_path, tasks, timeout=3600, progress=None):
    """Submit `tasks` and wait for all; {task_id: result}.  Task ids are made
    unique per run (a resubmitted id would return the old task), so the
    results are keyed by the files' task ids."""
    conn = Conn(sock_path, timeout)
    suffix = "-%x" % (int.from_bytes(os.urandom(4), "little"))
    renamed = []
    for t in tasks:
        t = dict(t)
        t["task_id"] = t["task_id"] + suffix
        renamed.append(t)
    rid = conn.send({"op": "submit", "tasks": renamed, "wait": True})
    results = {}
    while True:
        msg = conn.line()
        if msg.get("id") != rid:
            continue
        if msg.get("ok") is False:
            raise RuntimeError("submit refused: %s" % (msg.get("error"),))
        if msg.get("rejected"):
            raise RuntimeError("tasks rejected: %s" % (msg["rejected"],))
        if msg.get("event") == "result":
            tid = msg["task_id"][:-len(suffix)]
            results[tid] = msg["result"]
            if progress:
                progress(tid, msg["result"])
        elif msg.get("done"):
            break
    conn.sock.close()
    return results


def fmt(v, digits=2):
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return "%.*f" % (digits, v)
    return str(v)


def verdict_ok(res, want):
    return (res.get("status") == want["status"] and bool(res.get("correctness")) == want["correctness"]
            and res.get("error_code") == want["error_code"])


def compile_ok(tid, res):
    if tid.endswith("-compile_error"):
        return res.get("error_code") == "COMPILATION_ERROR" and res.get("compiled") is False
    return res.get("compiled") is True and res.get("error_code") not in ("COMPILATION_ERROR",
                                                                         "VALIDATION_ERROR")


def first_line(s, n=70):
    s = (s or "").strip().splitlines()
    return (s[0][:n] if s else "")


def print_table(header, rows, out=sys.stdout):
    widths = [max(len(str(r[i])) for r in [header] + rows) for i in range(len(header))]
    line = "  ".join("%-*s" % (w, h) for w, h in zip(widths, header))
    out.write(line.rstrip() + "\n" + "  ".join("-" * w for w in widths) + "\n")
    for r in rows:
        out.write("  ".join("%-*s" % (w, c) for w, c in zip(widths, r)).rstrip() + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--socket", required=True)
    ap.add_argument("--compile-only", action="store_true")
    ap.add_argument("--only", help="only task ids containing this")
    ap.add_argument("--json", help="also write every result to this file")
    ap.add_argument("--timeout", type=float, default=3600)
    args = ap.parse_args()

    with open(os.path.join(HERE, "expected.json")) as f:
        expected = json.load(f)
    files = task_files(args.only)
    if not files:
        print("run.py: no task files (run examples/native/build.py)", file=sys.stderr)
        return 2
    tasks = []
    for path in files:
        with open(path) as f:
            tasks.append(json.load(f))
    try:
        results = evaluate(args.socket, tasks, args.timeout)
    except (OSError, RuntimeError, ValueError) as e:
        print("run.py: %s" % e, file=sys.stderr)
        return 2
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1, sort_keys=True)

    rows, bad = [], 0
    for t in tasks:
        tid = t["task_id"]
        res = results.get(tid, {})
        problem, variant = tid.split("-", 1)
        meta = res.get("metadata") or {}
        if args.compile_only:
            ok = compile_ok(tid, res)
            rows.append([problem, variant, fmt(res.get("compiled")), fmt(meta.get("compile_ms"), 1),
                         meta.get("reference_cubin", "-"), res.get("error_code") or "-",
                         "ok" if ok else "UNEXPECTED",
                         first_line(res.get("error_message")) if not ok or variant == "compile_error"
                         else ""])
        else:
            want = expected.get(tid)
            ok = want is not None and verdict_ok(res, want)
            rows.append([problem, variant, res.get("status", "-"), fmt(res.get("correctness")),
                         fmt(res.get("speedup")), fmt(res.get("kernel_runtime"), 3),
                         fmt(res.get("reference_runtime"), 3), res.get("error_code") or "-",
                         "ok" if ok else "UNEXPECTED (want %s)" % (want,)])
        bad += not ok
    print()
    if args.compile_only:
        print_table(["problem", "variant", "compiled", "compile_ms", "reference", "error_code",
                     "check", "first line of the message"], rows)
    else:
        print_table(["problem", "variant", "status", "correct", "speedup", "kernel_ms", "ref_ms",
                     "error_code", "check"], rows)
    print()
    what = "compile as expected" if args.compile_only else "give the verdict of expected.json"
    if bad:
        print("run.py: %d of %d native examples do not %s" % (bad, len(rows), what))
        return 1
    print("run.py: all %d native examples %s" % (len(rows), what))
    return 0


if __name__ == "__main__":
    sys.exit(main())
