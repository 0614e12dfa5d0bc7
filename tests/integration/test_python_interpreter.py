"""The python backend's interpreter is checked when the plugin loads.

A newcomer's usual mistake is an interpreter kgymd cannot run: a venv under
/home (hidden by the unit's ProtectHome=yes), a typo, a program that is not
Python.  kgymd must say so at start -- the python plugin refused with a
reason naming [plugin.python] interpreter and what to do -- instead of
failing every KernelBench-format task later; a Python without torch loads
with a warning in the log.  The daemon keeps serving either way.
"""
import os
import sys
import tempfile

import kgymtest as k
from test_python import PyDaemon, plugin_path, sandbox_lib


def python_plugin(d):
    r = d.request({"op": "plugins"})
    k.check(r["ok"], r)
    loaded = [p for p in r["plugins"] if p["name"] == "python"]
    refused = [p for p in r.get("refused", []) if os.path.basename(p.get("path", "")) == "python.so"]
    return loaded, refused


def refused_with(interpreter, *words):
    with PyDaemon(python_conf={"interpreter": interpreter}) as d:
        loaded, refused = python_plugin(d)
        k.check(not loaded and len(refused) == 1, (loaded, refused))
        reason = refused[0].get("reason", "")
        for w in ("interpreter = " + interpreter,) + words:
            k.check(w in reason, "%r not in %r" % (w, reason))
        k.check(d.request({"op": "health"})["ok"], "still serving")


def test_missing_interpreter():
    refused_with("/home/someone/venv/bin/python", "No such file or directory", "ProtectHome=yes")


def test_not_python():
    refused_with("/bin/false", "does not run as Python")


def test_no_torch_is_a_warning():
    with tempfile.TemporaryDirectory() as tmp:
        fake = os.path.join(tmp, "python")
        with open(fake, "w") as f:
            f.write("#!/bin/sh\nexit 3\n")     # the check's "no torch" answer
        os.chmod(fake, 0o755)
        with PyDaemon(python_conf={"interpreter": fake}) as d:
            loaded, refused = python_plugin(d)
            k.check(len(loaded) == 1 and not refused, (loaded, refused))
            log = d.read_log()
            k.check(("interpreter = %s has no torch" % fake) in log, log[-3000:])


def test_good_interpreter_loads():
    py = os.environ.get("KGYM_PYTHON", "/usr/bin/python3")
    with PyDaemon(python_conf={"interpreter": py}) as d:
        loaded, refused = python_plugin(d)
        k.check(len(loaded) == 1 and not refused, (loaded, refused))


def main():
    if not os.path.exists(plugin_path("python")) or not os.path.exists(sandbox_lib()):
        print("SKIP: the python plugin or libkgym_sandbox.so was not built")
        sys.exit(k.SKIP)
    k.run([test_missing_interpreter, test_not_python, test_no_torch_is_a_warning,
           test_good_interpreter_loads])


if __name__ == "__main__":
    main()
