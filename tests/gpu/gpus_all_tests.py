#!/usr/bin/env python3
"""tests/gpu/gpus_all_tests.py -- "gpus = all": every visible GPU gets
workers, and every result names the GPU it ran on (issue 21).

Builds nothing: uses an existing build directory (KGYM_BUILDDIR, default
./build) and the test plugins (selftest), starts a private kgymd with
gpus = all and workers_per_gpu = 2 and checks:
  - the daemon has a slot set for each GPU the driver lists
    (/proc/driver/nvidia/gpus), numbered 0..n-1, each with 2 started
    workers that report the GPU's name and memory;
  - 8 tasks per GPU that launch a real kernel (the selftest gpu_probe,
    in the sandbox) submitted at once: every one correct, every result's
    metadata names its GPU -- gpu_index one of the daemon's and gpu that
    GPU's name as the workers report it -- and every GPU ran some of them.
Runs on one GPU as on eight.  Without a GPU it reports SKIP (exit 77).
"""
import os
import sys
import time

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "integration"))
os.environ.setdefault("KGYM_BUILDDIR", os.path.abspath(os.path.join(here, "..", "..", "build")))
import kgymtest as k  # noqa: E402

PER_GPU = 8
results = []


def record(name, ok, detail):
    results.append((name, "PASS" if ok else "FAIL"))
    print("%s %s: %s" % ("PASS" if ok else "FAIL", name, detail), flush=True)


def main():
    d = "/proc/driver/nvidia/gpus"
    if not (os.path.isdir(d) and os.listdir(d)):
        print("SKIP: no NVIDIA GPU on this machine (/proc/driver/nvidia/gpus)")
        return k.SKIP
    visible = len(os.listdir(d))
    if os.environ.get("CUDA_VISIBLE_DEVICES") is not None:
        print("note: CUDA_VISIBLE_DEVICES is set; kgymd numbers GPUs as the driver does, not by it")
    with k.Daemon(gpus="all", kgymd_conf="workers_per_gpu = 2",
                  workers_conf="cpu_workers = 1\ncorrectness_deadline = 60\njob_deadline = 120") as dm:
        deadline = time.time() + 180
        while time.time() < deadline:
            w = dm.request({"op": "workers"})
            states = [s["state"] for g in w["gpus"] for s in g["workers"]]
            if states and all(s == "idle" for s in states):
                break
            time.sleep(0.2)
        gpus = {g["index"]: g for g in w["gpus"]}
        record("a slot set per visible GPU", sorted(gpus) == list(range(visible)),
               "driver lists %d, kgymd has %s" % (visible, sorted(gpus)))
        bad = [i for i, g in gpus.items() if len(g["workers"]) != 2 or not g.get("name") or
               not g.get("memory_bytes") or any(s["state"] != "idle" for s in g["workers"])]
        record("every GPU's 2 workers started and report it", not bad,
               "; ".join("gpu%d: %s, %s bytes, workers %s" % (i, g.get("name"), g.get("memory_bytes"),
                                                              [s["state"] for s in g["workers"]])
                         for i, g in sorted(gpus.items())))

        tasks = []
        for i in range(PER_GPU * len(gpus)):
            t = k.selftest_task(0, action="gpu_probe", task_id="probe-%d" % i)
            t["payload"]["device"] = "gpu"
            tasks.append(t)
        r = dm.request({"op": "submit", "tasks": tasks, "wait": True})
        k.check(r.get("ok") and len(r["accepted"]) == len(tasks), r)
        events, _ = dm.client.collect_wait(r["id"])
        wrong, unnamed, used = [], [], {}
        for e in events:
            res = e["result"]
            m = res.get("metadata") or {}
            if res.get("correctness") is not True:
                wrong.append("%s: %s %s" % (e["task_id"], res.get("error_code"), res.get("error_message")))
            g = m.get("gpu_index")
            if g not in gpus or m.get("gpu") != gpus[g].get("name"):
                unnamed.append("%s: gpu_index %r, gpu %r" % (e["task_id"], g, m.get("gpu")))
            else:
                used[g] = used.get(g, 0) + 1
        record("every probe ran its kernel correctly", len(events) == len(tasks) and not wrong,
               "%d of %d results%s" % (len(events), len(tasks), ("; " + "; ".join(wrong[:3])) if wrong else ""))
        record("every result names the GPU it ran on", not unnamed and len(events) == len(tasks),
               "; ".join(unnamed[:5]) or "gpu_index and gpu on all %d" % len(events))
        record("every GPU ran tasks", sorted(used) == sorted(gpus),
               "tasks per GPU: %s" % ", ".join("gpu%d: %d" % kv for kv in sorted(used.items())))
    print("\n%-45s %s" % ("gpus = all test", "verdict"))
    for name, verdict in results:
        print("%-45s %s" % (name, verdict))
    failed = sum(1 for r in results if r[1] == "FAIL")
    print("\n%d passed, %d failed" % (len(results) - failed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
