"""kgymtest -- helpers for the integration tests: a private kgymd and clients.

Each test starts its own kgymd on a temporary socket and state directory,
with the test-only plugins copied from the build tree, talks to it over the
real control socket and stops it.  Standard library only.

Environment (set by `make check`): KGYM_BUILDDIR, KGYM_SRCDIR.
"""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

SKIP = 77  # automake's "skipped" exit status


def builddir():
    return os.environ.get("KGYM_BUILDDIR", os.path.abspath(os.path.join(os.path.dirname(__file__), "../..")))


def srcdir():
    return os.environ.get("KGYM_SRCDIR", os.path.abspath(os.path.join(os.path.dirname(__file__), "../..")))


def test_plugin(name):
    """Path of a built test plugin (libtool keeps the real .so in .libs)."""
    return os.path.join(builddir(), "tests/plugins/.libs", name + ".so")


def kgymd_path():
    return os.path.join(builddir(), "kgymd/kgymd")


def worker_path():
    return os.path.join(builddir(), "kgymd/worker/kgymd-worker")


def kgymctl_path():
    return os.path.join(builddir(), "kgymctl/kgymctl")


class Client:
    """One connection speaking protocol v1; requests get increasing ids."""

    def __init__(self, path, timeout=30.0):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        # With a timeout the socket is non-blocking, and a Unix socket's
        # connect then fails at once (EAGAIN) while the daemon's listen
        # backlog is full, where a blocking one waits: wait as it would.
        deadline = time.time() + timeout
        while True:
            try:
                self.sock.connect(path)
                break
            except BlockingIOError:
                if time.time() >= deadline:
                    self.sock.close()
                    raise
                time.sleep(0.01)
        self.buf = b""
        self.next_id = 1
        self.backlog = []  # lines read while looking for another id

    def close(self):
        self.sock.close()

    def send_raw(self, data):
        self.sock.sendall(data)

    def send(self, obj):
        if "id" not in obj:
            obj = dict(obj, id=self.next_id)
            self.next_id += 1
        obj.setdefault("v", 1)
        self.send_raw(json.dumps(obj).encode() + b"\n")
        return obj["id"]

    def read_line(self):
        """The next reply or event line as a dict; None at EOF."""
        if self.backlog:
            return self.backlog.pop(0)
        return self.read_line_raw()

    def read_for(self, req_id):
        """The next line answering req_id; other lines are kept for later."""
        kept = []
        while True:
            msg = self.read_line_raw()
            if msg is None:
                self.backlog = kept + self.backlog
                return None
            if msg.get("id") == req_id:
                self.backlog = kept + self.backlog
                return msg
            kept.append(msg)

    def read_line_raw(self):
        while b"\n" not in self.buf:
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                return None
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def request(self, obj):
        return self.read_for(self.send(obj))

    def collect_wait(self, req_id):
        """Events for a waiting request, then its final reply."""
        events = []
        while True:
            msg = self.read_for(req_id)
            if msg is None:
                raise AssertionError("connection closed while waiting")
            if msg.get("event") == "result":
                events.append(msg)
            elif msg.get("done") or msg.get("ok") is False:
                return events, msg
            # the submit's own "accepted" reply is skipped here


class Daemon:
    """A private kgymd.  Use as a context manager; `stop()` checks exit 0."""

    def __init__(self, kgymd_conf="", extra_conf="", plugins=("selftest", "selftest_backend"),
                 state=None, plugin_dirs=None, grace="0", workers_conf="", sandbox_conf="",
                 gpus="none", worker=None):
        self.dir = state or tempfile.mkdtemp(prefix="kgym-")
        self.socket = os.path.join(self.dir, "kgymd.sock")
        self.state_dir = os.path.join(self.dir, "state")
        if plugin_dirs is None:
            pdir = os.path.join(self.dir, "plugins")
            os.makedirs(pdir, exist_ok=True)
            for name in plugins:
                dst = os.path.join(pdir, name + ".so")
                shutil.copyfile(test_plugin(name), dst)
                os.chmod(dst, 0o755)
            plugin_dirs = [pdir]
        self.plugin_dir = ":".join(plugin_dirs)
        self.conf = os.path.join(self.dir, "kgymd.conf")
        with open(self.conf, "w") as f:
            # Tests stop the daemon with long tasks still running: by default
            # they are requeued at once instead of after the 30 s grace.
            grace_line = "shutdown_grace = %s\n" % grace if grace is not None else ""
            f.write("[kgymd]\nsocket = %s\nstate_dir = %s\nplugin_dir = %s\nlog_level = debug\n"
                    "gpus = %s\n%s%s\n[workers]\npath = %s\n%s\n[sandbox]\n%s\n%s\n"
                    % (self.socket, self.state_dir, self.plugin_dir, gpus, grace_line, kgymd_conf,
                       worker or worker_path(), workers_conf, sandbox_conf, extra_conf))
        self.log_path = os.path.join(self.dir, "kgymd.log")
        self.proc = None
        self.client = None

    def start(self, wait=True):
        self.log = open(self.log_path, "ab")
        self.proc = subprocess.Popen([kgymd_path(), "-F", "-f", self.conf],
                                     stdout=self.log, stderr=self.log)
        if wait:
            deadline = time.time() + 20
            while time.time() < deadline:
                if self.proc.poll() is not None:
                    raise AssertionError("kgymd exited with %s:\n%s" % (self.proc.returncode, self.read_log()))
                try:
                    self.client = Client(self.socket)
                    return self
                except OSError:
                    time.sleep(0.02)
            raise AssertionError("kgymd did not listen within 20 s:\n" + self.read_log())
        return self

    def read_log(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode(errors="replace")

    def connect(self):
        return Client(self.socket)

    def request(self, obj):
        return self.client.request(obj)

    def stop(self, expect_rc=0):
        if self.client:
            self.client.close()
            self.client = None
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                rc = self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                raise AssertionError("kgymd did not stop within 30 s of SIGTERM")
            if expect_rc is not None and rc != expect_rc:
                raise AssertionError("kgymd exited %d, expected %d:\n%s" % (rc, expect_rc, self.read_log()))
        self.proc = None

    def kill9(self):
        if self.client:
            self.client.close()
            self.client = None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        self.proc = None

    def cleanup(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self):
        return self.start()

    def __exit__(self, et, ev, tb):
        try:
            if et is None:
                self.stop()
        finally:
            if et is not None:
                sys.stderr.write("--- kgymd log ---\n" + self.read_log()[-20000:])
            self.cleanup()


def selftest_task(delay_ms=0, action="ok", **kw):
    t = {"workflow": "selftest", "payload": {"action": action, "delay_ms": delay_ms}}
    t.update(kw)
    return t


class Skip(Exception):
    """Raised by a test that cannot run here; reported as SKIP, never as PASS."""


def _nobody_client_code():
    """Python source of a one-request client that first drops to uid 65534."""
    if os.geteuid() != 0:
        raise Skip("needs root to connect as another uid")
    code = ("import os,socket,sys\n"
            "os.setgid(65534); os.setuid(65534)\n"
            "s=socket.socket(socket.AF_UNIX); s.settimeout(10); s.connect(sys.argv[1])\n"
            "try: s.sendall(sys.argv[2].encode()+b'\\n')\n"
            "except OSError: pass  # a refused peer may be closed before it writes\n"
            "buf=b''\n"
            "while b'\\n' not in buf:\n"
            "    c=s.recv(65536)\n"
            "    if not c: break\n"
            "    buf+=c\n"
            "sys.stdout.write(buf.decode())\n")
    return code


def request_as_nobody(daemon, obj):
    """Send one request as uid 65534; return the first line it gets back.

    The client runs in a child that drops to nobody (needs root), so the
    daemon sees a peer uid that is neither root nor its own.
    """
    code = _nobody_client_code()
    os.chmod(daemon.dir, 0o711)
    obj = dict(obj, v=1, id=1)
    p = subprocess.run([sys.executable, "-c", code, daemon.socket, json.dumps(obj)],
                       capture_output=True, text=True, timeout=30)
    if p.returncode != 0:
        raise AssertionError("client as nobody failed: " + p.stderr)
    return json.loads(p.stdout.splitlines()[0])


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def run(tests):
    """Run test functions; print each verdict; exit 1 if any failed, else
    77 (automake's SKIP) if any was skipped -- a file with a skipped test
    never reports PASS.  KGYM_TEST_ONLY (comma-separated names) runs only
    those (tests/mutation/run: the tests that kill a mutant)."""
    only = [n for n in os.environ.get("KGYM_TEST_ONLY", "").split(",") if n]
    if only:
        unknown = set(only) - {t.__name__ for t in tests}
        if unknown:
            print("FAIL KGYM_TEST_ONLY names no test here: %s" % ", ".join(sorted(unknown)))
            sys.exit(1)
        tests = [t for t in tests if t.__name__ in only]
    failed = skipped = 0
    for t in tests:
        t0 = time.time()
        try:
            t()
            print("PASS %s (%.2f s)" % (t.__name__, time.time() - t0))
        except Skip as e:
            skipped += 1
            print("SKIP %s: %s" % (t.__name__, e))
        except Exception as e:  # noqa: BLE001 - report every failure
            failed += 1
            print("FAIL %s: %s: %s" % (t.__name__, type(e).__name__, e))
            import traceback
            traceback.print_exc()
    if failed:
        sys.exit(1)
    if skipped:
        print("SKIP: %d of %d tests skipped (see above)" % (skipped, len(tests)))
    sys.exit(SKIP if skipped else 0)
