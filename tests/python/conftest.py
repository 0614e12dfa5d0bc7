"""Fixtures of the kgym package's tests: private daemons on temporary sockets.

The package is imported from the source tree (python/); the daemons come
from the build tree, started by tests/integration's helpers (kgymtest, and
test_python for the KernelBench-format path on the CPU).
"""
import os
import socket
import subprocess
import sys
import tempfile
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SRCDIR = os.environ.get("KGYM_SRCDIR", os.path.abspath(os.path.join(HERE, "../..")))
BUILDDIR = os.environ.get("KGYM_BUILDDIR", SRCDIR)
os.environ.setdefault("KGYM_SRCDIR", SRCDIR)
os.environ.setdefault("KGYM_BUILDDIR", BUILDDIR)
for p in (os.path.join(SRCDIR, "python"), os.path.join(SRCDIR, "tests", "integration")):
    if p not in sys.path:
        sys.path.insert(0, p)

import kgymtest  # noqa: E402


def kgymd_http_path():
    return os.path.join(BUILDDIR, "kgymd-http", "kgymd-http")


def need_kgymd():
    for path in (kgymtest.kgymd_path(), kgymtest.worker_path(), kgymtest.test_plugin("selftest")):
        if not os.path.exists(path):
            pytest.skip("not built: %s" % os.path.relpath(path, BUILDDIR))


def need_kernelbench():
    """The KernelBench-format path on the CPU: the plugins and a torch."""
    need_kgymd()
    import test_python
    for name in ("kernelbench", "python"):
        if not os.path.exists(test_python.plugin_path(name)):
            pytest.skip("the %s plugin was not built" % name)
    if not test_python.have_torch():
        pytest.skip("the python plugin's interpreter (KGYM_PYTHON, default /usr/bin/python3) cannot import torch")
    return test_python


@pytest.fixture(scope="module")
def selftest_daemon():
    """A private kgymd with the selftest workflow (no GPU, no torch)."""
    need_kgymd()
    d = kgymtest.Daemon(workers_conf="cpu_workers = 2")
    d.start()
    try:
        yield d
    finally:
        try:
            d.stop()
        finally:
            d.cleanup()


@pytest.fixture(scope="module")
def kernelbench_daemon():
    """A private kgymd with the kernelbench workflow and the python backend,
    for torch candidates on the CPU."""
    test_python = need_kernelbench()
    d = test_python.PyDaemon()
    d.start()
    try:
        yield d
    finally:
        try:
            d.stop()
        finally:
            d.cleanup()


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Gateway:
    """kgymd-http in front of a private kgymd, on a free loopback port."""

    def __init__(self, daemon):
        self.dir = tempfile.mkdtemp(prefix="kgym-http-")
        self.port = free_port()
        self.url = "http://127.0.0.1:%d" % self.port
        self.conf = os.path.join(self.dir, "kgymd-http.conf")
        with open(self.conf, "w") as f:
            f.write("[kgymd]\nsocket = %s\n\n[http]\nlisten = 127.0.0.1:%d\n" % (daemon.socket, self.port))
        self.log_path = os.path.join(self.dir, "kgymd-http.log")
        self.log = open(self.log_path, "ab")
        self.proc = subprocess.Popen([kgymd_http_path(), "-F", "-f", self.conf], stdout=self.log, stderr=self.log)
        deadline = time.time() + 20
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError("kgymd-http exited with %s:\n%s" % (self.proc.returncode, self.read_log()))
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.05)
        raise AssertionError("kgymd-http did not listen within 20 s:\n" + self.read_log())

    def read_log(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode(errors="replace")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        import shutil
        shutil.rmtree(self.dir, ignore_errors=True)


def need_gateway():
    if not os.path.exists(kgymd_http_path()):
        pytest.skip("kgymd-http is not built (build/kgymd-http/kgymd-http)")
