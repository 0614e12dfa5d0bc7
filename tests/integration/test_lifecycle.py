#!/usr/bin/env python3
"""test_lifecycle.py -- kgymd under its service manager, and what happens to
its workers when it dies:

  socket activation   kgymd started with LISTEN_FDS=1, LISTEN_PID = its own
                      pid and a listening Unix socket on fd 3 (as
                      kgymd.socket hands it over) serves on that socket,
                      not on the configured path
  sd_notify           with NOTIFY_SOCKET set, kgymd says READY=1 once it
                      serves and STOPPING=1 on SIGTERM
  workers die too     kill -9 of kgymd: every worker it had is gone (or a
                      zombie) within 5 s -- none keeps running a job for a
                      daemon that no longer exists
"""
import os
import signal
import socket
import subprocess
import time

import kgymtest as k


def proc_alive(pid):
    """Running (not gone, not a zombie)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def test_socket_activation():
    d = k.Daemon()
    path = os.path.join(d.dir, "activated.sock")
    lsock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    lsock.bind(path)
    lsock.listen(16)
    fd = lsock.fileno()
    os.set_inheritable(fd, True)      # Python makes sockets close-on-exec
    log = open(d.log_path, "ab")
    # LISTEN_PID must be kgymd's own pid: the shell's, kept across exec.
    proc = subprocess.Popen(["/bin/sh", "-c", 'LISTEN_PID=$$ LISTEN_FDS=1 exec "$0" "$@"',
                             k.kgymd_path(), "-F", "-f", d.conf],
                            stdout=log, stderr=log, close_fds=False,
                            preexec_fn=lambda: os.dup2(fd, 3) if fd != 3 else None)
    try:
        c = None
        deadline = time.time() + 20
        while c is None and time.time() < deadline:
            try:
                c = k.Client(path)
            except OSError:
                time.sleep(0.05)
        k.check(c is not None, "nothing answered on the handed-over socket:\n" + d.read_log())
        r = c.request({"op": "health"})
        k.check(r.get("ok") is True, r)
        c.close()
        k.check(not os.path.exists(d.socket),
                "kgymd also made its configured socket %s although one was handed over" % d.socket)
        proc.send_signal(signal.SIGTERM)
        k.check(proc.wait(30) == 0, "exit status after SIGTERM:\n" + d.read_log())
    finally:
        if proc.poll() is None:
            proc.kill()
        lsock.close()
        d.cleanup()


def test_sd_notify_ready_and_stopping():
    d = k.Daemon()
    npath = os.path.join(d.dir, "notify.sock")
    n = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    n.bind(npath)
    n.settimeout(20)
    old = os.environ.get("NOTIFY_SOCKET")
    os.environ["NOTIFY_SOCKET"] = npath
    try:
        d.start()
        said = []
        while not any(b"READY=1" in m for m in said):
            said.append(n.recv(4096))
        k.check(d.request({"op": "health"}).get("ok") is True, "serving once READY=1 was said")
        d.stop()
        n.settimeout(5)
        try:
            while not any(b"STOPPING=1" in m for m in said):
                said.append(n.recv(4096))
        except socket.timeout:
            raise AssertionError("no STOPPING=1 after SIGTERM; heard %r" % said)
    finally:
        if old is None:
            os.environ.pop("NOTIFY_SOCKET", None)
        else:
            os.environ["NOTIFY_SOCKET"] = old
        n.close()
        d.cleanup()


def test_workers_die_with_kgymd():
    d = k.Daemon(workers_conf="cpu_workers = 2")
    try:
        d.start()
        pids = []
        deadline = time.time() + 20
        while time.time() < deadline:
            w = d.request({"op": "workers"})
            pids = [x["pid"] for x in w["cpu_workers"] if isinstance(x.get("pid"), int) and x["pid"] > 0]
            if len(pids) == 2 and all(x["state"] == "idle" for x in w["cpu_workers"]):
                break
            time.sleep(0.05)
        k.check(len(pids) == 2 and all(proc_alive(p) for p in pids), "two running workers: %r" % pids)
        # A job in flight too: its worker must not outlive the daemon either.
        d.request({"op": "submit", "task": k.selftest_task(30000, task_id="long")})
        time.sleep(0.3)
        d.kill9()
        deadline = time.time() + 5
        while time.time() < deadline and any(proc_alive(p) for p in pids):
            time.sleep(0.05)
        k.check(not any(proc_alive(p) for p in pids),
                "workers still running 5 s after kgymd died: %r" % [p for p in pids if proc_alive(p)])
    finally:
        d.cleanup()


if __name__ == "__main__":
    k.run([test_socket_activation, test_sd_notify_ready_and_stopping, test_workers_die_with_kgymd])
