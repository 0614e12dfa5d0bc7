"""kgym.Client and kgym.AsyncClient against a private kgymd over its socket.

The selftest workflow (no GPU, no torch): evaluate, submit/status/result/
wait, cancel, the exceptions of each protocol error (BadRequest naming the
field, NotFound, NotReady, QueueFull with retry_after, TooLarge), retries
across a daemon restart without running a task twice, evaluate_many with
200 tasks (results as they end, each once, a progress line on a terminal
and none elsewhere, proved through a pty), and the asyncio client.
"""
if __name__ == "__main__":      # run by make check: pytest on this file
    import os
    import sys
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import kgympytest
    sys.exit(kgympytest.main(__file__))

import asyncio
import os
import pty
import subprocess
import sys
import threading
import time

import pytest

import kgym
import kgymtest
from conftest import SRCDIR, need_kgymd


def st(action="ok", delay_ms=0, in_daemon=True, **kw):
    """A selftest task (in the daemon: no worker, for the control plane)."""
    p = {"action": action, "delay_ms": delay_ms}
    if in_daemon:
        p["in_daemon"] = True
    t = {"workflow": "selftest", "payload": p}
    t.update(kw)
    return t


@pytest.fixture(scope="module")
def client(selftest_daemon):
    c = kgym.Client(selftest_daemon.socket)
    yield c
    c.close()


def test_evaluate_verdicts(client):
    ok = client.evaluate_task(st("ok", in_daemon=False))         # through a sandboxed worker job
    assert isinstance(ok, kgym.Result)
    assert (ok.state, ok.status, ok.compiled, ok.correctness, ok.speedup) == ("completed", "completed", True, True,
                                                                              1.0)
    assert ok.ok and ok.error_code is None and ok.metadata["worker"].startswith("cpu")
    bad = client.evaluate_task(st("incorrect"))
    assert (bad.state, bad.status, bad.correctness, bad.ok) == ("completed", "completed", False, False)
    fail = client.evaluate_task(st("fail"))
    assert (fail.state, fail.status, fail.error_code) == ("failed", "failed", "RUNTIME_ERROR")
    assert fail.error_message == "selftest: the task asked to fail"
    # evaluate()'s keyword form builds the same kind of task.
    r = client.evaluate(None, None, backend=None, workflow="selftest", action="ok", in_daemon=True,
                        task_id="kw-form-1", priority="high", timeout_s=30)
    assert r.task_id == "kw-form-1" and r.ok


def test_submit_status_result_wait(client):
    tid = client.submit_task(st("ok", delay_ms=1500))
    assert tid.startswith("kgym-")          # the client names every task it sends
    s = client.status(tid)
    assert s.task_id == tid and s.state in ("queued", "running") and not s.done
    with pytest.raises(kgym.NotReady):
        client.result(tid)
    r = client.wait(tid, timeout=30)
    assert r.task_id == tid and r.ok
    assert client.status(tid).state == "completed" and client.status(tid).done
    assert client.result(tid).ok
    # wait with a timeout shorter than the task
    slow = client.submit_task(st("ok", delay_ms=3000))
    t0 = time.monotonic()
    with pytest.raises(kgym.WaitTimeout):
        client.wait(slow, timeout=0.3)
    assert time.monotonic() - t0 < 2.5
    ids = [client.submit_task(st("ok", delay_ms=50 * i)) for i in range(5)]
    got = client.wait_many(ids + [slow], timeout=30)
    assert set(got) == set(ids + [slow]) and all(r.ok for r in got.values())


def test_submit_same_task_id_is_one_task(client):
    before = client.stats()["submitted_total"]
    a = client.submit_task(st("ok", task_id="same-id-1"))
    b = client.submit_task(st("fail", task_id="same-id-1"))      # another payload: still the first task
    assert a == b == "same-id-1"
    assert client.wait("same-id-1").ok
    assert client.evaluate_task(st("fail", task_id="same-id-1")).ok
    assert client.stats()["submitted_total"] == before + 1


def test_cancel(client):
    tid = client.submit_task(st("ok", delay_ms=60000, in_daemon=False))
    deadline = time.time() + 20
    while client.status(tid).state != "running" and time.time() < deadline:
        time.sleep(0.05)
    reply = client.cancel(tid)
    assert reply == {"task_id": tid, "state": "cancelled", "cancelled": True}
    r = client.wait(tid, timeout=10)
    assert (r.state, r.status, r.error_code) == ("cancelled", "failed", "CANCELLED")
    assert client.cancel(tid)["cancelled"] is False     # already ended: nothing to cancel
    queued = client.submit_task(st("ok", delay_ms=10))
    client.cancel(queued)
    assert client.wait(queued).state in ("cancelled", "completed")


def test_errors(client):
    with pytest.raises(kgym.BadRequest) as e:
        client.submit_task({"workflow": "selftest", "payload": {"action": 7}})
    assert e.value.field == "payload.action" and e.value.code == "bad_request"
    assert "expected a string" in str(e.value)
    with pytest.raises(kgym.BadRequest) as e:
        client.submit_task({"workflow": "no_such_workflow", "payload": {}})
    assert e.value.field == "workflow"
    with pytest.raises(kgym.BadRequest) as e:
        client.submit_task(st(priority="urgent"))
    assert e.value.field == "priority"
    for call in (client.status, client.result, client.cancel, client.wait):
        with pytest.raises(kgym.NotFound) as e:
            call("no-such-task")
        assert e.value.code == "not_found" and "no-such-task" in str(e.value)
    with pytest.raises(kgym.NotFound):
        client.wait_many(["no-such-task"], timeout=1)
    # evaluate_many turns a rejected task into a result, not an exception ...
    out = list(client.evaluate_many([st("ok"), {"workflow": "selftest", "payload": {"action": 7}}], progress=False))
    by = {r.index: r for r in out}
    assert by[0].ok and by[1].state == "error" and by[1].error_code == "CLIENT_ERROR"
    assert "payload" in by[1].error_message
    # ... unless asked to raise.
    with pytest.raises(kgym.BadRequest):
        list(client.evaluate_many([{"workflow": "selftest", "payload": {"action": 7}}], raise_errors=True))
    # The connection is still usable after all of this.
    assert client.health()["status"] == "healthy"


def test_evaluate_many_bad_inputs(client):
    def tasks():
        yield st("ok")
        raise RuntimeError("the task source ran dry")
    with pytest.raises(RuntimeError, match="ran dry"):
        list(client.evaluate_many(tasks(), concurrency=2, progress=False))
    out = sorted(client.evaluate_many([42, st("ok")], progress=False), key=lambda r: r.index)
    assert out[0].state == "error" and "dict" in out[0].error_message and out[1].ok
    with pytest.raises(ValueError, match="concurrency"):
        list(client.evaluate_many([st("ok")], concurrency=0))


def test_too_large_is_refused_before_sending(selftest_daemon):
    with kgym.Client(selftest_daemon.socket, max_request_bytes=1000) as c:
        with pytest.raises(kgym.TooLarge, match="max_request_bytes"):
            c.submit_task(st(padding="x" * 2000))
        assert c.evaluate_task(st("ok")).ok


def test_queue_full_and_retry_after():
    need_kgymd()
    with kgymtest.Daemon(kgymd_conf="max_queued_tasks = 3\nmax_running_tasks = 1") as d:
        with kgym.Client(d.socket) as c:
            ids = []
            with pytest.raises(kgym.QueueFull) as e:
                for _ in range(10):
                    ids.append(c.submit_task(st("ok", delay_ms=1000)))
            assert e.value.code == "queue_full" and e.value.retry_after > 0
            assert 3 <= len(ids) <= 4
            # evaluate waits for room instead of failing.
            t0 = time.monotonic()
            r = c.evaluate_task(st("ok"))
            assert r.ok and time.monotonic() - t0 > 0.5     # it waited retry_after, then got in
            # and so does evaluate_many, for more tasks than the queue holds.
            out = list(c.evaluate_many([st("ok", delay_ms=5) for _ in range(12)], concurrency=12, progress=False))
            assert len(out) == 12 and all(r.ok for r in out)


def test_retries_across_a_restart():
    """kgymd stops and starts again while a wait and an evaluate are in
    flight: the client reconnects and gets each task's one result."""
    need_kgymd()
    d = kgymtest.Daemon(workers_conf="cpu_workers = 1")
    d.start()
    try:
        with kgym.Client(d.socket, max_retries=8) as c:
            tid = c.submit_task(st("ok", delay_ms=1500, task_id="survivor"))
            box = {}

            def waiter():
                try:
                    box["result"] = c.wait(tid, timeout=60)
                except BaseException as e:  # noqa: BLE001 - checked below
                    box["error"] = e
            th = threading.Thread(target=waiter)
            th.start()
            time.sleep(0.3)
            d.stop()            # the running task is requeued (shutdown_grace 0)
            time.sleep(0.5)
            d.start()
            th.join(60)
            assert "error" not in box, box.get("error")
            assert box["result"].ok and box["result"].task_id == "survivor"
            # A task submitted again under its id after the restart is the same task.
            assert c.submit_task(st("fail", task_id="survivor")) == "survivor"
            assert c.result("survivor").ok
            assert c.stats()["tasks"]["completed"] == 1
    finally:
        try:
            d.stop()
        finally:
            d.cleanup()


def test_client_refuses_use_across_fork(client):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            client.health()
            os.write(w, b"no error")
        except RuntimeError as e:
            os.write(w, str(e).encode())
        finally:
            os._exit(0)
    os.close(w)
    msg = os.read(r, 1000).decode()
    os.close(r)
    os.waitpid(pid, 0)
    assert "across fork()" in msg
    assert client.health()["status"] == "healthy"      # the parent's client still works


def test_unreachable_socket_fails_after_retries(tmp_path):
    with kgym.Client(str(tmp_path / "nothing.sock"), max_retries=2, retry_backoff=0.01) as c:
        with pytest.raises(kgym.ConnectionLost) as e:
            c.health()
        assert str(tmp_path) not in str(e.value)


def test_connect_waits_for_room_in_the_backlog(tmp_path):
    """A Unix socket's connect fails at once (EAGAIN) while the listen
    backlog is full: the client must wait for room, not give up, even with
    no retries.  A stand-in daemon fills its backlog, accepts 0.5 s later,
    and answers the one connection that sends a request."""
    import json
    import select
    import socket
    path = str(tmp_path / "slow.sock")
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(1)
    fillers = []
    for _ in range(4):
        f = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        f.setblocking(False)
        try:
            f.connect(path)
            fillers.append(f)
        except BlockingIOError:
            f.close()
            break
    else:
        pytest.skip("this kernel never fills a Unix socket's backlog")

    def serve():
        time.sleep(0.5)
        conns = [srv.accept()[0] for _ in range(len(fillers) + 1)]
        ready, _, _ = select.select(conns, [], [], 10)
        for c in ready:
            for line in c.makefile("rb"):
                req = json.loads(line)
                reply = {"v": 1, "id": req["id"], "ok": True}
                reply.update({"protocol": [1]} if req["op"] == "hello" else {"status": "ok"})
                c.sendall(json.dumps(reply).encode() + b"\n")
                if req["op"] != "hello":
                    break
        for c in conns:
            c.close()

    t = threading.Thread(target=serve)
    t.start()
    try:
        with kgym.Client(path, max_retries=0) as c:
            t0 = time.monotonic()
            assert c.health()["status"] == "ok"
            assert time.monotonic() - t0 >= 0.4
    finally:
        t.join(20)
        for f in fillers:
            f.close()
        srv.close()


def many_tasks(n):
    """ok, incorrect and fail, with delays so that they end out of order."""
    actions = ["ok", "ok", "incorrect", "fail"]
    return [st(actions[i % 4], delay_ms=(i * 37) % 150) for i in range(n)]


def test_evaluate_many_200(client, capsys):
    tasks = many_tasks(200)
    t0 = time.monotonic()
    out = list(client.evaluate_many(tasks, concurrency=64))
    elapsed = time.monotonic() - t0
    assert len(out) == 200
    assert sorted(r.index for r in out) == list(range(200))
    assert len({r.task_id for r in out}) == 200
    for r in out:
        action = tasks[r.index]["payload"]["action"]
        assert r.ok == (action == "ok") and (r.state == "failed") == (action == "fail")
    order = [r.index for r in out]
    assert order != sorted(order)            # yielded as they ended, not in input order
    assert elapsed < 200 * 0.075 / 2         # many in flight: far less than one after another (15 s)
    # pytest's stderr is no terminal: no progress line at all.
    assert capsys.readouterr().err == ""


CHILD = r"""
import sys, kgym
tasks = [{"workflow": "selftest", "payload": {"action": "ok" if i % 10 else "fail", "delay_ms": i % 40,
          "in_daemon": True}} for i in range(200)]
with kgym.Client(sys.argv[1]) as c:
    n = sum(1 for r in c.evaluate_many(tasks, concurrency=20))
print("results=%d" % n)
"""


def run_child(sock, stderr_tty):
    env = dict(os.environ, PYTHONPATH=os.path.join(SRCDIR, "python"))
    if not stderr_tty:
        p = subprocess.run([sys.executable, "-c", CHILD, sock], capture_output=True, text=True, env=env, timeout=120)
        return p.returncode, p.stdout, p.stderr
    master, slave = pty.openpty()
    p = subprocess.Popen([sys.executable, "-c", CHILD, sock], stdout=subprocess.PIPE, stderr=slave, env=env)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:          # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    out = p.stdout.read().decode()
    return p.wait(60), out, b"".join(chunks).decode(errors="replace")


def test_progress_line_only_on_a_terminal(selftest_daemon):
    rc, out, tty = run_child(selftest_daemon.socket, stderr_tty=True)
    assert rc == 0 and "results=200" in out
    assert "\r" in tty and "kgym: 200/200 done, 20 failed" in tty, tty[-500:]
    assert "tasks/s" in tty and tty.rstrip(" ").endswith(("\n", "\r\n"))
    rc, out, err = run_child(selftest_daemon.socket, stderr_tty=False)
    assert rc == 0 and "results=200" in out
    assert err == ""                     # a pipe: nothing, not even a final line


def test_async_client(selftest_daemon):
    async def main():
        async with kgym.AsyncClient(selftest_daemon.socket) as c:
            h = await c.hello()
            assert h["daemon"] == "kgymd" and 1 in h["protocol"]
            t0 = time.monotonic()
            rs = await asyncio.gather(*(c.evaluate_task(st("ok", delay_ms=200)) for _ in range(10)))
            assert time.monotonic() - t0 < 1.9        # at once: one after another takes 2 s
            assert all(r.ok for r in rs) and len({r.task_id for r in rs}) == 10
            seen = [r async for r in c.evaluate_many(many_tasks(40), concurrency=8, progress=False)]
            assert sorted(r.index for r in seen) == list(range(40))
            tid = await c.submit_task(st("ok", delay_ms=10))
            assert (await c.wait(tid)).ok
            with pytest.raises(kgym.NotFound):
                await c.status("nope")
            w = await c.workers()
            assert "cpu_workers" in w
            return True
    assert asyncio.run(main())


def test_health_workers_stats(client):
    assert client.health()["status"] == "healthy"
    assert len(client.workers()["cpu_workers"]) == 2
    s = client.stats()
    assert s["submitted_total"] >= 1 and "latency_ms" in s
