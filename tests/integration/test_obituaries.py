#!/usr/bin/env python3
"""A worker killed by SIGKILL from outside kgymd is not reported as out of memory."""
import os
import signal
import time

import kgymtest as k

WORKERS = "correctness_deadline = 30\njob_deadline = 30\nkill_grace = 0.5"


def test_outside_sigkill_is_not_oom():
    with open("/proc/vmstat") as f:
        if not any(l.startswith("oom_kill ") for l in f):
            raise k.Skip("this kernel does not count OOM kills in /proc/vmstat")
    with k.Daemon(workers_conf="cpu_workers = 1\n" + WORKERS) as d:
        t = k.selftest_task(0, action="hang")
        r = d.request({"op": "submit", "task": t, "wait": True})
        k.check(r["ok"] and r["accepted"], r)
        pid = None
        deadline = time.time() + 20
        while pid is None and time.time() < deadline:
            w = d.request({"op": "workers"})["cpu_workers"][0]
            if w["state"] == "busy":
                pid = w["pid"]
            time.sleep(0.05)
        k.check(pid, "the job started")
        time.sleep(0.2)
        os.kill(pid, signal.SIGKILL)
        events, _ = d.client.collect_wait(r["id"])
        res = events[0]["result"]
        k.check(res["error_code"] == "SYSTEM_ERROR", res)
        k.check("outside kgymd" in res["error_message"] and
                "memory" not in res["error_message"], res)


if __name__ == "__main__":
    k.run([test_outside_sigkill_is_not_oom])
