#!/usr/bin/env python3
"""Three kgymd nodes sharing one queue on a real Redis (kgymd.conf(5), [cluster]).

Each test starts its own redis-server (Debian's redis-server package) on a
Unix socket in a temporary directory, with its append-only file on
(appendfsync always), and three kgymd nodes on this machine pointed at it.
Without redis-server the tests report SKIP.

What must hold: every accepted task reaches exactly one terminal result,
whichever node it was submitted to; a node killed with SIGKILL mid-run
loses nothing (its claims are reclaimed after the lease and finished by the
others); a Redis killed with SIGKILL and restarted from its AOF loses
nothing accepted, and submits while it is away are refused `unavailable`;
a node whose lease expired and that comes back does not overwrite the
result that another node wrote.
"""
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time

import kgymtest as k
import test_python as tp

REDIS = shutil.which("redis-server")


class Redis:
    def __init__(self, fsync="always"):
        self.fsync = fsync
        if REDIS is None:
            raise k.Skip("no redis-server (Debian: redis-server)")
        self.dir = tempfile.mkdtemp(prefix="kgym-redis-")
        self.sock = os.path.join(self.dir, "redis.sock")
        self.proc = None
        self.start()

    def start(self):
        self.log = open(os.path.join(self.dir, "redis.log"), "ab")
        self.proc = subprocess.Popen(
            [REDIS, "--port", "0", "--unixsocket", self.sock, "--unixsocketperm", "700",
             "--dir", self.dir, "--appendonly", "yes", "--appendfsync", self.fsync,
             "--save", ""], stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 10
        while time.time() < deadline:
            try:
                s = socket.socket(socket.AF_UNIX)
                s.connect(self.sock)
                s.sendall(b"PING\r\n")
                if s.recv(64).startswith(b"+PONG"):
                    s.close()
                    return
                s.close()
            except OSError:
                pass
            time.sleep(0.05)
        raise AssertionError("redis-server did not start")

    def kill9(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def cleanup(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


class Node(k.Daemon):
    """A kgymd node of the cluster, with the selftest and (optionally) python plugins."""

    def __init__(self, redis, name, lease=2, python=False, running=50, cpu_workers=2,
                 max_attempts=3):
        conf = "[cluster]\nredis = %s\nnode_id = %s\nlease = %d\nmax_attempts = %d\n" % (
            redis.sock, name, lease, max_attempts)
        dirs = None
        self.pdir = None
        if python:
            self.pdir = tempfile.mkdtemp(prefix="kgym-plugins-")
            for name_ in ("kernelbench", "python", "selftest", "selftest_backend"):
                src = tp.plugin_path(name_) if name_ in ("kernelbench", "python") else k.test_plugin(name_)
                dst = os.path.join(self.pdir, name_ + ".so")
                shutil.copyfile(src, dst)
                os.chmod(dst, 0o755)
            dirs = [self.pdir]
            conf += "[plugin.python]\ninterpreter = %s\nharness = %s\nsandbox_lib = %s\n" \
                    "correctness_timeout = 60\ntiming_timeout = 60\nmax_output_bytes = 256M\n" % (
                        tp.PY, tp.HARNESS, tp.sandbox_lib())
        super().__init__(kgymd_conf="max_running_tasks = %d\n" % running, extra_conf=conf,
                         plugin_dirs=dirs,
                         workers_conf="cpu_workers = %d\nstart_timeout = 60\njob_deadline = 120\n"
                                      "compile_deadline = 120\ncorrectness_deadline = 120\n"
                                      "timing_deadline = 120" % cpu_workers)
        self.name = name

    def cleanup(self):
        super().cleanup()
        if self.pdir:
            shutil.rmtree(self.pdir, ignore_errors=True)


def quick(task_id, delay_ms=0, in_daemon=True):
    return {"task_id": task_id, "workflow": "selftest",
            "payload": {"action": "ok", "delay_ms": delay_ms, "in_daemon": in_daemon}}


def wait_all(node, ids, timeout_s=120):
    """{task_id: event} for every id, each heard once."""
    c = node.connect()
    c.sock.settimeout(timeout_s + 10)
    try:
        events, final = c.collect_wait(c.send({"op": "wait", "task_ids": ids,
                                               "timeout_ms": timeout_s * 1000}))
    finally:
        c.close()
    k.check(final.get("pending") == [] and final.get("not_found") == [],
            "every task ended: %d pending, %r not found" % (len(final.get("pending", [])),
                                                           final.get("not_found", [])[:5]))
    seen = {}
    for e in events:
        k.check(e["task_id"] not in seen, "task %s reported twice" % e["task_id"])
        seen[e["task_id"]] = e
    k.check(set(seen) == set(ids), "each task reported: %d of %d" % (len(seen), len(ids)))
    return seen


def submit(node, tasks):
    c = node.connect()
    try:
        r = c.request({"op": "submit", "tasks": tasks})
    finally:
        c.close()
    k.check(r.get("ok") and not r["rejected"], "accepted: %r" % (r.get("rejected", r),)[:300])
    return [a["task_id"] for a in r["accepted"]]


def cluster(redis, n=3, **kw):
    nodes = [Node(redis, "n%d" % i, **kw) for i in range(n)]
    for d in nodes:
        d.start()
    return nodes


def finish(nodes, redis, ok):
    for d in nodes:
        if not ok:
            print("--- %s log ---\n%s" % (d.name, d.read_log()[-6000:]))
        try:
            if d.proc is not None:
                d.stop()
        finally:
            d.cleanup()
    redis.cleanup()


def test_three_nodes_3000_tasks():
    """3,000 selftest tasks and some CPU python tasks, submitted to all three nodes."""
    redis = Redis()
    python = tp.have_torch() and os.path.exists(tp.plugin_path("python"))
    nodes, ok = [], False
    try:
        nodes = cluster(redis, python=python)
        ids = []
        for i in range(30):
            batch = [quick("q%04d" % (i * 100 + j), in_daemon=(j % 10 != 0)) for j in range(100)]
            ids += submit(nodes[i % 3], batch)
        py_ids = []
        if python:
            for i in range(3):
                py_ids += submit(nodes[i], [tp.example("relu", "torch_correct", task_id="py%d" % i)])
        # Each node waits for all: the result reaches every node, once.
        seen = wait_all(nodes[1], ids + py_ids, timeout_s=300)
        k.check(all(e["state"] == "completed" for e in seen.values()),
                "all completed: %r" % [e for e in seen.values() if e["state"] != "completed"][:2])
        ran = {}
        for e in seen.values():
            ran[e["result"]["metadata"]["node"]] = ran.get(e["result"]["metadata"]["node"], 0) + 1
        k.check(len(ran) == 3, "every node ran tasks: %r" % ran)
        for t in py_ids:
            k.check(seen[t]["result"]["correctness"] is True, "python task correct: %r" % seen[t])
        # status/result on a node that neither accepted nor ran it
        for t in ("q0005", "q1234", "q2999"):
            node = seen[t]["result"]["metadata"]["node"]
            other = [d for d in nodes if d.name != node][0]
            r = other.request({"op": "result", "task_id": t})
            k.check(r["ok"] and r["result"]["metadata"]["node"] == node, r)
        listing = nodes[2].request({"op": "list", "limit": 5})
        k.check(len(listing["tasks"]) == 5 and listing["next"] is not None, listing)
        workers = nodes[0].request({"op": "workers"})
        names = sorted(n["node"] for n in workers["nodes"])
        k.check(names == ["n0", "n1", "n2"] and all(n["alive"] for n in workers["nodes"]), workers)
        k.check(all("heartbeat_ms" in n and "workers" in n and "gpus" in n for n in workers["nodes"]),
                workers)
        stats = nodes[2].request({"op": "stats"})
        k.check(len(stats["nodes"]) == 3 and stats["node"] == "n2", stats.get("nodes"))
        # cancel on any node: a long task accepted by n0, cancelled through n2
        submit(nodes[0], [quick("long", delay_ms=60000)])
        r = nodes[2].request({"op": "cancel", "task_id": "long"})
        k.check(r["ok"] and r["cancelled"] and r["state"] == "cancelled", r)
        seen = wait_all(nodes[1], ["long"], timeout_s=30)
        k.check(seen["long"]["state"] == "cancelled" and
                seen["long"]["result"]["error_code"] == "CANCELLED", seen)
        r = nodes[0].request({"op": "cancel", "task_id": "long"})
        k.check(r["ok"] and not r["cancelled"] and r["state"] == "cancelled", r)
        r = nodes[1].request({"op": "status", "task_id": "no-such-task"})
        k.check(not r["ok"] and r["error"]["code"] == "not_found", r)
        ok = True
    finally:
        finish(nodes, redis, ok)


def test_kill9_node_midway():
    """kill -9 of one node: its tasks are reclaimed and finished by the others, once."""
    redis = Redis()
    nodes, ok = [], False
    try:
        nodes = cluster(redis, lease=2, running=20)
        ids = []
        for i in range(3):
            ids += submit(nodes[i], [quick("k%d-%03d" % (i, j), delay_ms=300) for j in range(100)])
        time.sleep(0.5)
        running = nodes[1].request({"op": "stats"})["tasks"]["running"]
        k.check(running > 0, "n1 runs tasks when it is killed: %d" % running)
        nodes[1].kill9()
        t0 = time.time()
        seen = wait_all(nodes[0], ids, timeout_s=120)
        k.check(all(e["state"] == "completed" for e in seen.values()), "all completed")
        retried = [e for e in seen.values() if e["result"]["metadata"]["attempt"] > 1]
        k.check(retried, "some tasks were reclaimed from n1")
        k.check(all(e["result"]["metadata"]["node"] != "n1" for e in retried),
                "reclaimed tasks finished elsewhere")
        print("all %d ended %.1f s after the kill; %d reclaimed" % (len(ids), time.time() - t0,
                                                                  len(retried)))
        ok = True
    finally:
        finish(nodes, redis, ok)


def test_redis_kill9_and_restart():
    """Redis killed mid-run and restarted from its AOF: nothing accepted is lost."""
    redis = Redis()
    nodes, ok = [], False
    try:
        nodes = cluster(redis, running=20)
        ids = []
        for i in range(3):
            ids += submit(nodes[i], [quick("r%d-%03d" % (i, j), delay_ms=200) for j in range(200)])
        time.sleep(0.5)
        redis.kill9()
        # Away: a submit is refused, saying why; running tasks go on.
        r = nodes[0].request({"op": "submit", "task": quick("refused")})
        k.check(not r["ok"] and r["error"]["code"] == "unavailable" and
                "Redis" in r["error"]["message"], r)
        h = nodes[1].request({"op": "health"})
        k.check(h["status"] == "unavailable", h)
        time.sleep(1.0)
        redis.start()
        seen = wait_all(nodes[2], ids, timeout_s=120)
        k.check(all(e["state"] == "completed" for e in seen.values()), "all completed")
        r = nodes[0].request({"op": "status", "task_id": "refused"})
        k.check(not r["ok"] and r["error"]["code"] == "not_found", r)
        logs = "".join(d.read_log() for d in nodes)
        k.check("Redis is reachable again" in logs, "nodes noticed Redis come back")
        k.check(nodes[1].request({"op": "health"})["status"] == "healthy", "healthy again")
        k.check("results kept while Redis was away are being written" in logs,
                "results of tasks that ended while Redis was away were kept, then written")
        ok = True
    finally:
        finish(nodes, redis, ok)


def test_late_node_does_not_overwrite():
    """A node stopped past its lease comes back: the other node's result stands."""
    redis = Redis()
    nodes, ok = [], False
    try:
        # b starts once a holds the task.
        a = Node(redis, "n0", lease=1, running=5)
        nodes.append(a)
        a.start()
        submit(a, [quick("late", delay_ms=2500)])
        deadline = time.time() + 10
        while a.request({"op": "stats"})["tasks"]["running"] == 0:
            k.check(time.time() < deadline, "a runs the task")
            time.sleep(0.02)
        b = Node(redis, "n1", lease=1, running=5)
        nodes.append(b)
        b.start()
        a.proc.send_signal(signal.SIGSTOP)
        try:
            seen = wait_all(b, ["late"], timeout_s=30)
        finally:
            a.proc.send_signal(signal.SIGCONT)
        res = seen["late"]["result"]
        k.check(seen["late"]["state"] == "completed" and res["metadata"]["node"] == "n1", res)
        k.check(res["metadata"]["attempt"] == 2, res)
        # a ends its run (or hears it ended elsewhere) and loses: it says so.
        deadline = time.time() + 15
        while "late: n1's result stands" not in a.read_log():
            k.check(time.time() < deadline, "a logs that n1's result stands:\n" + a.read_log()[-3000:])
            time.sleep(0.1)
        for node in (a, b):
            r = node.request({"op": "result", "task_id": "late"})
            k.check(r["result"]["metadata"]["node"] == "n1", r)
        ok = True
    finally:
        finish(nodes, redis, ok)


def test_heartbeat_keeps_claims():
    """Tasks running three leases long on a live node are renewed, not reclaimed."""
    redis = Redis()
    nodes, ok = [], False
    try:
        nodes = cluster(redis, n=2, lease=1, running=5)
        ids = submit(nodes[0], [quick("hb%d" % i, delay_ms=3500) for i in range(4)])
        seen = wait_all(nodes[1], ids, timeout_s=30)
        for e in seen.values():
            k.check(e["state"] == "completed" and
                    e["result"].get("metadata", {}).get("attempt") == 1,
                    "ran once, not reclaimed: %r" % e["result"])
        # status of another node's task, from the node that did not run it
        ran = seen["hb0"]["result"]["metadata"]["node"]
        other = nodes[1] if ran == "n0" else nodes[0]
        r = other.request({"op": "status", "task_id": "hb0"})
        k.check(r["ok"] and r["state"] == "completed" and r["attempt"] == 1, r)
        ok = True
    finally:
        finish(nodes, redis, ok)


def test_max_attempts_then_system_error():
    """A task whose node keeps losing its lease fails with SYSTEM_ERROR past max_attempts."""
    redis = Redis()
    nodes, ok = [], False
    try:
        a = Node(redis, "n0", lease=1, running=5, max_attempts=1)
        nodes.append(a)
        a.start()
        submit(a, [quick("doomed", delay_ms=60000)])
        deadline = time.time() + 10
        while a.request({"op": "stats"})["tasks"]["running"] == 0:
            k.check(time.time() < deadline, "a runs the task")
            time.sleep(0.02)
        b = Node(redis, "n1", lease=1, running=5, max_attempts=1)
        nodes.append(b)
        b.start()
        a.proc.send_signal(signal.SIGSTOP)
        try:
            seen = wait_all(b, ["doomed"], timeout_s=30)
        finally:
            a.proc.send_signal(signal.SIGCONT)
        res = seen["doomed"]["result"]
        k.check(seen["doomed"]["state"] == "failed" and res["error_code"] == "SYSTEM_ERROR" and
                "max_attempts" in res["error_message"], res)
        # a hears that the task ended elsewhere and stops it; the failure stands.
        deadline = time.time() + 15
        while a.request({"op": "stats"})["tasks"]["running"] != 0:
            k.check(time.time() < deadline, "a stopped the task")
            time.sleep(0.1)
        r = a.request({"op": "result", "task_id": "doomed"})
        k.check(r["result"]["error_code"] == "SYSTEM_ERROR", r)
        ok = True
    finally:
        finish(nodes, redis, ok)


if __name__ == "__main__":
    k.run([test_three_nodes_3000_tasks, test_kill9_node_midway, test_redis_kill9_and_restart,
           test_late_node_does_not_overwrite, test_heartbeat_keeps_claims,
           test_max_attempts_then_system_error])
