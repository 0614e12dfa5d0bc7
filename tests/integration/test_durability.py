#!/usr/bin/env python3
"""1,000 accepted tasks survive kill -9 mid-way: every one ends exactly once.

A task is written to the store before "accepted" is sent; after SIGKILL
and a restart on the same state directory, queued tasks are still queued and
running ones are retried, up to max_attempts.
"""
import sqlite3
import time
import os

import kgymtest as k

N = 1000


def test_kill9_midway():
    d = k.Daemon(kgymd_conf="max_running_tasks = 50", workers_conf="cpu_workers = 50")
    try:
        d.start()
        ids = ["dur-%04d" % i for i in range(N)]
        for chunk in range(0, N, 100):
            r = d.request({"op": "submit", "tasks": [k.selftest_task(50, task_id=t)
                                                     for t in ids[chunk:chunk + 100]]})
            k.check(len(r["accepted"]) == 100, r)
        time.sleep(0.3)  # some done, some running, most queued
        before = d.request({"op": "stats"})["tasks"]
        k.check(before["running"] > 0 and before["queued"] > 0, "mid-way: %r" % before)
        d.kill9()
        d.start()
        c = d.connect()
        events, final = c.collect_wait(c.send({"op": "wait", "task_ids": ids, "timeout_ms": 60000}))
        k.check(final["pending"] == [] and final["not_found"] == [], final)
        seen = [e["task_id"] for e in events]
        k.check(len(seen) == N and set(seen) == set(ids), "each task reported once: %d" % len(seen))
        k.check(all(e["state"] == "completed" for e in events), "all completed")
        # some were retried after the kill: their attempt is 2
        attempts = [d.request({"op": "status", "task_id": t})["attempt"] for t in ids]
        k.check(max(attempts) == 2 and min(attempts) == 1, "retries: max %d" % max(attempts))
        d.stop()
        # the store agrees: one row per task, all terminal
        db = sqlite3.connect(os.path.join(d.state_dir, "tasks.db"))
        rows = db.execute("SELECT COUNT(*), COUNT(DISTINCT id) FROM tasks").fetchone()
        k.check(rows == (N, N), rows)
        db.close()
    finally:
        d.cleanup()


def test_max_attempts_then_system_error():
    d = k.Daemon(kgymd_conf="max_attempts = 2")
    try:
        d.start()
        d.request({"op": "submit", "task": k.selftest_task(60000, task_id="doomed")})
        for attempt in (1, 2):
            deadline = time.time() + 5
            while d.request({"op": "status", "task_id": "doomed"})["state"] != "running":
                k.check(time.time() < deadline, "running again")
                time.sleep(0.02)
            k.check(d.request({"op": "status", "task_id": "doomed"})["attempt"] == attempt, attempt)
            d.kill9()
            d.start()
        r = d.request({"op": "result", "task_id": "doomed"})
        k.check(r["state"] == "failed" and r["result"]["error_code"] == "SYSTEM_ERROR", r)
        k.check("2 attempts" in r["result"]["error_message"], r)
        d.stop()
    finally:
        d.cleanup()


if __name__ == "__main__":
    k.run([test_kill9_midway, test_max_attempts_then_system_error])
