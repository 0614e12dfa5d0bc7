"""kgym on the KernelBench-format path: a private kgymd with the kernelbench
workflow and the python backend, torch candidates on the CPU.

evaluate() of right, wrong and broken candidates (typed results, timings,
trials, feedback, rewards); the VERL reward loaded from its file the way
VERL loads a custom reward function (compute_score and
compute_score_batch); kgym-eval on a KernelBench-layout folder of five
problems made here: its table against its own JSONL, a second run that
reuses every stored result (the daemon sees no new task), a changed
candidate evaluated alone, and a JSONL of tasks.

Skips when the plugins were not built or the python plugin's interpreter
(KGYM_PYTHON, default /usr/bin/python3) has no torch.
"""
if __name__ == "__main__":      # run by make check: pytest on this file
    import os
    import sys
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import kgympytest
    sys.exit(kgympytest.main(__file__))

import functools
import importlib.util
import json
import math
import os
import subprocess
import sys

import pytest

import kgym
from conftest import SRCDIR

EXAMPLES = os.path.join(SRCDIR, "examples", "kernelbench", "relu")
FIELDS = {"device": "cpu", "num_correct_trials": 5, "num_perf_trials": 5, "num_warmup": 1}


def read(path):
    with open(path) as f:
        return f.read()


RELU_REF = read(os.path.join(EXAMPLES, "reference.py"))
RELU_OK = read(os.path.join(EXAMPLES, "torch_correct.py"))
RELU_WRONG = read(os.path.join(EXAMPLES, "torch_wrong.py"))


@pytest.fixture(scope="module")
def client(kernelbench_daemon):
    c = kgym.Client(kernelbench_daemon.socket)
    yield c
    c.close()


def test_evaluate_torch_on_cpu(client):
    r = client.evaluate(RELU_REF, RELU_OK, backend="torch", **FIELDS)
    assert r.ok and r.state == "completed" and r.error_code is None, kgym.feedback(r)
    assert r.kernel_timing is not None and r.kernel_timing.median_ms > 0 and r.kernel_timing.trials >= 5
    assert r.reference_timing is not None and r.reference_timing.median_ms > 0
    assert r.speedup == pytest.approx(r.reference_runtime / r.kernel_runtime, rel=1e-6)
    assert len(r.correctness_trials) >= 5 and all(t.passed for t in r.correctness_trials)
    assert all(t.seed for t in r.correctness_trials)
    assert kgym.rewards.weighted(r)["score"] in (0.5, 1.0)
    assert "Verdict: correct" in kgym.feedback(r)

    w = client.evaluate(RELU_REF, RELU_WRONG, backend="torch", **FIELDS)
    assert (w.state, w.status, w.correctness, w.error_code) == ("completed", "completed", False,
                                                                "CORRECTNESS_ERROR")
    assert any(t.passed is False for t in w.correctness_trials)
    fb = kgym.feedback(w, max_chars=600)
    assert len(fb) <= 600 and "CORRECTNESS_ERROR" in fb and "First failing trial" in fb
    assert kgym.rewards.like_kernel(w)["score"] == -0.3

    broken = client.evaluate(RELU_REF, "import torch\nclass ModelNew(torch.nn.Module:\n", backend="torch", **FIELDS)
    assert (broken.state, broken.compiled, broken.error_code) == ("failed", False, "COMPILATION_ERROR")
    assert "SyntaxError" in kgym.feedback(broken)
    assert kgym.rewards.like_kernel(broken)["score"] == -1.0

    with pytest.raises(kgym.BadRequest) as e:
        client.evaluate(RELU_REF, RELU_OK, backend="torch", device="cpu", num_correct_trials="five")
    assert e.value.field is not None and "num_correct_trials" in e.value.field


def load_like_verl(name, reward_kwargs):
    """verl.trainer.ppo.reward.get_custom_reward_fn: the file by its path,
    as a module of its own, the function wrapped with reward_kwargs."""
    path = os.path.join(SRCDIR, "python", "kgym", "verl.py")
    spec = importlib.util.spec_from_file_location("custom_module", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["custom_module"] = module
    spec.loader.exec_module(module)
    return functools.partial(getattr(module, name), **reward_kwargs)


def response(code):
    return "I fused it.\n```python\n%s```\nThis should be faster." % code


def test_verl_compute_score(kernelbench_daemon):
    fn = load_like_verl("compute_score", {"address": kernelbench_daemon.socket, "backend": "torch",
                                          "fields": FIELDS, "reward": "weighted"})
    good = fn(data_source="kernelbench", solution_str=response(RELU_OK), ground_truth=RELU_REF,
              extra_info={"index": 0})
    assert good["correctness"] is True and good["score"] in (0.5, 1.0) and good["error_code"] == ""
    wrong = fn(data_source="kernelbench", solution_str=response(RELU_WRONG), ground_truth=RELU_REF)
    assert wrong["correctness"] is False and wrong["score"] == 0.0 and wrong["error_code"] == "CORRECTNESS_ERROR"
    none = fn(data_source="kernelbench", solution_str="I cannot do this.", ground_truth=RELU_REF)
    assert none["score"] == 0.0 and none["error_code"] == "NO_CODE"
    # Per-sample settings from extra_info, and a dict ground truth.
    like = fn(data_source="kernelbench", solution_str=response(RELU_WRONG),
              ground_truth=json.dumps({"reference_code": RELU_REF}), extra_info={"kgym": {"reward": "like_kernel"}})
    assert like["score"] == -0.3
    batch = load_like_verl("compute_score_batch", {"address": kernelbench_daemon.socket, "backend": "torch",
                                                   "fields": FIELDS, "reward": "like_kernel"})
    scores = batch(data_sources=["kb"] * 3, solution_strs=[response(RELU_WRONG), "no code", response(RELU_OK)],
                   ground_truths=[RELU_REF] * 3, extra_infos=[{}, {}, {}])
    assert [s["error_code"] for s in scores[:2]] == ["CORRECTNESS_ERROR", "NO_CODE"]
    assert scores[0]["score"] == -0.3 and scores[1]["score"] == -1.0 and scores[2]["correctness"] is True


# ------------------------------------------------------------ kgym-eval

MODULE = "import torch\nimport torch.nn as nn\n\n\n"


def problem(forward, inputs):
    return (MODULE + "class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n\n"
            "    def forward(self, %s):\n        return %s\n\n\ndef get_inputs():\n    return [%s]\n\n\n"
            "def get_init_inputs():\n    return []\n" % (forward[0], forward[1], inputs))


def candidate(args, body):
    return (MODULE + "class ModelNew(nn.Module):\n    def __init__(self):\n        super().__init__()\n\n"
            "    def forward(self, %s):\n        return %s\n" % (args, body))


PROBLEMS = {
    "level1/1_ReLU": (problem(("x", "torch.relu(x)"), "torch.randn(64, 128)"), candidate("x", "x.clamp_min(0.0)")),
    "level1/2_Add": (problem(("a, b", "a + b"), "torch.randn(64, 128), torch.randn(64, 128)"),
                     candidate("a, b", "torch.add(a, b)")),
    "level1/3_Scale": (problem(("x", "x * 2.5"), "torch.randn(64, 128)"), candidate("x", "x * 2.0")),   # wrong
    "level2/1_Tanh": (problem(("x", "torch.tanh(x)"), "torch.randn(64, 128)"),
                      "import torch\nclass ModelNew(torch.nn.Module:\n"),                             # no compile
    "level2/2_Sum": (problem(("x", "torch.sum(x, dim=1)"), "torch.randn(64, 128)"), candidate("x", "x.sum(1)")),
}


def write_layout(root, which):
    for key, pair in PROBLEMS.items():
        path = os.path.join(root, key + ".py")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(pair[which])


def kgym_eval(*args):
    env = dict(os.environ, PYTHONPATH=os.path.join(SRCDIR, "python"))
    p = subprocess.run([sys.executable, "-m", "kgym.eval_cli"] + list(args), capture_output=True, text=True,
                       env=env, timeout=600)
    return p.returncode, p.stdout, p.stderr


def table_rows(stdout):
    lines = [l for l in stdout.splitlines() if l.strip()]
    assert lines[0].split() == ["level", "tasks", "correct", "fast_0", "fast_1", "fast_1.5", "fast_2", "geomean",
                                "failures"], stdout
    return {l.split()[0]: l.split() for l in lines[1:]}


def expected_row(records):
    """The row the table must show for these JSONL records, computed here."""
    res = [r["result"] for r in records]
    n = len(res)
    correct = [r for r in res if r["status"] == "completed" and r["correctness"] is True]
    pct = lambda k: "%.1f%%" % (100.0 * k / n)  # noqa: E731
    fast = [pct(sum(1 for r in correct if r["speedup"] > p)) for p in (0, 1, 1.5, 2)]
    sp = [r["speedup"] for r in correct if r["speedup"] > 0]
    geo = "%.3fx" % math.exp(sum(map(math.log, sp)) / len(sp)) if sp else "-"
    codes = {}
    for r in res:
        if r.get("error_code"):
            codes[r["error_code"]] = codes.get(r["error_code"], 0) + 1
    fails = " ".join("%s:%d" % kv for kv in sorted(codes.items())) or "-"
    return [str(n), pct(len(correct))] + fast + [geo] + fails.split(" ")


def read_jsonl(path):
    with open(path) as f:
        return [json.loads(l) for l in f if l.strip()]


def test_kgym_eval_kernelbench_folder(kernelbench_daemon, tmp_path):
    probs, cands = str(tmp_path / "problems"), str(tmp_path / "candidates")
    write_layout(probs, 0)
    write_layout(cands, 1)
    out = str(tmp_path / "results.jsonl")
    args = [probs, "-c", cands, "-o", out, "-s", kernelbench_daemon.socket, "--backend", "torch",
            "--device", "cpu", "--field", "num_correct_trials=5", "--field", "num_perf_trials=5",
            "--field", "num_warmup=1", "-j", "3"]
    rc, stdout, stderr = kgym_eval(*args)
    assert rc == 0, stderr
    assert "5 tasks: 0 stored results reused, 5 to evaluate" in stderr
    assert "done" not in stderr                  # no terminal: no progress line
    recs = read_jsonl(out)
    assert sorted(r["key"] for r in recs) == sorted(PROBLEMS)
    by = {r["key"]: r["result"] for r in recs}
    assert by["level1/1_ReLU"]["correctness"] and by["level1/2_Add"]["correctness"]
    assert by["level2/2_Sum"]["correctness"]
    assert by["level1/3_Scale"]["error_code"] == "CORRECTNESS_ERROR"
    assert by["level2/1_Tanh"]["error_code"] == "COMPILATION_ERROR"
    rows = table_rows(stdout)
    assert set(rows) == {"1", "2", "all"}
    assert rows["1"][1:3] == ["3", "66.7%"] and rows["2"][1:3] == ["2", "50.0%"]
    assert rows["all"][1:3] == ["5", "60.0%"]
    assert rows["all"][-2:] == ["COMPILATION_ERROR:1", "CORRECTNESS_ERROR:1"]
    for level in ("1", "2"):
        assert rows[level][1:] == expected_row([r for r in recs if str(r["level"]) == level])
    assert rows["all"][1:] == expected_row(recs)

    # Again: every result is reused, nothing reaches the daemon.
    with kgym.Client(kernelbench_daemon.socket) as c:
        before = c.stats()["submitted_total"]
        rc, stdout2, stderr = kgym_eval(*args)
        assert rc == 0 and "5 stored results reused, 0 to evaluate" in stderr
        assert stdout2 == stdout and len(read_jsonl(out)) == 5
        assert c.stats()["submitted_total"] == before

        # A changed candidate is evaluated, alone.
        with open(os.path.join(cands, "level1", "3_Scale.py"), "w") as f:
            f.write(candidate("x", "x * 2.5"))
        rc, stdout3, stderr = kgym_eval(*args)
        assert rc == 0 and "4 stored results reused, 1 to evaluate" in stderr, stderr
        assert c.stats()["submitted_total"] == before + 1
        rows = table_rows(stdout3)
        assert rows["1"][1:3] == ["3", "100.0%"] and rows["all"][-1:] == ["COMPILATION_ERROR:1"]

    # A JSONL of tasks with the same content names the same tasks: all reused.
    tasks = str(tmp_path / "tasks.jsonl")
    with open(tasks, "w") as f:
        for key in PROBLEMS:
            f.write(json.dumps({"key": key, "reference_code": read(os.path.join(probs, key + ".py")),
                                "kernel_code": read(os.path.join(cands, key + ".py"))}) + "\n")
    rc, stdout4, stderr = kgym_eval(*([tasks] + args[3:]))
    assert rc == 0 and "5 stored results reused, 0 to evaluate" in stderr, stderr
    assert stdout4 == stdout3

    # --plot: drawn with matplotlib, a clear error without it.
    png = str(tmp_path / "speedups.png")
    rc, _, stderr = kgym_eval(*(args + ["--plot", png]))
    if importlib.util.find_spec("matplotlib") is None:
        assert rc == 2 and "--plot needs matplotlib" in stderr and not os.path.exists(png)
    else:
        assert rc == 0 and os.path.getsize(png) > 0


def test_kgym_eval_usage_errors(tmp_path):
    rc, _, err = kgym_eval(str(tmp_path / "missing"))
    assert rc == 2 and "no such folder or file" in err
    (tmp_path / "p").mkdir()
    rc, _, err = kgym_eval(str(tmp_path / "p"))
    assert rc == 2 and "no level folders" in err
    bad = tmp_path / "t.jsonl"
    bad.write_text('{"key": "a", "kernel_code": "x"}\n')
    rc, _, err = kgym_eval(str(bad))
    assert rc == 2 and "field 'reference_code'" in err and "t.jsonl:1" in err
