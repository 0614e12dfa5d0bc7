"""kgympytest -- run one pytest file as one automake test.

`make check` runs each tests/python/test_*.py with the configured python3;
the file's `__main__` calls main(__file__), which runs pytest on it and
maps the outcome to automake's exit statuses: 0 when every test passed,
1 when one failed (or pytest could not run the file), 77 (SKIP) when none
failed but one was skipped -- a file with a skipped test never reports
PASS -- or when no Python with pytest is found.  pytest comes from this
interpreter, else from $KGYM_PYTHON, else /usr/bin/python3 (the file is
run again there); Debian: python3-pytest.
"""
import importlib.util
import os
import subprocess
import sys

SKIP = 77


def _has_pytest(python):
    if python == sys.executable:
        return importlib.util.find_spec("pytest") is not None
    try:
        return subprocess.run([python, "-c", "import pytest"], capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


class _Count:
    """pytest plugin: how many tests were skipped, and why."""

    def __init__(self):
        self.skipped = []

    def pytest_runtest_logreport(self, report):
        if report.skipped:
            reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
            self.skipped.append("%s: %s" % (report.nodeid, reason))

    def pytest_collectreport(self, report):     # a whole file skipped at import
        if report.skipped:
            self.skipped.append("%s: %s" % (report.nodeid, report.longrepr))


def main(path):
    if not _has_pytest(sys.executable):
        for python in (os.environ.get("KGYM_PYTHON"), "/usr/bin/python3"):
            if python and os.path.realpath(python) != os.path.realpath(sys.executable) and _has_pytest(python):
                os.execv(python, [python, path])
        print("SKIP: pytest is not installed (Debian: python3-pytest)")
        return SKIP
    import pytest
    count = _Count()
    here = os.path.dirname(os.path.abspath(path))
    rc = pytest.main([os.path.abspath(path), "-q", "-p", "no:cacheprovider", "--rootdir", here],
                     plugins=[count])
    for s in count.skipped:             # .ci/summary collects these lines
        print("SKIP %s" % s)
    if rc == 0 and count.skipped:
        return SKIP
    return 0 if rc == 0 else 1
