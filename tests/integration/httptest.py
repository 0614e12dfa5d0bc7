"""httptest -- helpers for the kgymd-http tests: a private gateway, and HTTP
requests made the way KernelGYM's clients make them (urllib, JSON bodies).

A Gateway runs kgymd-http -F -f on the private kgymd's own kgymd.conf
(kgymtest.Daemon, with an [http] section listening on 127.0.0.1 port 0);
the port it picked is read from its log line "listening on ... port N".
Standard library only.
"""
import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request

import kgymtest as k


def gateway_path():
    return os.path.join(k.builddir(), "kgymd-http/kgymd-http")


def http_conf(listen="127.0.0.1:0", token_file=None, max_body="64K", max_inflight=None):
    s = "[http]\nlisten = %s\nmax_body_bytes = %s\n" % (listen, max_body)
    if token_file:
        s += "token_file = %s\n" % token_file
    if max_inflight:
        s += "max_inflight = %d\n" % max_inflight
    return s


class Gateway:
    """kgymd-http on a Daemon's config file."""

    def __init__(self, daemon):
        self.daemon = daemon
        self.log_path = os.path.join(daemon.dir, "kgymd-http.log")
        self.proc = None
        self.port = None

    def start(self):
        self.log = open(self.log_path, "ab")
        start_at = os.path.getsize(self.log_path)
        self.proc = subprocess.Popen([gateway_path(), "-F", "-f", self.daemon.conf],
                                     stdout=self.log, stderr=self.log)
        deadline = time.time() + 20
        while time.time() < deadline:
            text = self.read_log()[start_at:]
            for line in text.splitlines():
                if "listening on" in line and " port " in line:
                    self.port = int(line.rsplit(" port ", 1)[1].split()[0])
            if self.port and "kgymd: connected" in text:
                return self
            if self.proc.poll() is not None:
                raise AssertionError("kgymd-http exited %s:\n%s" % (self.proc.returncode, text))
            time.sleep(0.02)
        raise AssertionError("kgymd-http did not start within 20 s:\n" + self.read_log())

    def read_log(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode(errors="replace")

    def url(self, path):
        return "http://127.0.0.1:%d%s" % (self.port, path)

    def kill9(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        self.proc = None

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                rc = self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                raise AssertionError("kgymd-http did not stop within 10 s of SIGTERM")
            k.check(rc == 0, "kgymd-http exited %d:\n%s" % (rc, self.read_log()))
        self.proc = None

    def cleanup(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


class Reply:
    def __init__(self, code, headers, body):
        self.code = code
        self.headers = headers
        self.raw = body
        try:
            self.json = json.loads(body) if body else None
        except ValueError:
            self.json = None

    def __repr__(self):
        return "HTTP %d %s %s" % (self.code, dict(self.headers), self.raw[:600])


def request(gw, method, path, body=None, token=None, raw=None, headers=None, timeout=60):
    """One request as KernelGYM's clients send it: JSON body, urllib."""
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    h = {"Content-Type": "application/json"} if data is not None else {}
    if token:
        h["Authorization"] = "Bearer " + token
    h.update(headers or {})
    req = urllib.request.Request(gw.url(path), data=data, headers=h, method=method)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return Reply(r.status, r.headers, r.read())
    except urllib.error.HTTPError as e:
        return Reply(e.code, e.headers, e.read())


def raw_request(gw, data, timeout=10):
    """Bytes on a fresh TCP connection; the status code of the answer (0: none)."""
    s = socket.create_connection(("127.0.0.1", gw.port), timeout=timeout)
    try:
        try:
            s.sendall(data)
            s.shutdown(socket.SHUT_WR)
        except OSError:
            pass  # the gateway may answer and close before reading it all
        buf = b""
        while True:
            try:
                chunk = s.recv(65536)
            except OSError:
                break
            if not chunk:
                break
            buf += chunk
    finally:
        s.close()
    if not buf.startswith(b"HTTP/1."):
        return 0, buf
    return int(buf.split(b" ", 2)[1]), buf


def selftest_eval(task_id, action="ok", delay_ms=0, **kw):
    """An EvaluationRequest for the selftest workflow (runs in kgymd itself)."""
    body = {"task_id": task_id, "workflow": "selftest", "action": action, "delay_ms": delay_ms,
            "in_daemon": True, "kernel_code": "class ModelNew: pass  # selftest",
            "priority": "normal", "timeout": 300}
    body.update(kw)
    return body


def wait_for(cond, timeout, what):
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(0.05)
    raise AssertionError("not within %g s: %s" % (timeout, what))
