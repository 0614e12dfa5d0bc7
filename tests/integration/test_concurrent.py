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
            # Generous waits: on a 2-core CI machine this test shares the CPU
            # with other test files (make -j2); what it checks is that no
            # task is lost or told twice, not how fast 1,000 of them end.
            phase = "connect"
            try:
                c = k.Client(d.socket, timeout=120)
                phase = "barrier"
                barrier.wait(120)
                phase = "submit"
                tasks = [k.selftest_task(j % 4, task_id="c%d-t%d" % (n, j))
                         for j in range(TASKS_PER_CLIENT)]
                rid = c.send({"op": "submit", "tasks": tasks, "wait": True})
                first = c.read_for(rid)
                if len(first["accepted"]) != TASKS_PER_CLIENT:
                    raise AssertionError("client %d: %r" % (n, first))
                phase = "wait"
                events, final = c.collect_wait(rid)
                with lock:
                    for e in events:
                        results.setdefault(e["task_id"], []).append(e["state"])
                if final["pending"]:
                    raise AssertionError("client %d: pending %r" % (n, final))
                c.close()
            except Exception as e:  # noqa: BLE001 - collected and reported below
                with lock:
                    errors.append("client %d in %s: %r" % (n, phase, e))

        threads = [threading.Thread(target=client, args=(i,)) for i in range(CLIENTS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(300)
        k.check(not any(t.is_alive() for t in threads), "clients still waiting after 300 s")
        k.check(not errors, "%d client errors: %s" % (len(errors), errors[:5]))
        k.check(len(results) == CLIENTS * TASKS_PER_CLIENT, "every task reported: %d" % len(results))
        k.check(all(v == ["completed"] for v in results.values()), "each exactly once, completed")
        stats = d.request({"op": "stats"})
        k.check(stats["tasks"]["completed"] == CLIENTS * TASKS_PER_CLIENT, stats["tasks"])
        k.check(stats["waiters"] == 0, "no waiter left behind: %r" % stats)


if __name__ == "__main__":
    k.run([test_200_clients])
