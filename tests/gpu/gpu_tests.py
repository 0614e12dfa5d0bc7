#!/usr/bin/env python3
"""tests/gpu/gpu_tests.py -- the GPU-side tests (run by tests/gpu/run and make check).

Builds nothing: it uses an existing build directory (KGYM_BUILDDIR, default
./build) and runs everything that needs a real GPU, then prints a summary.
Without a GPU every test is reported as SKIP (exit status 77), never PASS.

What it shows (issue: sandboxed GPU workers):
  - a GPU worker initialises CUDA on its pinned GPU and reports it;
  - inside the sandbox (Seccomp: 2 in /proc/self/status) a kernel launches
    through the driver API and returns the right answer;
  - a job that opens a socket after that CUDA work is killed as a
    SANDBOX_VIOLATION, and the next task on the slot runs normally;
  - crash and hang on a GPU slot are isolated the same way.
"""
import os
import sys
import time

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "integration"))
os.environ.setdefault("KGYM_BUILDDIR", os.path.abspath(os.path.join(here, "..", "..", "build")))
import kgymtest as k  # noqa: E402

results = []


def has_gpu():
    return os.path.isdir("/proc/driver/nvidia/gpus") and os.listdir("/proc/driver/nvidia/gpus")


def run_task(d, **payload):
    t = k.selftest_task(0, action=payload.pop("action"))
    t["payload"].update(payload)
    r = d.request({"op": "submit", "task": t, "wait": True})
    events, _ = d.client.collect_wait(r["id"])
    return events[0]


def record(name, ok, detail):
    results.append((name, "PASS" if ok else "FAIL", detail))
    print("%s %s: %s" % ("PASS" if ok else "FAIL", name, detail), flush=True)


def main():
    if not has_gpu():
        print("SKIP: no NVIDIA GPU on this machine (/proc/driver/nvidia/gpus)")
        return k.SKIP
    with k.Daemon(gpus="0", kgymd_conf="workers_per_gpu = 2",
                  workers_conf="cpu_workers = 1\ncorrectness_deadline = 20\n"
                  "compile_deadline = 2\nkill_grace = 1") as d:
        deadline = time.time() + 120
        while time.time() < deadline:
            w = d.request({"op": "workers"})
            slots = w["gpus"][0]["workers"]
            if all(s["state"] == "idle" for s in slots):
                break
            time.sleep(0.2)
        g = w["gpus"][0]
        record("worker initialises CUDA on its pinned GPU",
               g["name"] is not None and (g["memory_bytes"] or 0) > 0,
               "%s, %s bytes, sandbox %r" % (g["name"], g["memory_bytes"], slots[0].get("sandbox")))

        t0 = time.time()
        e = run_task(d, action="gpu_probe", device="gpu")
        m = e["result"].get("metadata", {})
        record("kernel in the sandbox returns the right answer",
               e["state"] == "completed" and e["result"].get("correctness") is True and m.get("wrong") == 0,
               "%s elements, %s wrong, %.2f s; %s" % (m.get("elements"), m.get("wrong"), time.time() - t0,
                                                       e["result"].get("error_message", "")))
        record("Seccomp: 2 in the job's /proc/self/status", m.get("seccomp") == 2,
               "Seccomp: %s" % m.get("seccomp"))

        e = run_task(d, action="gpu_probe", device="gpu", then="network")
        record("socket after CUDA work is a sandbox violation",
               e["state"] == "failed" and e["result"].get("error_code") == "SANDBOX_VIOLATION",
               "%s: %s" % (e["result"].get("error_code"), e["result"].get("error_message")))

        e = run_task(d, action="gpu_probe", device="gpu")
        record("next GPU task after the violation passes",
               e["state"] == "completed" and e["result"].get("correctness") is True,
               e["result"].get("error_message", "ok"))

        for action, code in (("crash", "RUNTIME_ERROR"), ("hang", "TIMEOUT_ERROR")):
            payload = {"action": action, "device": "gpu"}
            if action == "hang":
                payload["phase"] = "compile"  # the 2 s compile deadline ends it
            e = run_task(d, **payload)
            after = run_task(d, action="gpu_probe", device="gpu")
            record("%s on a GPU slot is isolated" % action,
                   e["result"].get("error_code") == code and after["result"].get("correctness") is True,
                   "%s: %s; next probe %s" % (e["result"].get("error_code"),
                                              e["result"].get("error_message"), after["state"]))
    print("\n%-52s %s" % ("GPU test", "verdict"))
    for name, verdict, _ in results:
        print("%-52s %s" % (name, verdict))
    failed = sum(1 for r in results if r[1] == "FAIL")
    print("\n%d passed, %d failed" % (len(results) - failed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
