#!/usr/bin/env python3
"""On_behalf_of: a gateway peer (gateway_uids) acts for named principals.

kgymd-http passes each bearer token's identity to kgymd as "on_behalf_of";
kgymd, not the gateway, keeps one principal's tasks from another.  These
tests speak the socket protocol directly: what a principal may see, wait
for, cancel and resubmit; that such a request is never an admin one; that
a peer outside gateway_uids may not name a principal; and (as uid nobody)
that the gateway as itself sees what it submitted for its principals.
"""
import os

import time

import kgymtest as k

ME = os.getuid()
NOBODY = 65534


def task(tid, delay_ms=0, action="ok"):
    return k.selftest_task(delay_ms, action, task_id=tid)


def test_hello_says_gateway():
    with k.Daemon(kgymd_conf="gateway_uids = %d" % ME) as d:
        r = d.request({"op": "hello"})
        k.check(r["ok"] and r["gateway"] is True, r)
        r = d.request({"op": "hello", "on_behalf_of": "alice"})
        k.check(r["ok"] and r["gateway"] is True and r["admin"] is False, r)
    with k.Daemon() as d:
        r = d.request({"op": "hello"})
        k.check(r["ok"] and r["gateway"] is False, r)


def test_principals_are_separate():
    with k.Daemon(kgymd_conf="gateway_uids = %d" % ME) as d:
        c = d.client
        r = c.request({"op": "submit", "task": task("pa", 60000), "on_behalf_of": "alice"})
        k.check(r["ok"] and r["accepted"][0]["task_id"] == "pa", r)
        r = c.request({"op": "status", "task_id": "pa", "on_behalf_of": "alice"})
        k.check(r["ok"] and r["state"] in ("queued", "running"), r)
        for op in ("status", "result", "cancel"):
            r = c.request({"op": op, "task_id": "pa", "on_behalf_of": "bob"})
            k.check(not r["ok"] and r["error"]["code"] == "not_found", (op, r))
        rid = c.send({"op": "wait", "task_ids": ["pa"], "timeout_ms": 100, "on_behalf_of": "bob"})
        events, final = c.collect_wait(rid)
        k.check(events == [] and final["not_found"] == ["pa"], final)
        # bob cannot take alice's id
        r = c.request({"op": "submit", "task": task("pa"), "on_behalf_of": "bob"})
        k.check(r["ok"] and not r["accepted"] and r["rejected"][0]["error"]["code"] == "forbidden", r)
        # nor list it
        r = c.request({"op": "list", "on_behalf_of": "bob"})
        k.check(r["ok"] and r["tasks"] == [], r)
        r = c.request({"op": "list", "on_behalf_of": "alice"})
        k.check(r["ok"] and [t["task_id"] for t in r["tasks"]] == ["pa"], r)
        # alice's second submit of her id attaches
        r = c.request({"op": "submit", "task": task("pa"), "on_behalf_of": "alice"})
        k.check(r["ok"] and r["accepted"][0]["existing"] is True, r)
        # the admin peer itself (kgymd's own uid) still sees it
        r = c.request({"op": "status", "task_id": "pa"})
        k.check(r["ok"], r)
        # nor see it running on a worker (workers names a task to whom may see it)
        deadline = time.time() + 10
        while time.time() < deadline:
            r = c.request({"op": "workers"})
            if "pa" in [w["task_id"] for w in r["cpu_workers"]]:
                break
            time.sleep(0.05)
        k.check("pa" in [w["task_id"] for w in r["cpu_workers"]], "the admin sees pa running: %r" % r)
        for who, sees in (("alice", True), ("bob", False)):
            r = c.request({"op": "workers", "on_behalf_of": who})
            k.check(("pa" in [w["task_id"] for w in r["cpu_workers"]]) == sees, (who, r["cpu_workers"]))
        # alice cancels hers
        r = c.request({"op": "cancel", "task_id": "pa", "on_behalf_of": "alice"})
        k.check(r["ok"] and r["cancelled"] is True, r)
        # submit-and-wait for a principal gets its events
        rid = c.send({"op": "submit", "task": task("pb"), "wait": True, "on_behalf_of": "bob"})
        events, final = c.collect_wait(rid)
        k.check(len(events) == 1 and events[0]["task_id"] == "pb" and final["pending"] == [],
                (events, final))


def test_never_admin_and_checked():
    with k.Daemon(kgymd_conf="gateway_uids = %d" % ME) as d:
        r = d.request({"op": "drain", "on_behalf_of": "alice"})
        k.check(not r["ok"] and r["error"]["code"] == "forbidden", r)
        for bad in ("", "a b", "x" * 65, "../etc", "é"):
            r = d.request({"op": "hello", "on_behalf_of": bad})
            k.check(not r["ok"] and r["error"]["code"] == "bad_request" and
                    "on_behalf_of" in r["error"]["message"], (bad, r))
        r = d.request({"op": "hello", "on_behalf_of": 7})
        k.check(not r["ok"] and "on_behalf_of" in r["error"]["message"], r)
        r = d.request({"op": "health"})
        k.check(r["ok"] and r["status"] == "healthy", "still serving: %r" % r)
    # a peer outside gateway_uids may not name anyone
    with k.Daemon() as d:
        r = d.request({"op": "status", "task_id": "x", "on_behalf_of": "alice"})
        k.check(not r["ok"] and r["error"]["code"] == "forbidden" and
                "gateway_uids" in r["error"]["message"], r)


def test_gateway_as_itself_sees_its_principals():
    conf = "socket_mode = 0666\nallow_uids = %d\ngateway_uids = %d" % (NOBODY, NOBODY)
    with k.Daemon(kgymd_conf=conf) as d:
        r = k.request_as_nobody(d, {"op": "submit", "task": task("nb1", 60000),
                                    "on_behalf_of": "carol"})
        k.check(r["ok"] and r["accepted"], r)
        # the gateway's uid as itself (not an admin) sees carol's task ...
        r = k.request_as_nobody(d, {"op": "status", "task_id": "nb1"})
        k.check(r["ok"] and r["task_id"] == "nb1", r)
        # ... another principal of it does not
        r = k.request_as_nobody(d, {"op": "status", "task_id": "nb1", "on_behalf_of": "dave"})
        k.check(not r["ok"] and r["error"]["code"] == "not_found", r)
        # and a task of the gateway itself is not a principal's
        r = k.request_as_nobody(d, {"op": "submit", "task": task("nb2")})
        k.check(r["ok"] and r["accepted"], r)
        r = k.request_as_nobody(d, {"op": "status", "task_id": "nb2", "on_behalf_of": "carol"})
        k.check(not r["ok"] and r["error"]["code"] == "not_found", r)


if __name__ == "__main__":
    k.run([test_hello_says_gateway, test_principals_are_separate, test_never_admin_and_checked,
           test_gateway_as_itself_sees_its_principals])
