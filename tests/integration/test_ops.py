#!/usr/bin/env python3
"""Every op's happy path over the real socket, against a private kgymd."""
import json
import signal
import time

import kgymtest as k


def test_hello_health_plugins_stats_workers():
    with k.Daemon() as d:
        r = d.request({"op": "hello"})
        k.check(r["ok"] and r["daemon"] == "kgymd" and r["protocol"] == [1], r)
        k.check("selftest" in r["plugins"], r)
        r = d.request({"op": "health"})
        k.check(r["ok"] and r["status"] == "healthy", r)
        r = d.request({"op": "plugins"})
        kinds = {p["name"]: (p["kind"], p["serves"]) for p in r["plugins"]}
        k.check(kinds == {"selftest": ("workflow", ["selftest"]),
                          "selftest_backend": ("backend", ["selftest"])}, r)
        r = d.request({"op": "stats"})
        k.check(r["ok"] and "tasks" in r and "latency_ms" in r and r["connections"] >= 1, r)
        r = d.request({"op": "workers"})
        k.check(r["ok"] and isinstance(r["gpus"], list) and r["workers_per_gpu"] == 1, r)


def test_submit_status_result_list():
    with k.Daemon() as d:
        r = d.request({"op": "submit", "task": k.selftest_task(5, task_id="t-one")})
        k.check(r["ok"] and r["accepted"][0]["task_id"] == "t-one", r)
        k.check(r["accepted"][0]["state"] == "queued" and r["rejected"] == [], r)
        c = d.connect()
        rid = c.send({"op": "wait", "task_ids": ["t-one"], "timeout_ms": 5000})
        events, final = c.collect_wait(rid)
        k.check(len(events) == 1 and events[0]["state"] == "completed", events)
        k.check(final["pending"] == [] and final["not_found"] == [], final)
        r = d.request({"op": "status", "task_id": "t-one"})
        k.check(r["state"] == "completed" and r["attempt"] == 1 and r["workflow"] == "selftest", r)
        k.check(r["finished_ms"] >= r["started_ms"] >= r["created_ms"], r)
        r = d.request({"op": "result", "task_id": "t-one"})
        res = r["result"]
        k.check(res["status"] == "completed" and res["correctness"] is True, res)
        k.check(res["task_id"] == "t-one" and res["metadata"]["run_ms"] >= 4.0, res)
        r = d.request({"op": "list"})
        k.check([t["task_id"] for t in r["tasks"]] == ["t-one"], r)
        r = d.request({"op": "list", "state": "queued"})
        k.check(r["tasks"] == [], r)


def test_submit_batch_with_wait():
    with k.Daemon() as d:
        tasks = [k.selftest_task(i % 3) for i in range(50)]
        tasks.append(k.selftest_task(action="incorrect"))
        tasks.append(k.selftest_task(action="fail"))
        rid = d.client.send({"op": "submit", "tasks": tasks, "wait": True})
        first = d.client.read_for(rid)
        k.check(first["ok"] and len(first["accepted"]) == 52, first)
        events, final = d.client.collect_wait(rid)
        k.check(final["ok"] and final["done"], final)
        ids = [e["task_id"] for e in events]
        k.check(sorted(ids) == sorted(a["task_id"] for a in first["accepted"]), "each task once")
        states = {e["task_id"]: e["state"] for e in events}
        k.check(list(states.values()).count("failed") == 1, states)
        incorrect = [e for e in events if e["result"].get("correctness") is False
                     and e["state"] == "completed"]
        k.check(len(incorrect) == 1, "one incorrect task")


def test_idempotent_submit():
    with k.Daemon() as d:
        t = k.selftest_task(0, task_id="same")
        a = d.request({"op": "submit", "task": t})
        k.check(a["accepted"][0]["existing"] is False, a)
        c = d.connect()
        c.collect_wait(c.send({"op": "wait", "task_ids": ["same"]}))
        b = d.request({"op": "submit", "task": t})
        k.check(b["accepted"][0]["existing"] is True and b["accepted"][0]["state"] == "completed", b)
        # twice in one batch: accepted once, the second says existing
        r = d.request({"op": "submit", "tasks": [k.selftest_task(0, task_id="dup"),
                                                  k.selftest_task(0, task_id="dup")]})
        k.check([x["existing"] for x in r["accepted"]] == [False, True], r)
        r = d.request({"op": "list", "limit": 10})
        k.check(sum(1 for t in r["tasks"] if t["task_id"] == "dup") == 1, r)


def test_cancel_queued_and_running():
    with k.Daemon(kgymd_conf="max_running_tasks = 1") as d:
        r = d.request({"op": "submit", "tasks": [k.selftest_task(60000, task_id="long"),
                                                  k.selftest_task(0, task_id="behind")]})
        k.check(len(r["accepted"]) == 2, r)
        time.sleep(0.1)
        k.check(d.request({"op": "status", "task_id": "long"})["state"] == "running", "running")
        k.check(d.request({"op": "status", "task_id": "behind"})["state"] == "queued", "queued")
        r = d.request({"op": "cancel", "task_id": "behind"})
        k.check(r["ok"] and r["cancelled"] and r["state"] == "cancelled", r)
        r = d.request({"op": "cancel", "task_id": "long"})
        k.check(r["ok"] and r["cancelled"] and r["state"] == "cancelled", r)
        r = d.request({"op": "cancel", "task_id": "long"})
        k.check(r["ok"] and r["cancelled"] is False and r["state"] == "cancelled", r)
        r = d.request({"op": "result", "task_id": "long"})
        k.check(r["result"]["error_code"] == "CANCELLED", r)
        r = d.request({"op": "cancel", "task_id": "nope"})
        k.check(r["ok"] is False and r["error"]["code"] == "not_found", r)


def test_priority_order():
    with k.Daemon(kgymd_conf="max_running_tasks = 1") as d:
        d.request({"op": "submit", "task": k.selftest_task(300, task_id="blocker")})
        time.sleep(0.05)
        tasks = [k.selftest_task(0, task_id="low%d" % i, priority="low") for i in range(3)]
        tasks += [k.selftest_task(0, task_id="norm%d" % i) for i in range(3)]
        tasks += [k.selftest_task(0, task_id="high%d" % i, priority="high") for i in range(3)]
        d.request({"op": "submit", "tasks": tasks})
        c = d.connect()
        events, _ = c.collect_wait(c.send({"op": "wait", "task_ids": [t["task_id"] for t in tasks]}))
        order = [e["task_id"] for e in events]
        k.check(order == ["high0", "high1", "high2", "norm0", "norm1", "norm2",
                          "low0", "low1", "low2"], order)


def test_wait_timeout_and_not_found():
    with k.Daemon() as d:
        d.request({"op": "submit", "task": k.selftest_task(5000, task_id="slow")})
        t0 = time.time()
        events, final = d.client.collect_wait(d.client.send(
            {"op": "wait", "task_ids": ["slow", "ghost"], "timeout_ms": 200}))
        k.check(events == [] and final["pending"] == ["slow"] and final["not_found"] == ["ghost"], final)
        k.check(0.15 < time.time() - t0 < 2.0, "timeout honoured")


def test_wait_answers_an_id_once():
    """kgymd-protocol(7): an id listed twice is answered once -- an ended
    task (one event), an unknown id (named once in not_found), a running
    one (one event) -- and 100,000 copies of one id cost one answer."""
    with k.Daemon() as d:
        c = d.client
        c.request({"op": "submit", "task": k.selftest_task(0, task_id="ended")})
        c.collect_wait(c.send({"op": "wait", "task_ids": ["ended"]}))
        c.request({"op": "submit", "task": k.selftest_task(300, task_id="running")})
        events, final = c.collect_wait(c.send(
            {"op": "wait", "task_ids": ["ended", "running", "ended", "ghost", "running", "ghost"]}))
        k.check(sorted(e["task_id"] for e in events) == ["ended", "running"], events)
        k.check(final["not_found"] == ["ghost"] and final["pending"] == [], final)
        events, final = c.collect_wait(c.send({"op": "wait", "task_ids": ["ended"] * 100000}))
        k.check(len(events) == 1 and final["not_found"] == [], (len(events), final))
        rid = c.send({"op": "submit", "wait": True, "tasks": [k.selftest_task(0, task_id="ended")] * 2})
        events, final = c.collect_wait(rid)
        k.check([e["task_id"] for e in events] == ["ended"], events)


def test_drain_and_shutdown():
    with k.Daemon() as d:
        d.request({"op": "submit", "task": k.selftest_task(100, task_id="inflight")})
        r = d.request({"op": "drain"})
        k.check(r["ok"] and r["draining"], r)
        r = d.request({"op": "submit", "task": k.selftest_task(0)})
        k.check(r["ok"] is False and r["error"]["code"] == "draining", r)
        k.check(d.request({"op": "health"})["status"] == "draining", "health says draining")
        events, _ = d.client.collect_wait(d.client.send({"op": "wait", "task_ids": ["inflight"]}))
        k.check(events[0]["state"] == "completed", events)
        r = d.request({"op": "shutdown"})
        k.check(r["ok"] and r["stopping"], r)
        k.check(d.proc.wait(10) == 0, "exit status 0 after shutdown")


def test_sigterm_requeues_running_and_restart_finishes():
    d = k.Daemon(grace="0")
    try:
        d.start()
        d.request({"op": "submit", "task": k.selftest_task(3000, task_id="mid")})
        time.sleep(0.1)
        k.check(d.request({"op": "status", "task_id": "mid"})["state"] == "running", "running")
        d.stop()
        d.start()
        events, _ = d.client.collect_wait(d.client.send({"op": "wait", "task_ids": ["mid"],
                                                         "timeout_ms": 10000}))
        k.check(len(events) == 1 and events[0]["state"] == "completed", events)
        # Requeued, not forgotten and not started from nothing: its second run.
        st = d.request({"op": "status", "task_id": "mid"})
        k.check(st.get("attempt") == 2, "the requeued task's attempt: %r" % st)
        d.stop()
    finally:
        d.cleanup()


def test_sigterm_lets_running_work_finish():
    d = k.Daemon(grace="10")
    try:
        d.start()
        d.request({"op": "submit", "tasks": [k.selftest_task(400, task_id="short"),
                                              k.selftest_task(0, task_id="later", priority="low")]})
        time.sleep(0.1)
        t0 = time.time()
        d.stop()
        k.check(0.2 < time.time() - t0 < 5, "waited for the running task, not the grace")
        d.start()
        r = d.request({"op": "status", "task_id": "short"})
        k.check(r["state"] == "completed" and r["attempt"] == 1, "finished before exit: %r" % r)
        d.stop()
    finally:
        d.cleanup()


def test_cancel_during_shutdown_grace():
    # The last running task is cancelled while the daemon waits for it to
    # end: the daemon must answer the cancel and then stop cleanly.
    d = k.Daemon(grace="30")
    try:
        d.start()
        t = k.selftest_task(60000, task_id="last")
        t["payload"]["in_daemon"] = True
        d.request({"op": "submit", "task": t})
        time.sleep(0.1)
        c = d.connect()
        d.proc.send_signal(signal.SIGTERM)
        time.sleep(0.2)
        r = c.request({"op": "cancel", "task_id": "last"})
        k.check(r is None or r["ok"], "cancel answered or connection closed cleanly: %r" % (r,))
        k.check(d.proc.wait(10) == 0, "exit 0 after the last task was cancelled")
    finally:
        d.cleanup()


def test_half_closed_client_still_answered():
    import socket
    with k.Daemon() as d:
        c = d.connect()
        rid = c.send({"op": "submit", "task": k.selftest_task(200), "wait": True})
        c.sock.shutdown(socket.SHUT_WR)  # like `echo ... | socat`
        events, final = c.collect_wait(rid)
        k.check(len(events) == 1 and events[0]["state"] == "completed", events)
        k.check(final["done"], final)
        k.check(c.read_line() is None, "closed once everything was answered")


def test_sighup_reload():
    import signal
    with k.Daemon(kgymd_conf="max_queued_tasks = 1\nmax_running_tasks = 1") as d:
        d.request({"op": "submit", "task": k.selftest_task(2000)})
        time.sleep(0.05)
        d.request({"op": "submit", "task": k.selftest_task(0)})
        r = d.request({"op": "submit", "task": k.selftest_task(0)})
        k.check(r["rejected"] and r["rejected"][0]["error"]["code"] == "queue_full", r)
        with open(d.conf) as f:
            text = f.read().replace("max_queued_tasks = 1", "max_queued_tasks = 100")
        with open(d.conf, "w") as f:
            f.write(text)
        d.proc.send_signal(signal.SIGHUP)
        deadline = time.time() + 5
        while time.time() < deadline:
            r = d.request({"op": "submit", "task": k.selftest_task(0)})
            if r["accepted"]:
                break
            time.sleep(0.05)
        k.check(r["accepted"], "after SIGHUP the larger queue limit applies")
        k.check("configuration reloaded" in d.read_log(), "reload logged")


def test_pipelined_big_submits_keep_order():
    """A client's next long line is parsed while its big submit is stored, and a big
    reply is encoded off the loop: replies still come in the order of the requests."""
    d = k.Daemon(kgymd_conf="max_running_tasks = 1")
    try:
        d.start()

        def task(**kw):
            t = k.selftest_task(0, **kw)
            t["payload"]["pad"] = "p" * 100
            return t
        a = [task() for _ in range(300)]
        b = [task(task_id="b-%d" % i) for i in range(300)]
        lines = [json.dumps({"v": 1, "id": "a", "op": "submit", "tasks": a, "wait": True}),
                 json.dumps({"v": 1, "id": "b", "op": "submit", "tasks": b}),
                 '{"v": 1, "id": "bad", "op": "submit", "tasks": [' + "1," * 10000,
                 json.dumps({"v": 1, "id": "st", "op": "status", "task_id": "b-299"}),
                 json.dumps({"v": 1, "id": "h", "op": "hello"})]
        k.check(all(len(x) > 16384 for x in lines[:3]), "long lines take the parser thread")
        d.client.send_raw(("\n".join(lines) + "\n").encode())
        replies, early, final = [], [], None
        while len(replies) < 5:
            msg = d.client.read_line()
            k.check(msg is not None, "connection closed")
            if msg.get("event") == "result":
                early.append(msg)
            elif msg.get("done"):
                final = msg
            else:
                replies.append(msg)
        k.check([r.get("id") for r in replies] == ["a", "b", None, "st", "h"], replies)
        k.check(replies[0]["ok"] and len(replies[0]["accepted"]) == 300, replies[0]["rejected"])
        k.check(replies[1]["ok"] and [x["task_id"] for x in replies[1]["accepted"]] ==
                ["b-%d" % i for i in range(300)], "b accepted in order")
        k.check(replies[2]["error"]["code"] == "bad_json", replies[2])
        k.check(replies[3]["ok"] and replies[3]["task_id"] == "b-299", replies[3])
        # The wait of "a" still hears of its 300 tasks.
        events = []
        if final is None:
            events, final = d.client.collect_wait("a")
        k.check(len(early) + len(events) == 300 and final.get("done"),
                (len(early), len(events), final))
    finally:
        d.cleanup()


def test_uncached_payloads_run_as_sent():
    """Payloads past the scheduler's 4 MiB cache are read and parsed with the running
    mark (off the loop): each task still runs with its own payload."""
    d = k.Daemon(kgymd_conf="max_running_tasks = 1")
    try:
        d.start()
        d.request({"op": "submit", "task": dict(k.selftest_task(60000, task_id="block"),
                                                payload={"action": "ok", "delay_ms": 60000,
                                                         "in_daemon": True})})
        actions = ["ok", "fail", "incorrect"]
        ids = []
        for b in range(3):
            tasks = []
            for j in range(4):
                i = 4 * b + j
                ids.append("u%d" % i)
                tasks.append({"task_id": "u%d" % i, "workflow": "selftest",
                              "payload": {"action": actions[i % 3], "delay_ms": i,
                                          "in_daemon": True, "pad": "x" * 400000}})
            r = d.request({"op": "submit", "tasks": tasks})
            k.check(r["ok"] and len(r["accepted"]) == 4, r)
        d.request({"op": "cancel", "task_id": "block"})
        events, final = d.client.collect_wait(d.client.send({"op": "wait", "task_ids": ids,
                                                             "timeout_ms": 30000}))
        k.check(len(events) == 12, (len(events), final))
        for e in events:
            i = int(e["task_id"][1:])
            res, meta = e["result"], e["result"].get("metadata", {})
            if actions[i % 3] == "fail":
                k.check(res.get("error_code") == "RUNTIME_ERROR", (e["task_id"], res))
            else:
                k.check(meta.get("action") == actions[i % 3] and meta.get("delay_ms") == i,
                        (e["task_id"], res))
    finally:
        d.cleanup()


if __name__ == "__main__":
    k.run([test_hello_health_plugins_stats_workers, test_submit_status_result_list,
           test_submit_batch_with_wait, test_idempotent_submit, test_cancel_queued_and_running,
           test_priority_order, test_wait_timeout_and_not_found, test_wait_answers_an_id_once,
           test_drain_and_shutdown,
           test_sigterm_requeues_running_and_restart_finishes,
           test_sigterm_lets_running_work_finish, test_cancel_during_shutdown_grace,
           test_half_closed_client_still_answered,
           test_sighup_reload, test_pipelined_big_submits_keep_order,
           test_uncached_payloads_run_as_sent])
