"""kgym.Client over HTTP: kgymd-http (KernelGYM's API) in front of a private kgymd.

The same calls as test_client.py, through the gateway: health and figures,
submit (POST /workflow/submit), status, result, wait (polling), cancel
(DELETE /tasks/{id}), NotFound for 404, BadRequest for 400, QueueFull for
429 with Retry-After, evaluate_many with 200 tasks and its progress line on
a terminal; and, with the python backend, evaluate() through the
synchronous POST /evaluate, where the same task id again attaches to the
same task.

Skips when kgymd-http is not built (build/kgymd-http/kgymd-http).
"""
if __name__ == "__main__":      # run by make check: pytest on this file
    import os
    import sys
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import kgympytest
    sys.exit(kgympytest.main(__file__))

import time

import pytest

import kgym
import kgymtest
from conftest import Gateway, need_gateway, need_kgymd
from test_client import many_tasks, run_child, st


@pytest.fixture(scope="module")
def gateway():
    need_gateway()
    need_kgymd()
    d = kgymtest.Daemon(workers_conf="cpu_workers = 2")
    d.start()
    g = None
    try:
        g = Gateway(d)
        yield g
    finally:
        try:
            if g is not None:
                g.stop()
        finally:
            try:
                d.stop()
            finally:
                d.cleanup()


@pytest.fixture(scope="module")
def client(gateway):
    c = kgym.Client(gateway.url)
    assert c.kind == "http"
    yield c
    c.close()


def test_health_and_figures(client):
    assert client.health()["status"] == "healthy"
    assert isinstance(client.stats(), dict) and isinstance(client.workers(), dict)


def test_submit_status_result_wait(client):
    tid = client.submit_task(st("ok", delay_ms=1500))
    assert client.status(tid).state in ("queued", "running")
    with pytest.raises(kgym.NotReady):
        client.result(tid)
    r = client.wait(tid, timeout=30)
    assert r.ok and r.task_id == tid and r.state == "completed"
    assert client.status(tid).state == "completed" and client.result(tid).ok
    fail = client.evaluate_task(st("fail"))
    assert (fail.state, fail.error_code) == ("failed", "RUNTIME_ERROR")
    assert "asked to fail" in client.status(fail.task_id).error_message


def test_cancel(client):
    tid = client.submit_task(st("ok", delay_ms=60000, in_daemon=False))
    time.sleep(0.5)
    client.cancel(tid)
    r = client.wait(tid, timeout=20)
    assert r.state == "cancelled" and r.error_code == "CANCELLED"
    assert client.status(tid).state == "cancelled"


def test_errors(client):
    for call in (client.status, client.result):
        with pytest.raises(kgym.NotFound):
            call("no-such-task")
    with pytest.raises(kgym.BadRequest) as e:
        client.submit_task({"workflow": "selftest", "payload": {"action": 7}})
    assert "action" in (e.value.field or "") or "action" in str(e.value)
    assert client.health()["status"] == "healthy"


def test_evaluate_many_200(client, capsys):
    tasks = many_tasks(200)
    out = list(client.evaluate_many(tasks, concurrency=32))
    assert sorted(r.index for r in out) == list(range(200))
    for r in out:
        action = tasks[r.index]["payload"]["action"]
        assert r.ok == (action == "ok") and (r.state == "failed") == (action == "fail")
    assert capsys.readouterr().err == ""


def test_progress_line_on_a_terminal(gateway):
    rc, out, tty = run_child(gateway.url, stderr_tty=True)
    assert rc == 0 and "results=200" in out
    assert "kgym: 200/200 done, 20 failed" in tty, tty[-500:]


def test_queue_full_is_429_with_retry_after():
    need_gateway()
    need_kgymd()
    with kgymtest.Daemon(kgymd_conf="max_queued_tasks = 3\nmax_running_tasks = 1") as d:
        g = Gateway(d)
        try:
            with kgym.Client(g.url) as c:
                with pytest.raises(kgym.QueueFull) as e:
                    for _ in range(10):
                        c.submit_task(st("ok", delay_ms=300))
                assert e.value.retry_after > 0
                assert c.evaluate_task(st("ok")).ok       # waits for room
        finally:
            g.stop()


def test_evaluate_kernelbench_over_http(request):
    need_gateway()
    d = request.getfixturevalue("kernelbench_daemon")
    from test_kernelbench import FIELDS, RELU_OK, RELU_REF, RELU_WRONG
    g = Gateway(d)
    try:
        with kgym.Client(g.url) as c:
            r = c.evaluate(RELU_REF, RELU_OK, backend="torch", task_id="http-relu-1", **FIELDS)
            assert r.ok and r.kernel_timing is not None and r.speedup > 0, kgym.feedback(r)
            again = c.evaluate(RELU_REF, RELU_WRONG, backend="torch", task_id="http-relu-1", **FIELDS)
            assert again.ok and again.kernel_runtime == r.kernel_runtime     # attached, not re-run
            w = c.evaluate(RELU_REF, RELU_WRONG, backend="torch", **FIELDS)
            assert w.error_code == "CORRECTNESS_ERROR" and not w.correctness
            with pytest.raises(kgym.BadRequest):
                c.evaluate(RELU_REF, RELU_OK, backend="torch", device="cpu", num_correct_trials="five")
    finally:
        g.stop()
