#!/usr/bin/env python3
"""200 concurrent clients submit and wait: every task ends exactly once."""
import threading

import kgymtest as k

CLIENTS = 200
TASKS_PER_CLIENT = 5


def test_200_clients():
    with k.Daemon(kgymd_conf="max_connections = 512") as d:
        results = {}
        errors = []
        lock = threading.Lock()
        barrier = threading.Barrier(CLIENTS)

        def client(n):
            try:
                c = d.connect()
                barrier.wait(30)
                tasks = [k.selftest_task(j % 4, task_id="c%d-t%d" % (n, j))
                         for j in range(TASKS_PER_CLIENT)]
                rid = c.send({"op": "submit", "tasks": tasks, "wait": True})
                first = c.read_for(rid)
                if len(first["accepted"]) != TASKS_PER_CLIENT:
                    raise AssertionError("client %d: %r" % (n, first))
                events, final = c.collect_wait(rid)
                with lock:
                    for e in events:
                        results.setdefault(e["task_id"], []).append(e["state"])
                if final["pending"]:
                    raise AssertionError("client %d: pending %r" % (n, final))
                c.close()
            except Exception as e:  # noqa: BLE001 - collected and reported below
                errors.append(repr(e))

        threads = [threading.Thread(target=client, args=(i,)) for i in range(CLIENTS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        k.check(not errors, "client errors: %s" % errors[:5])
        k.check(len(results) == CLIENTS * TASKS_PER_CLIENT, "every task reported: %d" % len(results))
        k.check(all(v == ["completed"] for v in results.values()), "each exactly once, completed")
        stats = d.request({"op": "stats"})
        k.check(stats["tasks"]["completed"] == CLIENTS * TASKS_PER_CLIENT, stats["tasks"])
        k.check(stats["waiters"] == 0, "no waiter left behind: %r" % stats)


if __name__ == "__main__":
    k.run([test_200_clients])
