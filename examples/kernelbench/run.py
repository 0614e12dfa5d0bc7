#!/usr/bin/env python3
"""examples/kernelbench/run.py -- evaluate the KernelBench-format examples on a
running kgymd and compare each verdict with expected.json.

    run.py --socket PATH [--device cpu|cuda] [--backends torch,triton,cuda]
           [--only SUBSTRING] [--cupti] [--perf-trials 20] [--json FILE]

--device cpu (the default) runs the torch candidates on CPU workers, as CI
does; --device cuda runs the chosen backends' candidates on the GPU slots
(torch candidates too, with the same expected verdicts).  Verdicts marked
"needs":"cupti" in expected.json (decoy detection) are shown but not held
against the run unless --cupti says the CUPTI layer is there.  A verdict
matches when status, correctness and error_code do and the hack is the one
the example is about: the kind expected.json names ("hack"), decoy_kernel for
a decoy, none at all on a correct example.  Exit status 0
when every verdict that counts matches, 1 when one does not, 2 when the
daemon could not be used.  Standard library only.
"""
import argparse
import json
import os
import socket
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def read(path):
    with open(path) as f:
        return f.read()


def hack_as_expected(r, exp):
    """The detector that fired is the one the example is about: the kind
    expected.json names ("hack"), decoy_kernel for a decoy, and none at all
    on a correct example."""
    kind = ((r.get("metadata") or {}).get("hack") or {}).get("kind")
    if "hack" in exp:
        return kind == exp["hack"]
    if exp.get("decoy_kernel"):
        return kind == "decoy_kernel"
    if exp.get("correctness") is True:
        return kind is None
    return True


def tasks_for(args, expected):
    out = []
    for key in sorted(expected):
        problem, variant = key.split("/")
        backend = variant.split("_")[0]
        if backend not in args.backends or (args.only and args.only not in key):
            continue
        if args.device == "cpu" and backend != "torch":
            continue
        d = os.path.join(HERE, problem)
        out.append({"task_id": "kb-%s-%s-%s" % (problem, variant, os.urandom(3).hex()), "workflow": "kernelbench",
                    "payload": {"backend": backend, "device": args.device,
                                "reference_code": read(os.path.join(d, "reference.py")),
                                "kernel_code": read(os.path.join(d, variant + ".py")),
                                "num_correct_trials": 5, "num_perf_trials": args.perf_trials},
                    "_key": key})
    return out


def submit_wait(sock_path, tasks, timeout):
    """Submit with wait:true; {task_id: result}.  Raises OSError or ValueError."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.connect(sock_path)
    s.sendall(json.dumps({"v": 1, "id": 1, "op": "submit", "tasks": tasks, "wait": True}).encode() + b"\n")
    buf, results, accepted = b"", {}, None
    while accepted is None or len(results) < accepted:
        while b"\n" not in buf:
            chunk = s.recv(1 << 20)
            if not chunk:
                raise OSError("kgymd closed the connection")
            buf += chunk
        line, buf = buf.split(b"\n", 1)
        msg = json.loads(line)
        if msg.get("event") == "result":
            results[msg["task_id"]] = msg["result"]
        elif msg.get("ok") is False:
            raise ValueError("kgymd: %s" % msg.get("error"))
        elif "accepted" in msg:
            if msg.get("rejected"):
                raise ValueError("rejected: %s" % msg["rejected"])
            accepted = len(msg["accepted"])
    s.close()
    return results


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--socket", default=os.environ.get("KGYM_SOCKET", "/run/kgym/kgymd.sock"))
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--backends", default="torch,triton,cuda")
    ap.add_argument("--only")
    ap.add_argument("--cupti", action="store_true")
    ap.add_argument("--perf-trials", type=int, default=20)
    ap.add_argument("--timeout", type=float, default=3600)
    ap.add_argument("--json", metavar="FILE")
    args = ap.parse_args()
    args.backends = args.backends.split(",")
    expected = json.loads(read(os.path.join(HERE, "expected.json")))
    tasks = tasks_for(args, expected)
    keys = {t["task_id"]: t.pop("_key") for t in tasks}
    try:
        results = submit_wait(args.socket, tasks, args.timeout)
    except (OSError, ValueError) as e:
        print("run.py: %s: %s" % (args.socket, e), file=sys.stderr)
        return 2
    bad = 0
    print("%-28s %-10s %-6s %-18s %9s  %s" % ("example", "status", "ok", "error_code", "speedup", "verdict"))
    for tid, key in sorted(keys.items(), key=lambda kv: kv[1]):
        r, exp = results.get(tid, {}), expected[key]
        match = all(r.get(f) == exp[f] for f in ("status", "correctness", "error_code")) and hack_as_expected(r, exp)
        counts = not (exp.get("needs") == "cupti" and not args.cupti)
        verdict = "as expected" if match else ("differs (needs %s)" % exp["needs"] if not counts else "DIFFERS")
        bad += 0 if match or not counts else 1
        print("%-28s %-10s %-6s %-18s %9s  %s" % (key, r.get("status"), r.get("correctness"), r.get("error_code"),
                                                 "%.2f" % r["speedup"] if isinstance(r.get("speedup"), float)
                                                 and r["speedup"] > 0 else "-", verdict))
        if not match and counts:
            kind = ((r.get("metadata") or {}).get("hack") or {}).get("kind")
            print("    %s%s" % ("(hack %s) " % kind if kind else "",
                               (r.get("error_message") or "")[:400].replace("\n", "\n    ")))
        meta = r.get("metadata") or {}
        if "custom_kernel_share" in meta or meta.get("hack"):
            # What the CUPTI layer saw: a decoy's evidence, an honest kernel's share.
            print("    custom kernels %s of %s, %.0f%% of GPU time; launches skipped change outputs: %s%s" % (
                meta.get("num_custom_kernels", "?"), meta.get("num_total_kernels", "?"),
                100 * (meta.get("custom_kernel_share") or 0), meta.get("triton_kernels_matter", "n/a"),
                "; hack %s" % meta["hack"]["kind"] if meta.get("hack") else ""))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({keys[t]: r for t, r in results.items()}, f, indent=1)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
