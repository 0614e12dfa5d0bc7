#!/usr/bin/env python3
"""Every limit is a config key, and hitting it gives its own error."""
import socket
import time

import kgymtest as k


def test_too_large_closes_after_reply():
    with k.Daemon(kgymd_conf="max_request_bytes = 1K") as d:
        c = d.connect()
        c.send_raw(b'{"v":1,"id":1,"op":"hello","pad":"' + b"x" * 2000 + b'"}\n')
        r = c.read_line()
        k.check(r["ok"] is False and r["error"]["code"] == "too_large", r)
        k.check("max_request_bytes" in r["error"]["message"], r)
        k.check(c.read_line() is None, "connection closed after too_large")
        # a line without a newline that outgrows the limit is refused too
        c = d.connect()
        c.send_raw(b"y" * 5000)
        r = c.read_line()
        k.check(r["error"]["code"] == "too_large", r)
        # a request just under the limit is served
        r = d.request({"op": "hello", "pad": "x" * 800})
        k.check(r["ok"], r)


def test_client_that_does_not_read_is_dropped():
    with k.Daemon(kgymd_conf="max_reply_backlog = 1M") as d:
        c = d.connect()
        c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        line = b'{"v":1,"id":1,"op":"stats"}\n'
        c.sock.settimeout(5)
        try:
            for _ in range(50):
                c.sock.sendall(line * 200)
        except OSError:
            pass  # dropped while we were still sending
        deadline = time.time() + 10
        while "not reading its replies" not in d.read_log() and time.time() < deadline:
            time.sleep(0.05)
        k.check("not reading its replies" in d.read_log(), "the slow reader was dropped")
        k.check(d.request({"op": "health"})["ok"], "the daemon keeps serving others")
        with open("/proc/%d/status" % d.proc.pid) as f:
            rss = [int(l.split()[1]) for l in f if l.startswith("VmRSS:")][0]
        k.check(rss < 64 * 1024, "RSS stays bounded: %d kB" % rss)


def test_max_connections():
    with k.Daemon(kgymd_conf="max_connections = 3") as d:
        extra = [d.connect(), d.connect()]  # with d.client: 3
        for c in extra:
            k.check(c.request({"op": "hello"})["ok"], "within the limit")
        c = d.connect()
        r = c.read_line()
        k.check(r["ok"] is False and r["error"]["code"] == "too_many_connections", r)
        k.check(c.read_line() is None, "closed")
        extra[0].close()
        time.sleep(0.1)
        c = d.connect()
        k.check(c.request({"op": "hello"})["ok"], "a slot freed by a closed client is reusable")


def test_queue_full():
    with k.Daemon(kgymd_conf="max_queued_tasks = 5\nmax_running_tasks = 1") as d:
        r = d.request({"op": "submit", "tasks": [k.selftest_task(10000) for _ in range(8)]})
        # five wait, one runs: a big batch is stored in slices, and the one
        # task that starts between two slices frees its place in the queue
        k.check(len(r["accepted"]) in (5, 6), r)
        k.check([x["error"]["code"] for x in r["rejected"]] == ["queue_full"] * (8 - len(r["accepted"])), r)
        h = d.request({"op": "health"})
        k.check(h["queued"] <= 5 and h["queued"] + h["running"] == len(r["accepted"]),
                "the queue holds at most max_queued_tasks: %r" % h)
        time.sleep(0.1)
        if len(r["accepted"]) == 5:
            r = d.request({"op": "submit", "task": k.selftest_task(0)})
            k.check(len(r["accepted"]) == 1, "one slot freed when a task started: %r" % r)
        r = d.request({"op": "submit", "task": k.selftest_task(0)})
        k.check(r["rejected"][0]["error"]["code"] == "queue_full", r)


def test_max_batch_tasks():
    with k.Daemon(kgymd_conf="max_batch_tasks = 4") as d:
        r = d.request({"op": "submit", "tasks": [k.selftest_task(0) for _ in range(5)]})
        k.check(r["ok"] is False and "max_batch_tasks" in r["error"]["message"], r)


def test_forbidden_peer():
    # Root and kgymd's own uid are always trusted; any other uid must be
    # listed.  A client running as nobody is not.
    with k.Daemon(kgymd_conf="socket_mode = 0666") as d:
        r = k.request_as_nobody(d, {"op": "hello"})
        k.check(r["ok"] is False and r["error"]["code"] == "forbidden", r)
        k.check("65534" in r["error"]["message"], r)
        k.check("not in allow_uids" in d.read_log(), "refusal logged")
        k.check(d.request({"op": "health"})["ok"], "still serving the allowed")
    with k.Daemon(kgymd_conf="socket_mode = 0666\nallow_uids = 65534") as d:
        r = k.request_as_nobody(d, {"op": "hello"})
        k.check(r["ok"] is True, "a listed uid is served: %r" % r)


def test_admin_ops_need_admin():
    with k.Daemon(kgymd_conf="socket_mode = 0666\nallow_uids = 65534") as d:
        r = k.request_as_nobody(d, {"op": "drain"})
        k.check(r["ok"] is False and r["error"]["code"] == "forbidden" and "drain" in r["error"]["message"], r)
        r = k.request_as_nobody(d, {"op": "shutdown"})
        k.check(r["error"]["code"] == "forbidden", r)
        k.check(d.request({"op": "health"})["status"] == "healthy", "still serving, not draining")
    with k.Daemon(kgymd_conf="socket_mode = 0666\nallow_uids = 65534\nadmin_uids = 65534") as d:
        r = k.request_as_nobody(d, {"op": "drain"})
        k.check(r["ok"] is True and r["draining"], "a listed admin may drain: %r" % r)


def test_result_ttl_prunes():
    d = k.Daemon(kgymd_conf="result_ttl = 1s")
    try:
        d.start()
        d.request({"op": "submit", "tasks": [k.selftest_task(0, task_id="old"),
                                              k.selftest_task(60000, task_id="live")]})
        d.client.collect_wait(d.client.send({"op": "wait", "task_ids": ["old"]}))
        k.check(d.request({"op": "status", "task_id": "old"})["ok"], "present")
        # pruning runs at start-up and then every minute: restart after the ttl
        d.stop()
        time.sleep(1.5)
        d.start()
        r = d.request({"op": "status", "task_id": "old"})
        k.check(r["ok"] is False and r["error"]["code"] == "not_found", "pruned: %r" % r)
        r = d.request({"op": "status", "task_id": "live"})
        k.check(r["ok"] and r["state"] in ("queued", "running"), "unfinished kept: %r" % r)
        d.stop()
    finally:
        d.cleanup()


if __name__ == "__main__":
    k.run([test_too_large_closes_after_reply, test_client_that_does_not_read_is_dropped,
           test_max_connections, test_queue_full,
           test_max_batch_tasks, test_forbidden_peer, test_admin_ops_need_admin,
           test_result_ttl_prunes])
