#!/usr/bin/env python3
"""kgymd-http under load and across crashes.

- none lost: bench/http_load sends 3,000 synchronous /evaluate (selftest,
  run in kgymd itself), 500 at a time, through the gateway; every one must
  come back 200 with its own task completed.
- kill -9 of kgymd-http mid-load: a gateway restarted on the same kgymd
  finds every task kgymd accepted by its id (/results: completed), and a
  client that retries its cut-off /evaluate with the same task_id attaches
  to the task instead of running it again.
- kill -9 of kgymd: the gateway answers 503 (with Retry-After) while kgymd
  is away and serves again, old tasks included, once it is back.
"""
import json
import os
import subprocess
import time

import httptest as h
import kgymtest as k

ME = os.getuid()
CONF = "gateway_uids = %d\nmax_running_tasks = 1024\nmax_queued_tasks = 100000\n" % ME


def load_tool():
    return os.path.join(k.builddir(), "bench/http_load")


def all_task_ids(d):
    """Every task kgymd holds, through the socket (list, paged)."""
    ids, before = [], None
    while True:
        req = {"op": "list", "limit": 1000}
        if before:
            req["before"] = before
        r = d.request(req)
        k.check(r["ok"], r)
        ids += [t["task_id"] for t in r["tasks"]]
        before = r["next"]
        if before is None:
            return ids


def start_env(http_extra=""):
    d = k.Daemon(kgymd_conf=CONF, extra_conf=h.http_conf() + http_extra)
    d.start()
    return d, h.Gateway(d).start()


def finish_env(d, gw, ok):
    if not ok:
        import sys
        sys.stderr.write("--- kgymd-http log ---\n" + gw.read_log()[-6000:])
        sys.stderr.write("--- kgymd log ---\n" + d.read_log()[-6000:])
    gw.cleanup()
    d.cleanup()


def test_load_none_lost():
    d, gw = start_env()
    ok = False
    try:
        p = subprocess.run([load_tool(), "-m", "http", "-a", "127.0.0.1:%d" % gw.port, "-n", "3000",
                            "-c", "500", "-p", "ld"], capture_output=True, text=True, timeout=300)
        res = json.loads(p.stdout)
        k.check(p.returncode == 0 and res["ok"] == 3000 and res["lost"] == 0 and res["errors"] == 0,
                "none lost: %r %s" % (res, p.stderr))
        ids = set(all_task_ids(d))
        k.check({"ld-%d" % i for i in range(3000)} <= ids, "kgymd has all 3,000")
        with open("/proc/%d/status" % gw.proc.pid) as f:
            rss = [int(x.split()[1]) for x in f if x.startswith("VmHWM:")][0]
        print("gateway: %.0f req/s, p99 %.1f ms, peak RSS %d KiB (500 at once)"
              % (res["rps"], res["p99_ms"], rss))
        k.check(rss < 200 * 1024, "gateway peak RSS %d KiB" % rss)
        gw.stop()
        d.stop()
        ok = True
    finally:
        finish_env(d, gw, ok)


def test_gateway_kill9_mid_load():
    d, gw = start_env()
    ok = False
    try:
        # tasks of 1.5 s, 400 at a time: the kill comes while all are held
        load = subprocess.Popen([load_tool(), "-m", "http", "-a", "127.0.0.1:%d" % gw.port,
                                 "-n", "2000", "-c", "400", "-p", "k9", "-d", "1500"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        h.wait_for(lambda: d.request({"op": "stats"})["submitted_total"] >= 300, 60,
                   "the load is under way")
        gw.kill9()
        out, _ = load.communicate(timeout=120)
        res = json.loads(out)
        k.check(res["ok"] < 2000, "the kill cut the load short: %r" % res)
        gw.start()                      # a new gateway, same kgymd
        ids = all_task_ids(d)
        k.check(len(ids) >= 300, "kgymd accepted tasks before the kill (%d)" % len(ids))
        # every accepted task reachable by its id through the new gateway
        for tid in ids:
            r = h.wait_for(lambda: (lambda r: r if r.code == 200 and r.json["status"] == "completed"
                                    else None)(h.request(gw, "GET", "/results/" + tid)),
                           30, "task %s completed and reachable" % tid)
            k.check(r.json["task_id"] == tid, r)
        # a cut-off /evaluate retried with its task_id attaches, never re-runs
        before = d.request({"op": "stats"})["submitted_total"]
        for tid in ids[:50]:
            r = h.request(gw, "POST", "/evaluate", {"task_id": tid, "workflow": "selftest",
                                                    "action": "ok", "delay_ms": 1500,
                                                    "in_daemon": True})
            k.check(r.code == 200 and r.json["task_id"] == tid and r.json["status"] == "completed", r)
        k.check(d.request({"op": "stats"})["submitted_total"] == before, "nothing ran again")
        gw.stop()
        d.stop()
        ok = True
    finally:
        finish_env(d, gw, ok)


def test_kgymd_kill9():
    d, gw = start_env()
    ok = False
    try:
        r = h.request(gw, "POST", "/evaluate", h.selftest_eval("before-crash"))
        k.check(r.code == 200 and r.json["status"] == "completed", r)
        d.kill9()
        # while kgymd is away: 503 with Retry-After, never a hang or a 500
        h.wait_for(lambda: h.request(gw, "GET", "/health").code == 503, 10, "/health says 503")
        for method, path, body in (("POST", "/evaluate", h.selftest_eval("during")),
                                   ("GET", "/status/before-crash", None),
                                   ("GET", "/results/before-crash", None),
                                   ("POST", "/workflow/submit", {"workflow": "selftest", "payload": {}}),
                                   ("GET", "/queue/status", None), ("DELETE", "/tasks/x", None)):
            r = h.request(gw, method, path, body, timeout=10)
            k.check(r.code == 503 and r.headers.get("Retry-After") and
                    r.json["error_code"] == "SERVICE_UNAVAILABLE", "%s %s: %r" % (method, path, r))
        r = h.request(gw, "GET", "/health")
        k.check(r.json["status"] == "unhealthy" and "kgymd" in r.json["reason"], r)
        k.check(h.request(gw, "GET", "/metrics").code == 200, "metrics still answer")
        time.sleep(3)                   # the backoff reaches its longest
        d.start()
        h.wait_for(lambda: h.request(gw, "GET", "/health").code == 200, 10, "served again")
        r = h.request(gw, "GET", "/results/before-crash")
        k.check(r.code == 200 and r.json["status"] == "completed", r)
        r = h.request(gw, "POST", "/evaluate", h.selftest_eval("after-crash"))
        k.check(r.code == 200 and r.json["status"] == "completed", r)
        gw.stop()
        d.stop()
        ok = True
    finally:
        finish_env(d, gw, ok)


if __name__ == "__main__":
    k.run([test_load_none_lost, test_gateway_kill9_mid_load, test_kgymd_kill9])
