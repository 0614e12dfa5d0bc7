"""`pip install ./python` into a fresh venv, then python/README.md's quick start.

Offline: pip installs with --no-index --no-build-isolation, so the build
backend (setuptools >= 61, with wheel) must be in the venv.  A venv of its
own has them on Python 3.11 with Debian's python3-venv minus wheel; when
it lacks them the venv is made again with --system-site-packages (Debian:
python3-setuptools, python3-wheel), and the test checks that kgym is not
importable there before the install.  Skips, naming what is missing, when
neither works.  The package is copied first, so the build writes nothing
into the source tree.

The quick start runs the README's own code block with the venv's Python,
against a private kgymd with the python backend (torch on the CPU); it
skips without them.
"""
if __name__ == "__main__":      # run by make check: pytest on this file
    import os
    import sys
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import kgympytest
    sys.exit(kgympytest.main(__file__))

import os
import re
import shutil
import subprocess
import sys
import zipfile

import pytest

from conftest import SRCDIR

PKG = os.path.join(SRCDIR, "python")
BACKEND_OK = ("import sys, setuptools\n"
              "v = tuple(int(x) for x in setuptools.__version__.split('.')[:2])\n"
              "import wheel\n"
              "sys.exit(0 if v >= (61, 0) else 3)\n")


def run(cmd, **kw):
    kw.setdefault("timeout", 300)
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def make_venv(path, system_site):
    shutil.rmtree(path, ignore_errors=True)
    cmd = [sys.executable, "-m", "venv"] + (["--system-site-packages"] if system_site else []) + [path]
    p = run(cmd)
    if p.returncode != 0:
        pytest.skip("python3 -m venv failed (Debian: python3-venv): %s" % (p.stderr.strip().splitlines() or ["?"])[-1])
    py = os.path.join(path, "bin", "python")
    if run([py, "-m", "pip", "--version"]).returncode != 0:
        pytest.skip("the venv has no pip (Debian: python3-venv)")
    return py


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    base = tmp_path_factory.mktemp("kgym-install")
    path = str(base / "venv")
    py = make_venv(path, False)
    why = run([py, "-c", BACKEND_OK])
    if why.returncode != 0:
        py = make_venv(path, True)
        why = run([py, "-c", BACKEND_OK])
        if why.returncode != 0:
            pytest.skip("no setuptools >= 61 with wheel for an offline build (Debian: python3-setuptools, "
                        "python3-wheel): %s" % (why.stderr.strip().splitlines() or ["setuptools too old"])[-1])
    assert run([py, "-c", "import kgym"]).returncode != 0, "kgym is importable before the install"
    src = str(base / "src")
    shutil.copytree(PKG, src, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    env = dict(os.environ, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    env.pop("PYTHONPATH", None)
    p = run([py, "-m", "pip", "install", "--no-index", "--no-build-isolation", src], env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    return {"python": py, "bin": os.path.dirname(py), "src": src, "base": str(base), "env": env}


def test_pip_install_in_a_fresh_venv(venv):
    env = venv["env"]
    p = run([venv["python"], "-c", "import kgym, os, kgym.verl, kgym.rewards\n"
             "d = os.path.dirname(kgym.__file__)\n"
             "print(d)\nprint(os.path.exists(os.path.join(d, 'py.typed')))\nprint(kgym.__version__)"],
            env=env, cwd=venv["base"])
    assert p.returncode == 0, p.stderr
    where, typed, version = p.stdout.split()
    assert where.startswith(venv["base"]) and "site-packages" in where     # the installed copy, not the tree
    assert typed == "True" and version == "0.1.0"
    p = run([os.path.join(venv["bin"], "kgym-eval"), "--help"], env=env)
    assert p.returncode == 0 and "fast_p" in p.stdout.replace("\n", " ")
    # The wheel: what `python -m build` makes, built the same offline way.
    dist = os.path.join(venv["base"], "dist")
    p = run([venv["python"], "-m", "pip", "wheel", "--no-index", "--no-build-isolation", "--no-deps", "-w", dist,
             venv["src"]], env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    wheels = [f for f in os.listdir(dist) if f.startswith("kgym-0.1.0-") and f.endswith(".whl")]
    assert len(wheels) == 1
    names = zipfile.ZipFile(os.path.join(dist, wheels[0])).namelist()
    assert "kgym/py.typed" in names and "kgym/client.py" in names
    assert any(n.endswith("entry_points.txt") for n in names)


def quick_start_code():
    with open(os.path.join(PKG, "README.md")) as f:
        text = f.read()
    section = text.split("## Quick start", 1)[1]
    m = re.search(r"```python\n(.*?)```", section, re.S)
    assert m, "python/README.md has a python block under '## Quick start'"
    code = m.group(1)
    assert len(code.strip().splitlines()) == 5, "the quick start is five lines"
    return code


def test_quick_start(venv, kernelbench_daemon, tmp_path):
    relu = os.path.join(SRCDIR, "examples", "kernelbench", "relu")
    shutil.copyfile(os.path.join(relu, "reference.py"), str(tmp_path / "reference.py"))
    shutil.copyfile(os.path.join(relu, "torch_correct.py"), str(tmp_path / "kernel.py"))
    env = dict(venv["env"], KGYM_SOCKET=kernelbench_daemon.socket)
    env.pop("KGYM_URL", None)
    p = run([venv["python"], "-c", quick_start_code()], env=env, cwd=str(tmp_path))
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.splitlines()[0].split()[:2] == ["completed", "True"], p.stdout
    assert "Verdict: correct" in p.stdout
