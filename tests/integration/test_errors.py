#!/usr/bin/env python3
"""Bad input gets a specific error, names the field, and loses nothing."""
import json
import socket

import kgymtest as k


def err(r, code, *words):
    k.check(r is not None and r.get("ok") is False, "expected an error reply, got %r" % (r,))
    k.check(r["error"]["code"] == code, "expected %s, got %r" % (code, r))
    for w in words:
        k.check(w in r["error"]["message"], "message %r lacks %r" % (r["error"]["message"], w))


def test_bad_json_keeps_connection():
    with k.Daemon() as d:
        c = d.client
        c.send_raw(b'{"v":1,"op":"hello",\n')
        err(c.read_line(), "bad_json")
        c.send_raw(b"not json at all\n")
        err(c.read_line(), "bad_json")
        c.send_raw(b'[1,2,3]\n')
        err(c.read_line(), "bad_request", "object")
        c.send_raw(b'{"v":1,"id":7,"op":"hello","op":"health"}\n')
        err(c.read_line(), "bad_json")
        r = c.request({"op": "hello"})
        k.check(r["ok"], "the same connection keeps working after bad lines")


def test_protocol_field_errors():
    with k.Daemon() as d:
        c = d.client
        c.send_raw(b'{"id":1,"op":"hello"}\n')
        err(c.read_line(), "bad_request", "'v'")
        c.send_raw(b'{"v":"1","id":2,"op":"hello"}\n')
        err(c.read_line(), "bad_request", "'v'", "integer")
        r = c.request({"v": 2, "op": "hello"})
        err(r, "unsupported_version")
        k.check(r["error"]["supported"] == [1], r)
        err(c.request({"op": "frobnicate"}), "unknown_op", "frobnicate")
        c.send_raw(b'{"v":1,"id":5}\n')
        err(c.read_line(), "bad_request", "'op'")
        err(c.request({"op": 5}), "bad_request", "'op'", "string")
        err(c.request({"op": "status"}), "bad_request", "task_id", "missing")
        err(c.request({"op": "status", "task_id": 12}), "bad_request", "task_id", "string")
        err(c.request({"op": "status", "task_id": "nope"}), "not_found", "nope")
        err(c.request({"op": "result", "task_id": "nope"}), "not_found")
        err(c.request({"op": "wait"}), "bad_request", "task_ids")
        err(c.request({"op": "wait", "task_ids": "x"}), "bad_request", "task_ids", "array")
        err(c.request({"op": "wait", "task_ids": [1]}), "bad_request", "task_ids")
        err(c.request({"op": "wait", "task_ids": [], "timeout_ms": -1}), "bad_request", "timeout_ms")
        err(c.request({"op": "list", "state": "sleeping"}), "bad_request", "state")
        err(c.request({"op": "list", "limit": 0}), "bad_request", "limit")
        err(c.request({"op": "list", "limit": "5"}), "bad_request", "limit", "integer")
        # the id is echoed whatever its scalar type
        r = c.request({"op": "hello", "id": "abc"})
        k.check(r["id"] == "abc", r)
        c.send_raw(b'{"v":1,"id":{"x":1},"op":"hello"}\n')
        err(c.read_line(), "bad_request", "'id'")


def test_submit_errors():
    with k.Daemon() as d:
        c = d.client
        err(c.request({"op": "submit"}), "bad_request", "task")
        err(c.request({"op": "submit", "task": {}, "tasks": []}), "bad_request", "exactly one")
        err(c.request({"op": "submit", "task": []}), "bad_request", "task")
        err(c.request({"op": "submit", "tasks": {}}), "bad_request", "tasks", "array")
        err(c.request({"op": "submit", "task": k.selftest_task(), "wait": "yes"}), "bad_request", "wait")
        cases = [
            ({"payload": {}}, "workflow"),
            ({"workflow": 3, "payload": {}}, "workflow"),
            ({"workflow": "nosuchflow", "payload": {}}, "nosuchflow"),
            ({"workflow": "selftest"}, "payload"),
            ({"workflow": "selftest", "payload": []}, "payload"),
            ({"workflow": "selftest", "payload": {"action": "ok"}, "priority": "urgent"}, "priority"),
            ({"workflow": "selftest", "payload": {"action": "ok"}, "timeout_s": -1}, "timeout_s"),
            ({"workflow": "selftest", "payload": {"action": "ok"}, "timeout_s": "5"}, "timeout_s"),
            ({"workflow": "selftest", "payload": {"action": "ok"}, "task_id": "has space"}, "task_id"),
            ({"workflow": "selftest", "payload": {"action": "ok"}, "task_id": "x" * 129}, "task_id"),
            ({"workflow": "selftest", "payload": {"action": "explode"}}, "action"),
            ({"workflow": "selftest", "payload": {"action": "ok", "delay_ms": "1"}}, "delay_ms"),
        ]
        tasks = [t for t, _ in cases] + [k.selftest_task(0, task_id="good")]
        r = c.request({"op": "submit", "tasks": tasks})
        k.check(r["ok"], r)
        k.check([a["index"] for a in r["accepted"]] == [len(cases)], r)
        k.check(len(r["rejected"]) == len(cases), r)
        for rej, (_, word) in zip(r["rejected"], cases):
            k.check(rej["error"]["code"] == "bad_request", rej)
            k.check(word in rej["error"]["message"], "rejection %r should name %r" % (rej, word))
        # nothing of the rejected tasks exists; the good one does
        lst = c.request({"op": "list"})
        k.check([t["task_id"] for t in lst["tasks"]] == ["good"], lst)


def test_task_timeout():
    with k.Daemon() as d:
        r = d.request({"op": "submit", "task": k.selftest_task(5000, task_id="late", timeout_s=0.2)})
        k.check(r["accepted"], r)
        events, _ = d.client.collect_wait(d.client.send(
            {"op": "wait", "task_ids": ["late"], "timeout_ms": 5000}))
        k.check(events[0]["state"] == "failed", events)
        res = events[0]["result"]
        k.check(res["error_code"] == "TIMEOUT_ERROR" and "timeout" in res["error_message"], res)


if __name__ == "__main__":
    k.run([test_bad_json_keeps_connection, test_protocol_field_errors, test_submit_errors,
           test_task_timeout])
