#!/usr/bin/env python3
"""kgymd -n checks a config: file:line: reason and a non-zero exit, or OK."""
import os
import subprocess
import tempfile

import kgymtest as k


def check_conf(text):
    fd, path = tempfile.mkstemp(suffix=".conf")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    try:
        p = subprocess.run([k.kgymd_path(), "-n", "-f", path], capture_output=True, text=True)
        return p.returncode, p.stdout + p.stderr, path
    finally:
        os.unlink(path)


def test_good_config():
    rc, out, _ = check_conf("[kgymd]\nworkers_per_gpu = 2\n")
    k.check(rc == 0 and "configuration OK" in out, out)


def test_shipped_config():
    p = subprocess.run([k.kgymd_path(), "-n", "-f", os.path.join(k.srcdir(), "etc/kgymd.conf")],
                       capture_output=True, text=True)
    k.check(p.returncode == 0, p.stdout + p.stderr)


def test_broken_configs():
    cases = [
        ("[kgymd]\nworkers_per_gpu = many\n", 2, "workers_per_gpu"),
        ("[kgymd]\n\nmax_queued_tasks = 0\n", 3, "max_queued_tasks"),
        ("[kgymd]\nno_such_key = 1\n", 2, "no_such_key"),
        ("[nosection]\nx = 1\n", 1, "nosection"),
        ("[kgymd]\nlog_level = loud\n", 2, "log_level"),
        ("[kgymd]\nsocket = relative.sock\n", 2, "socket"),
    ]
    for text, line, word in cases:
        rc, out, path = check_conf(text)
        k.check(rc != 0, "non-zero exit for %r" % text)
        k.check(out.startswith("%s:%d: " % (path, line)), "file:line prefix in %r" % out)
        k.check(word in out, "%r names %r" % (out, word))


def test_missing_file():
    p = subprocess.run([k.kgymd_path(), "-n", "-f", "/nonexistent/kgymd.conf"],
                       capture_output=True, text=True)
    k.check(p.returncode != 0 and "/nonexistent/kgymd.conf" in p.stderr, p.stderr)


def test_version_and_usage():
    p = subprocess.run([k.kgymd_path(), "-V"], capture_output=True, text=True)
    k.check(p.returncode == 0 and "kgymd" in p.stdout and "sandbox" in p.stdout, p.stdout)
    p = subprocess.run([k.kgymd_path(), "-x"], capture_output=True, text=True)
    k.check(p.returncode == 2 and "usage" in p.stderr, p.stderr)


if __name__ == "__main__":
    k.run([test_good_config, test_shipped_config, test_broken_configs, test_missing_file,
           test_version_and_usage])
