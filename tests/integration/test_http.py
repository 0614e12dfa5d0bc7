#!/usr/bin/env python3
"""kgymd-http end to end: every endpoint of KernelGYM's API, its status codes,
bearer tokens, and a sweep of malformed requests.

A private kgymd (selftest plugin, tasks run in the daemon) and kgymd-http on
127.0.0.1, port 0.  Requests are made with urllib as KernelGYM's clients
make them: JSON bodies, a synchronous POST /evaluate, a client that polls
GET /status/{id} every second until the task ends (as drkernel's reward
client does) and then reads /results/{id}, /evaluate/batch, /workflow/*.
Checks the shapes (EvaluationResponse, TaskStatusResponse with
error_message, BatchEvaluationResponse, WorkflowResponse, ErrorResponse with
X-Error-Code) and every status code: 200, 400 naming the field, 401, 404,
405, 409, 413, 429 with Retry-After (kgymd's queue_full, and max_inflight),
503 (kgymd draining); that the same task_id attaches to the same task; that
DELETE cancels; that a client hanging up does not cancel its task; that no
CORS header is ever sent; that a gateway on another address refuses to start
without tokens; and that after 30+ kinds of malformed request the gateway
still serves.  The KernelBench-format request (torch on the CPU) needs the
kernelbench and python plugins and torch, else that test reports SKIP.
"""
import json
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time

import httptest as h
import kgymtest as k

ME = os.getuid()
GW_CONF = "gateway_uids = %d\n" % ME


class Env:
    """kgymd + kgymd-http; `with Env(...) as (d, gw)`."""

    def __init__(self, kgymd_conf="", http=None, **kw):
        self.d = k.Daemon(kgymd_conf=GW_CONF + kgymd_conf, extra_conf=http or h.http_conf(), **kw)
        self.gw = None

    def __enter__(self):
        self.d.start()
        try:
            self.gw = h.Gateway(self.d).start()
        except BaseException:
            self.d.cleanup()
            raise
        return self.d, self.gw

    def __exit__(self, et, ev, tb):
        try:
            if et is None:
                self.gw.stop()
                self.d.stop()
        finally:
            if et is not None:
                import sys
                sys.stderr.write("--- kgymd-http log ---\n" + self.gw.read_log()[-8000:])
                sys.stderr.write("--- kgymd log ---\n" + self.d.read_log()[-8000:])
            self.gw.cleanup()
            self.d.cleanup()


def no_cors(r):
    k.check(all(not name.lower().startswith("access-control-") for name in r.headers.keys()),
            "no CORS header: %r" % r)


def is_error(r, code, ecode=None, field=None):
    k.check(r.code == code, "expected %d: %r" % (code, r))
    j = r.json
    k.check(isinstance(j, dict) and {"error", "message", "error_code", "timestamp"} <= set(j),
            "ErrorResponse: %r" % r)
    k.check(r.headers.get("X-Error-Code") == j["error_code"], "X-Error-Code: %r" % r)
    if ecode:
        k.check(j["error_code"] == ecode, "error_code %s: %r" % (ecode, r))
    if field:
        k.check(r.headers.get("X-Error-Field") == field and field in j["message"],
                "names the field %s: %r" % (field, r))
    no_cors(r)


def test_evaluate_and_attach():
    with Env() as (d, gw):
        r = h.request(gw, "GET", "/health")
        k.check(r.code == 200 and r.json["status"] == "healthy", r)
        body = h.selftest_eval("ev-1", delay_ms=50)
        r = h.request(gw, "POST", "/evaluate", body)
        k.check(r.code == 200, r)
        res = r.json
        for key in ("task_id", "status", "compiled", "correctness", "kernel_runtime",
                    "reference_runtime", "speedup", "metadata", "completed_at", "submitted_at"):
            k.check(key in res, "EvaluationResponse has %s: %r" % (key, res))
        k.check(res["task_id"] == "ev-1" and res["status"] == "completed" and
                res["correctness"] is True and res["completed_at"].endswith("Z"), res)
        no_cors(r)
        # the same task_id again attaches: the same run, not a new one
        before = d.request({"op": "stats"})["submitted_total"]
        r2 = h.request(gw, "POST", "/evaluate", body)
        k.check(r2.code == 200 and r2.json["metadata"] == res["metadata"], (res, r2))
        k.check(d.request({"op": "stats"})["submitted_total"] == before, "not submitted again")
        # a failing task: 200 with status failed and the error, also on /status
        r = h.request(gw, "POST", "/evaluate", h.selftest_eval("ev-fail", action="fail"))
        k.check(r.code == 200 and r.json["status"] == "failed" and r.json["error_message"], r)
        s = h.request(gw, "GET", "/status/ev-fail")
        k.check(s.code == 200 and s.json["status"] == "failed" and
                s.json["error_message"] == r.json["error_message"] and s.json["error_code"], s)
        # /results of an ended task
        r = h.request(gw, "GET", "/results/ev-1")
        k.check(r.code == 200 and r.json["task_id"] == "ev-1" and r.json["correctness"] is True, r)
        # a client that hangs up does not cancel its task
        s = socket.create_connection(("127.0.0.1", gw.port))
        data = json.dumps(h.selftest_eval("ev-gone", delay_ms=400)).encode()
        s.sendall(b"POST /evaluate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: %d\r\n\r\n" % len(data) + data)
        time.sleep(0.1)
        s.close()
        h.wait_for(lambda: h.request(gw, "GET", "/status/ev-gone").json.get("status") == "completed",
                   10, "the abandoned task completed, not cancelled")


def test_poll_status_like_drkernel():
    """Submit, poll /status every second until it ends, then /results."""
    with Env() as (d, gw):
        r = h.request(gw, "POST", "/workflow/submit",
                      {"workflow": "selftest", "task_id": "poll-1",
                       "payload": {"action": "ok", "delay_ms": 2200, "in_daemon": True}})
        k.check(r.code == 200 and r.json["task_id"] == "poll-1" and
                r.json["status"] in ("pending", "processing"), r)
        # not ended yet: status only, no result fields
        r = h.request(gw, "GET", "/results/poll-1")
        k.check(r.code == 200 and r.json["status"] in ("pending", "processing") and
                "correctness" not in r.json, r)
        r = h.request(gw, "GET", "/workflow/results/poll-1")
        k.check(r.code == 200 and r.json["result"] is None, r)
        seen = []
        polls = []

        def poller():
            while True:
                s = h.request(gw, "GET", "/status/poll-1")
                polls.append(time.time())
                seen.append(s.json["status"])
                if s.code != 200 or s.json["status"] in ("completed", "failed", "cancelled"):
                    return
                time.sleep(1.0)

        t = threading.Thread(target=poller)
        t.start()
        t.join(30)
        k.check(seen and seen[-1] == "completed" and "processing" in seen, seen)
        k.check(len(polls) >= 2, "polled more than once: %r" % seen)
        r = h.request(gw, "GET", "/results/poll-1")
        k.check(r.code == 200 and r.json["status"] == "completed" and r.json["completed_at"], r)
        r = h.request(gw, "GET", "/workflow/results/poll-1")
        k.check(r.code == 200 and r.json["status"] == "completed" and
                r.json["result"]["correctness"] is True and r.json["completed_at"], r)


def test_batch_cancel_info():
    with Env() as (d, gw):
        tasks = [h.selftest_eval("b-%d" % i, delay_ms=600) for i in range(4)]
        t0 = time.time()
        r = h.request(gw, "POST", "/evaluate/batch", {"batch_id": "batch-1", "tasks": tasks})
        took = time.time() - t0
        k.check(r.code == 200 and r.json["batch_id"] == "batch-1" and r.json["total_tasks"] == 4 and
                r.json["completed_tasks"] == 4 and r.json["failed_tasks"] == 0, r)
        k.check([x["task_id"] for x in r.json["results"]] == ["b-0", "b-1", "b-2", "b-3"], r)
        k.check(took < 2.0, "the batch ran concurrently (%.2f s for 4 x 0.6 s)" % took)
        # DELETE cancels a running task
        r = h.request(gw, "POST", "/workflow/submit",
                      {"workflow": "selftest", "task_id": "long-1",
                       "payload": {"action": "ok", "delay_ms": 60000, "in_daemon": True}})
        k.check(r.code == 200, r)
        r = h.request(gw, "DELETE", "/tasks/long-1")
        k.check(r.code == 200 and r.json["cancelled"] is True and r.json["status"] == "cancelled", r)
        r = h.request(gw, "GET", "/status/long-1")
        k.check(r.code == 200 and r.json["status"] == "cancelled", r)
        r = h.request(gw, "DELETE", "/tasks/long-1")
        k.check(r.code == 200 and r.json["cancelled"] is False, r)
        # the figures are kgymd's
        st = d.request({"op": "stats"})
        r = h.request(gw, "GET", "/queue/status")
        k.check(r.code == 200 and r.json["completed"] == st["tasks"]["completed"] and
                r.json["cancelled"] == 1 and "pending" in r.json, r)
        r = h.request(gw, "GET", "/workers/status")
        k.check(r.code == 200 and "cpu_workers" in r.json and "gpus" in r.json, r)
        r = h.request(gw, "GET", "/")
        k.check(r.code == 200 and r.json["service"] == "kgymd-http" and r.json["kgymd_connected"], r)
        r = h.request(gw, "GET", "/metrics")
        text = r.raw.decode()
        k.check(r.code == 200 and r.headers.get("Content-Type").startswith("text/plain"), r)
        for needle in ('kgymd_tasks{state="completed"} %d' % st["tasks"]["completed"],
                       'kgymd_tasks{state="cancelled"} 1', "kgymd_queue_depth 0",
                       'kgymd_http_evaluate_seconds_bucket{le="+Inf"} 4', "kgymd_http_evaluate_seconds_count 4",
                       'kgymd_http_request_duration_seconds_bucket{route="/evaluate/batch",le="+Inf"} 1',
                       'kgymd_workers{gpu="cpu",state=', "kgymd_http_up 1",
                       'kgymd_latency_seconds{kind="run",quantile="0.99"}'):
            k.check(needle in text, "metrics has %r:\n%s" % (needle, text[:3000]))
        # every sample line parses as name{labels} value
        for line in text.splitlines():
            if line and not line.startswith("#"):
                float(line.rsplit(" ", 1)[1])


def test_status_codes():
    conf = "max_queued_tasks = 2\nmax_running_tasks = 1\nadmin_uids = %d\n" % ME
    with Env(kgymd_conf=conf, http=h.http_conf(max_body="8K")) as (d, gw):
        for path in ("/status/nope", "/results/nope", "/workflow/results/nope"):
            is_error(h.request(gw, "GET", path), 404, "TASK_NOT_FOUND")
        is_error(h.request(gw, "DELETE", "/tasks/nope"), 404, "TASK_NOT_FOUND")
        is_error(h.request(gw, "GET", "/nowhere"), 404, "NOT_FOUND")
        r = h.request(gw, "GET", "/evaluate")
        is_error(r, 405, "METHOD_NOT_ALLOWED")
        k.check(r.headers.get("Allow") == "POST", r)
        is_error(h.request(gw, "POST", "/evaluate", {"task_id": "x", "kernel_code": 3}), 400,
                 "VALIDATION_ERROR", "kernel_code")
        # kgymd's own check of the payload names the field too
        is_error(h.request(gw, "POST", "/evaluate", h.selftest_eval("v1", delay_ms="soon")), 400,
                 "VALIDATION_ERROR")
        # past kgymd's max_timeout (3600 s by default): kgymd's check, the request's name
        is_error(h.request(gw, "POST", "/evaluate", h.selftest_eval("v2", timeout=7200)), 400,
                 "VALIDATION_ERROR", "timeout")
        r = h.request(gw, "POST", "/evaluate", h.selftest_eval("big", pad="x" * 9000))
        k.check(r.code == 413, r)
        # kgymd's queue is full: 429 with Retry-After
        for i in range(3):
            r = h.request(gw, "POST", "/workflow/submit",
                          {"workflow": "selftest", "task_id": "fill-%d" % i,
                           "payload": {"action": "ok", "delay_ms": 60000, "in_daemon": True}})
            k.check(r.code == 200, r)
        r = h.request(gw, "POST", "/evaluate", h.selftest_eval("one-too-many"))
        is_error(r, 429, "QUEUE_FULL")
        k.check(r.headers.get("Retry-After") == "1", r)
        r = h.request(gw, "POST", "/evaluate/batch", {"batch_id": "b", "tasks": [h.selftest_eval("q1")]})
        is_error(r, 429, "QUEUE_FULL")
        for i in range(3):
            h.request(gw, "DELETE", "/tasks/fill-%d" % i)
        # kgymd draining: 503, and /health says why
        k.check(d.request({"op": "drain"})["ok"], "drained")
        r = h.request(gw, "POST", "/evaluate", h.selftest_eval("late"))
        is_error(r, 503, "SERVICE_DRAINING")
        k.check(r.headers.get("Retry-After"), r)
        r = h.request(gw, "GET", "/health")
        k.check(r.code == 503 and r.json["status"] == "draining" and r.json["reason"], r)
        r = h.request(gw, "GET", "/status/fill-0")
        k.check(r.code == 200 and r.json["status"] == "cancelled", "still reads: %r" % r)


def test_max_inflight():
    with Env(http=h.http_conf(max_inflight=2)) as (d, gw):
        out = []
        ts = [threading.Thread(target=lambda i=i: out.append(
            h.request(gw, "POST", "/evaluate", h.selftest_eval("held-%d" % i, delay_ms=1500))))
            for i in range(2)]
        for t in ts:
            t.start()
        h.wait_for(lambda: d.request({"op": "stats"})["running"] == 2, 10, "two held")
        r = h.request(gw, "GET", "/status/held-0")
        is_error(r, 429, "TOO_MANY_REQUESTS")
        k.check(r.headers.get("Retry-After") == "1", r)
        for t in ts:
            t.join(20)
        k.check(len(out) == 2 and all(x.code == 200 for x in out), out)
        k.check(h.request(gw, "GET", "/status/held-0").code == 200, "served again")


def rss_mb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0


def test_pipelining_client_that_never_reads():
    """A keep-alive client that pipelines requests and never reads its
    replies: the gateway holds at most max_reply_backlog (16M) for it, not
    everything it sends, and serves other clients meanwhile."""
    with Env() as (d, gw):
        pid = gw.proc.pid
        rss0 = rss_mb(pid)
        s = socket.create_connection(("127.0.0.1", gw.port))
        s.setblocking(False)
        data = b"GET /nope HTTP/1.1\r\nHost: x\r\n\r\n" * 2000
        sent, peak, t0 = 0, rss0, time.time()
        try:
            while time.time() - t0 < 2 and peak - rss0 < 200:
                try:
                    sent += s.send(data)
                except BlockingIOError:
                    time.sleep(0.005)
                peak = max(peak, rss_mb(pid))
            r = h.request(gw, "GET", "/health", timeout=5)
            k.check(r.code == 200, "others served meanwhile: %r" % r)
            peak = max(peak, rss_mb(pid))
        finally:
            s.close()
        k.check(peak - rss0 < 48, "memory bounded: RSS %.0f -> %.0f MB after %.0f MB of pipelined "
                "requests" % (rss0, peak, sent / 1e6))
        k.check(h.request(gw, "GET", "/health").code == 200, "still serving")


def start_victims(gw, d, n, delay_ms):
    """n synchronous /evaluate held in the gateway, running in kgymd."""
    out = {}

    def one(i):
        out[i] = h.request(gw, "POST", "/evaluate",
                           h.selftest_eval("victim-%d" % i, delay_ms=delay_ms), timeout=30)
    ts = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in ts:
        t.start()
    h.wait_for(lambda: all(d.request({"op": "status", "task_id": "victim-%d" % i})["ok"]
                           for i in range(n)), 10, "the victims' tasks in kgymd")
    return ts, out


def test_line_over_kgymd_max_request_bytes():
    """A body within max_body_bytes that would make a line longer than kgymd's
    max_request_bytes (read from [kgymd] of the same file): that client alone
    gets 413 naming the limit; the shared connection to kgymd is kept, and
    every other client's request with it."""
    with Env(kgymd_conf="max_request_bytes = 64K\n", http=h.http_conf(max_body="1M")) as (d, gw):
        ts, out = start_victims(gw, d, 3, 1500)
        base = len(json.dumps(h.selftest_eval("big", pad="")))
        just_under = h.selftest_eval("big", pad="a" * (64 * 1024 - base - 16))
        k.check(len(json.dumps(just_under)) <= 64 * 1024, "the body itself fits")
        for path, body in (("/evaluate", just_under),
                           ("/evaluate", h.selftest_eval("bigger", pad="a" * 200000)),
                           ("/evaluate/batch", {"batch_id": "b", "tasks": [
                               h.selftest_eval("b%d" % i, pad="a" * 30000) for i in range(3)]}),
                           ("/workflow/submit", {"workflow": "selftest",
                                                 "payload": {"pad": "a" * 70000}})):
            r = h.request(gw, "POST", path, body)
            is_error(r, 413, "PAYLOAD_TOO_LARGE")
            k.check("max_request_bytes" in r.json["message"] and "65536" in r.json["message"],
                    "names the limit: %r" % r)
        # Tasks that fit alone but not together, sent at once: each one runs.
        many = {}
        ms = [threading.Thread(target=lambda i=i: many.__setitem__(i, h.request(
            gw, "POST", "/evaluate", h.selftest_eval("m%d" % i, pad="a" * 30000))))
            for i in range(4)]
        for t in ms:
            t.start()
        for t in ts + ms:
            t.join(30)
        k.check(len(out) == 3 and all(r.code == 200 and r.json["status"] == "completed"
                                      for r in out.values()), "others unaffected: %r" % out)
        k.check(len(many) == 4 and all(r.code == 200 for r in many.values()), many)
        k.check("connection lost" not in gw.read_log(), "kept the connection to kgymd")


def test_kgymd_closing_says_why():
    """kgymd closes the gateway's connection after an error line (busy: the
    unfinished requests of all its clients pass max_input_bytes): the 503
    of each request in flight relays kgymd's code and message."""
    with Env(kgymd_conf="max_input_bytes = 20K\n", http=h.http_conf(max_body="1M")) as (d, gw):
        ts, out = start_victims(gw, d, 2, 3000)
        hog = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            hog.connect(d.socket)
            hog.sendall(b"{" + b" " * 10000)  # an unfinished line, held
            time.sleep(0.2)
            r = h.request(gw, "POST", "/evaluate", h.selftest_eval("big", pad="a" * 200000))
            k.check(r.code == 503, r)
            for t in ts:
                t.join(30)
        finally:
            hog.close()
        k.check(len(out) == 2, out)
        for r in list(out.values()) + [r]:
            is_error(r, 503)
            k.check("busy" in r.json["message"] and "max_input_bytes" in r.json["message"],
                    "says why: %r" % r)
        h.wait_for(lambda: h.request(gw, "GET", "/health").code == 200, 10, "served again")


def cpu_s(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_out_of_descriptors():
    """Past its open-file limit the gateway neither spins in accept() nor
    logs every attempt: it rests its listener, serves the connections it
    has, and accepts again once descriptors are free."""
    import http.client
    import resource
    with Env() as (d, gw):
        pid = gw.proc.pid
        kept = http.client.HTTPConnection("127.0.0.1", gw.port, timeout=5)
        kept.request("GET", "/health")
        k.check(kept.getresponse().read() and True, "kept connection")
        soft, hard = resource.prlimit(pid, resource.RLIMIT_NOFILE)
        resource.prlimit(pid, resource.RLIMIT_NOFILE, (64, hard))
        socks = []
        try:
            for _ in range(120):
                try:
                    socks.append(socket.create_connection(("127.0.0.1", gw.port), timeout=1))
                except OSError:
                    break
            time.sleep(0.3)
            log0, cpu0 = os.path.getsize(gw.log_path), cpu_s(pid)
            time.sleep(1.5)
            cpu, grew = cpu_s(pid) - cpu0, os.path.getsize(gw.log_path) - log0
            kept.request("GET", "/health")
            r = kept.getresponse()
            k.check(r.status == 200, "serves the connections it has: %d" % r.status)
            r.read()
        finally:
            for s in socks:
                s.close()
            kept.close()
        k.check(cpu < 0.3 and grew < 1000, "no spin: %.2f s of CPU, log +%d bytes in 1.5 s" % (cpu, grew))
        k.check("cannot accept connections" in gw.read_log(), "said so")
        resource.prlimit(pid, resource.RLIMIT_NOFILE, (soft, hard))
        h.wait_for(lambda: h.request(gw, "GET", "/health", timeout=5).code == 200, 10, "accepts again")


def write_tokens(dirname, text, mode=0o600):
    path = os.path.join(dirname, "tokens")
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, mode)
    return path


ALICE, BOB, ROOT = "alice-secret-0123456789", "bob-secret-0123456789xx", "admin-secret-0123456789"


def test_error_messages_name_field_and_task():
    """A 409 of a batch or /workflow/submit names the task_id (and its index),
    a batch item that is no object is "tasks[1]", a plugin's complaint about
    a /workflow/submit payload names "payload.FIELD", and two disagreeing
    Content-Length headers are refused."""
    tdir = tempfile.mkdtemp(prefix="kgym-tokens-")
    try:
        path = write_tokens(tdir, "alice %s\nbob %s\n" % (ALICE, BOB))
        with Env(http=h.http_conf(token_file=path)) as (d, gw):
            k.check(h.request(gw, "POST", "/evaluate", h.selftest_eval("hers"), token=ALICE).code
                    == 200, "alice's task")
            r = h.request(gw, "POST", "/evaluate/batch", {"batch_id": "b", "tasks": [
                h.selftest_eval("b0"), h.selftest_eval("hers")]}, token=BOB)
            is_error(r, 409, "TASK_ID_CONFLICT", "tasks[1].task_id")
            k.check("'hers'" in r.json["message"] and r.json["task_id"] == "hers", r)
            r = h.request(gw, "POST", "/workflow/submit", {"workflow": "selftest", "task_id": "hers",
                                                          "payload": {"action": "ok"}}, token=BOB)
            is_error(r, 409, "TASK_ID_CONFLICT", "task_id")
            k.check("'hers'" in r.json["message"] and r.json["task_id"] == "hers", r)
            r = h.request(gw, "POST", "/evaluate/batch", {"batch_id": "b", "tasks": [
                h.selftest_eval("c0"), 5]}, token=BOB)
            is_error(r, 400, "VALIDATION_ERROR", "tasks[1]")
            k.check("tasks[1]." not in r.json["message"], r)
            r = h.request(gw, "POST", "/workflow/submit", {"workflow": "selftest", "payload": {
                "action": "ok", "delay_ms": -1}}, token=BOB)
            is_error(r, 400, "VALIDATION_ERROR", "payload.delay_ms")
            body = json.dumps(h.selftest_eval("cl")).encode()
            code, raw = h.raw_request(gw, b"POST /evaluate HTTP/1.1\r\nHost: x\r\n"
                                      b"Authorization: Bearer " + BOB.encode() + b"\r\n"
                                      b"Content-Length: %d\r\nContent-Length: 3\r\n\r\n" % len(body)
                                      + body)
            k.check(code == 400 and b"Content-Length" in raw, "two Content-Length: %r" % raw[:300])
    finally:
        shutil.rmtree(tdir, ignore_errors=True)


def test_tokens():
    tdir = tempfile.mkdtemp(prefix="kgym-tokens-")
    try:
        path = write_tokens(tdir, "# who\nalice %s\nbob %s\n\nops %s admin\n" % (ALICE, BOB, ROOT))
        with Env(http=h.http_conf(token_file=path)) as (d, gw):
            is_error(h.request(gw, "GET", "/status/x"), 401, "UNAUTHORIZED")
            k.check(h.request(gw, "GET", "/status/x").headers.get("WWW-Authenticate") == "Bearer",
                    "asks for a bearer token")
            is_error(h.request(gw, "GET", "/status/x", token=ALICE[:-1] + "y"), 401)
            is_error(h.request(gw, "GET", "/status/x", headers={"Authorization": "Basic eDp5"}), 401)
            k.check(h.request(gw, "GET", "/health").code == 200, "/health needs no token")
            r = h.request(gw, "POST", "/evaluate", h.selftest_eval("mine"), token=ALICE)
            k.check(r.code == 200 and r.json["status"] == "completed", r)
            k.check(h.request(gw, "GET", "/status/mine", token=ALICE).code == 200, "alice sees hers")
            for method, path_ in (("GET", "/status/mine"), ("GET", "/results/mine"),
                                  ("DELETE", "/tasks/mine")):
                is_error(h.request(gw, method, path_, token=BOB), 404, "TASK_NOT_FOUND")
            r = h.request(gw, "POST", "/evaluate", h.selftest_eval("mine"), token=BOB)
            is_error(r, 409, "TASK_ID_CONFLICT", "task_id")
            k.check(h.request(gw, "GET", "/results/mine", token=ROOT).code == 200, "admin sees all")
            # kgymd, not the gateway, holds the owner: alice's principal
            row = d.request({"op": "status", "task_id": "mine", "on_behalf_of": "alice"})
            k.check(row["ok"], row)
            row = d.request({"op": "status", "task_id": "mine", "on_behalf_of": "bob"})
            k.check(not row["ok"], row)
            r = h.request(gw, "OPTIONS", "/evaluate", headers={"Origin": "http://evil.example"})
            k.check(r.code == 405, r)
            no_cors(r)
        # a token file others can read is refused
        bad = write_tokens(tdir, "alice %s\n" % ALICE, 0o644)
        d = k.Daemon(kgymd_conf=GW_CONF, extra_conf=h.http_conf(token_file=bad))
        try:
            p = subprocess.run([h.gateway_path(), "-n", "-f", d.conf], capture_output=True, text=True)
            k.check(p.returncode == 1 and "chmod 600" in p.stderr, p)
        finally:
            d.cleanup()
    finally:
        shutil.rmtree(tdir, ignore_errors=True)


def test_config_checks():
    cases = [
        (h.http_conf(listen="0.0.0.0:0"), "token_file"),
        (h.http_conf(listen="[::]:0"), "token_file"),
        ("[http]\nlisten = localhost:80\n", "numeric"),
        ("[http]\nlisten = 127.0.0.1:99999\n", "port"),
        ("[http]\nmax_body_bytes = 12\n", "max_body_bytes"),
        ("[http]\nmax_inflight = 0\n", "max_inflight"),
        ("[http]\nlisten = 127.0.0.1:1\nlisten = 127.0.0.1:2\n", "duplicate"),
        ("[http]\ncors = *\n", "unknown key"),
        ("[http]\ntoken_file = relative\n", "absolute"),
    ]
    for conf, needle in cases:
        d = k.Daemon(kgymd_conf=GW_CONF, extra_conf=conf)
        try:
            p = subprocess.run([h.gateway_path(), "-n", "-f", d.conf], capture_output=True, text=True)
            k.check(p.returncode == 1 and needle in p.stderr, (conf, p))
            # the same file is fine for kgymd: [http] is the gateway's
            p = subprocess.run([k.kgymd_path(), "-n", "-f", d.conf], capture_output=True, text=True)
            k.check(p.returncode == 0, (conf, p))
        finally:
            d.cleanup()
    d = k.Daemon(kgymd_conf=GW_CONF, extra_conf=h.http_conf(listen="0.0.0.0:0"))
    try:
        p = subprocess.run([h.gateway_path(), "-F", "-f", d.conf], capture_output=True, text=True,
                           timeout=10)
        k.check(p.returncode == 1 and "token_file" in p.stderr, "refuses to start: %r" % p)
    finally:
        d.cleanup()


def sweep_cases():
    """(description, method, path, body bytes, expected codes, field or None)."""
    ok = h.selftest_eval("sw")
    ev = lambda **kw: json.dumps(dict(ok, **kw)).encode()  # noqa: E731
    drop = lambda key: json.dumps({k_: v for k_, v in ok.items() if k_ != key}).encode()  # noqa: E731
    kb = {"task_id": "kb", "reference_code": "import torch  # ref", "kernel_code": "import torch  # k"}
    kbj = lambda **kw: json.dumps(dict(kb, **kw)).encode()  # noqa: E731
    return [
        ("not JSON", "POST", "/evaluate", b"{task_id: 1", {400}, "body"),
        ("empty body", "POST", "/evaluate", b"", {400}, "body"),
        ("JSON array", "POST", "/evaluate", b"[1, 2]", {400}, "body"),
        ("JSON string", "POST", "/evaluate", b'"evaluate"', {400}, "body"),
        ("JSON null", "POST", "/evaluate", b"null", {400}, "body"),
        ("duplicate key", "POST", "/evaluate", b'{"task_id":"a","task_id":"b"}', {400}, "body"),
        ("NaN literal", "POST", "/evaluate", b'{"task_id":"a","timeout":NaN}', {400}, "body"),
        ("invalid UTF-8", "POST", "/evaluate", b'{"task_id":"\xff\xfe"}', {400}, "body"),
        ("trailing garbage", "POST", "/evaluate", ev() + b"}}", {400}, "body"),
        ("deep nesting", "POST", "/evaluate", b"[" * 5000 + b"]" * 5000, {400}, "body"),
        ("no task_id", "POST", "/evaluate", drop("task_id"), {400}, "task_id"),
        ("task_id integer", "POST", "/evaluate", ev(task_id=7), {400}, "task_id"),
        ("task_id empty", "POST", "/evaluate", ev(task_id=""), {400}, "task_id"),
        ("task_id spaces", "POST", "/evaluate", ev(task_id="a b"), {400}, "task_id"),
        ("task_id too long", "POST", "/evaluate", ev(task_id="x" * 129), {400}, "task_id"),
        ("task_id path", "POST", "/evaluate", ev(task_id="../../etc/passwd"), {400}, "task_id"),
        ("priority unknown", "POST", "/evaluate", ev(priority="urgent"), {400}, "priority"),
        ("priority integer", "POST", "/evaluate", ev(priority=1), {400}, "priority"),
        ("timeout string", "POST", "/evaluate", ev(timeout="300"), {400}, "timeout"),
        ("timeout negative", "POST", "/evaluate", ev(timeout=-1), {400}, "timeout"),
        ("timeout huge", "POST", "/evaluate", ev(timeout=1e12), {400}, "timeout"),
        ("workflow integer", "POST", "/evaluate", ev(workflow=3), {400}, "workflow"),
        ("workflow unknown", "POST", "/evaluate", ev(workflow="nope"), {400}, "workflow"),
        ("resources string", "POST", "/evaluate", ev(resources="gpus=2"), {400}, "resources"),
        ("payload field wrong type", "POST", "/evaluate", ev(delay_ms="soon"), {400}, None),
        ("kernelbench no kernel_code", "POST", "/evaluate", json.dumps(
            {"task_id": "kb", "reference_code": "import torch  # ref"}).encode(), {400}, "kernel_code"),
        ("kernelbench no reference_code", "POST", "/evaluate", json.dumps(
            {"task_id": "kb", "kernel_code": "import torch  # k"}).encode(), {400}, "reference_code"),
        ("kernel_code list", "POST", "/evaluate", kbj(kernel_code=["x"]), {400}, "kernel_code"),
        ("backend unknown", "POST", "/evaluate", kbj(backend="fortran"), {400}, "backend"),
        ("backend integer", "POST", "/evaluate", kbj(backend=2), {400}, "backend"),
        ("batch no batch_id", "POST", "/evaluate/batch", json.dumps({"tasks": [ok]}).encode(),
         {400}, "batch_id"),
        ("batch tasks object", "POST", "/evaluate/batch", json.dumps(
            {"batch_id": "b", "tasks": ok}).encode(), {400}, "tasks"),
        ("batch empty", "POST", "/evaluate/batch", json.dumps({"batch_id": "b", "tasks": []}).encode(),
         {400}, "tasks"),
        ("batch of 101", "POST", "/evaluate/batch", json.dumps(
            {"batch_id": "b", "tasks": [ok] * 101}).encode(), {400}, "tasks"),
        ("batch element string", "POST", "/evaluate/batch", json.dumps(
            {"batch_id": "b", "tasks": [ok, "x"]}).encode(), {400}, "tasks[1]"),
        ("batch element bad field", "POST", "/evaluate/batch", json.dumps(
            {"batch_id": "b", "tasks": [ok, dict(ok, task_id=5)]}).encode(), {400}, "tasks[1].task_id"),
        ("workflow payload string", "POST", "/workflow/submit", json.dumps(
            {"workflow": "selftest", "payload": "x"}).encode(), {400}, "payload"),
        ("workflow force_refresh string", "POST", "/workflow/submit", json.dumps(
            {"workflow": "selftest", "payload": {}, "force_refresh": "yes"}).encode(), {400},
         "force_refresh"),
        ("workflow payload rejected", "POST", "/workflow/submit", json.dumps(
            {"workflow": "selftest", "payload": {"action": "explode"}}).encode(), {400}, None),
        ("status id bad chars", "GET", "/status/%2e%2e%2fetc", None, {404}, None),
        ("status id NUL", "GET", "/status/a%00b", None, {404}, None),
        ("status id too long", "GET", "/status/" + "x" * 200, None, {404}, None),
        ("status nested path", "GET", "/status/a/b", None, {404}, None),
        ("unknown path", "GET", "/admin", None, {404}, None),
        ("PUT evaluate", "PUT", "/evaluate", ev(), {405}, None),
        ("DELETE status", "DELETE", "/status/x", None, {405}, None),
        ("body over the limit", "POST", "/evaluate", ev(pad="x" * 70000), {413}, None),
    ]


RAW_CASES = [
    ("garbage request line", b"GARBAGE\r\n\r\n", {400}),
    ("HTTP/9.9", b"GET /health HTTP/9.9\r\nHost: x\r\n\r\n", {400, 505}),
    ("bad Content-Length", b"POST /evaluate HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n{}", {400}),
    ("huge header", b"GET /health HTTP/1.1\r\nHost: x\r\nX-A: " + b"a" * 70000 + b"\r\n\r\n", {400, 413, 431, 0}),
    ("bad chunk", b"POST /evaluate HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", {400, 413, 0}),
    ("oversized Content-Length", b"POST /evaluate HTTP/1.1\r\nHost: x\r\nContent-Length: 999999999\r\n\r\n{",
     {413, 400, 0}),
]


def test_malformed_sweep():
    with Env() as (d, gw):
        n = 0
        for what, method, path, body, codes, field in sweep_cases():
            r = h.request(gw, method, path, raw=body, headers={"Content-Type": "application/json"})
            k.check(r.code in codes, "%s: expected %s, got %r" % (what, codes, r))
            k.check(r.code < 500, "%s: never 5xx: %r" % (what, r))
            if r.code == 400:
                is_error(r, 400, "VALIDATION_ERROR")
                if field:
                    k.check(field in r.headers.get("X-Error-Field", "") and field in r.json["message"],
                            "%s: names %s: %r" % (what, field, r))
                # nothing of the host in the text
                k.check("/tmp" not in r.raw.decode(errors="replace") and
                        d.dir not in r.raw.decode(errors="replace"), "%s: no host path: %r" % (what, r))
            n += 1
        for what, data, codes in RAW_CASES:
            code, raw = h.raw_request(gw, data)
            k.check(code in codes, "%s: expected %s, got %d %r" % (what, codes, code, raw[:200]))
            n += 1
        k.check(n >= 30, "at least 30 kinds (%d)" % n)
        # still serving
        r = h.request(gw, "GET", "/health")
        k.check(r.code == 200 and r.json["status"] == "healthy", r)
        r = h.request(gw, "POST", "/evaluate", h.selftest_eval("after-sweep"))
        k.check(r.code == 200 and r.json["status"] == "completed", r)
        k.check(gw.proc.poll() is None and d.proc.poll() is None, "both still running")


def test_kernelgym_request():
    """A KernelGYM EvaluationRequest as drkernel sends it (torch, on the CPU)."""
    import test_python as tp
    if not os.path.exists(tp.plugin_path("python")) or not tp.have_torch():
        raise k.Skip("needs the python plugin and torch (%s)" % tp.PY)
    pd = tp.PyDaemon(kgymd_conf=GW_CONF, plugins=("selftest",))
    pd_extra = h.http_conf()
    with open(pd.conf, "a") as f:
        f.write(pd_extra)
    pd.start()
    gw = h.Gateway(pd)
    try:
        gw.start()
        ref = tp.read(os.path.join(tp.EXAMPLES, "relu", "reference.py"))
        ker = tp.read(os.path.join(tp.EXAMPLES, "relu", "torch_correct.py"))
        body = {"task_id": "kg-relu", "reference_code": ref, "kernel_code": ker, "backend": "torch",
                "num_correct_trials": 5, "num_perf_trials": 10, "num_warmup": 1, "timeout": 300,
                "priority": "normal", "entry_point": "Model", "is_valid": False,
                "verbose_errors": None, "enable_profiling": None, "device": "cpu"}
        r = h.request(gw, "POST", "/evaluate", body, timeout=600)
        k.check(r.code == 200 and r.json["status"] == "completed" and r.json["correctness"] is True and
                r.json["compiled"] is True and r.json["speedup"] is not None, r)
        bad = dict(body, task_id="kg-bad", num_correct_trials="five")
        is_error(h.request(gw, "POST", "/evaluate", bad), 400, "VALIDATION_ERROR", "num_correct_trials")
        gw.stop()
        pd.stop()
    except BaseException:
        import sys
        sys.stderr.write(gw.read_log()[-4000:] + pd.read_log()[-8000:])
        raise
    finally:
        gw.cleanup()
        pd.cleanup()


if __name__ == "__main__":
    k.run([test_evaluate_and_attach, test_poll_status_like_drkernel, test_batch_cancel_info,
           test_status_codes, test_max_inflight, test_pipelining_client_that_never_reads,
           test_line_over_kgymd_max_request_bytes, test_kgymd_closing_says_why,
           test_out_of_descriptors, test_error_messages_name_field_and_task, test_tokens, test_config_checks,
           test_malformed_sweep, test_kernelgym_request])
