"""kgym.rewards, kgym.feedback and kgym.extract_kernel: pure functions, no daemon.

The reward cases are drkernel's published formulas worked by hand, with
drkernel's default configuration (correct and performance weights 0.5,
speedup_eps 0.01, speedup bounded to [0, 3], penalty_score 0, time coverage
with weight 0.5): calculate_reward_like_kernel's tiers, and
calculate_reward_weighted / calculate_reward_speedup.
"""
if __name__ == "__main__":      # run by make check: pytest on this file
    import os
    import sys
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import kgympytest
    sys.exit(kgympytest.main(__file__))

import pytest

import kgym
from kgym import rewards
from kgym.rewards import RewardConfig


def res(status="completed", compiled=True, correct=True, speedup=None, **kw):
    d = {"status": status, "compiled": compiled, "correctness": correct, "speedup": speedup,
         "decoy_kernel": kw.pop("decoy", False)}
    d.update(kw)
    return d


COV = {"metadata": {"num_custom_kernels": 1, "num_total_kernels": 2,
                    "custom_kernel_cuda_time_in_profiling_us": 60.0, "total_kernel_run_time_in_profiling_us": 80.0}}

# (case, result, like_kernel, weighted, speedup)
CASES = [
    ("failed (compile error)", res("failed", False, False, error_code="COMPILATION_ERROR"), -1.0, 0.0, 0.0),
    ("completed, not compiled", res(compiled=False, correct=False), -0.5, 0.0, 0.0),
    ("incorrect", res(correct=False, error_code="CORRECTNESS_ERROR"), -0.3, 0.0, 0.0),
    ("correct 3.5x", res(speedup=3.5), 1.0, 1.0, 2.0),
    ("correct 2x", res(speedup=2.0), 0.8, 1.0, 1.5),
    ("correct 1.5x", res(speedup=1.5), 0.6, 1.0, 1.25),
    ("correct 1.2x", res(speedup=1.2), 0.4, 1.0, 1.1),
    ("correct 1.005x (under 1+eps)", res(speedup=1.005), 0.2, 0.5, 1.0025),
    ("correct 0.8x", res(speedup=0.8), -0.1, 0.5, 0.9),
    ("correct 10x (bounded)", res(speedup=10.0), 1.0, 1.0, 2.0),
    ("correct, not timed (-1)", res(speedup=-1.0), -0.1, 0.5, 0.5),
    ("correct 1.5x, time coverage 0.75", res(speedup=1.5, **COV), 0.6, 1.375, 1.625),
    ("decoy", res(speedup=2.0, decoy=True), -1.0, 0.0, 0.0),
    ("reward hack", res(correct=False, speedup=4.0, error_code="REWARD_HACK"), -1.0, 0.0, 0.0),
    ("incorrect but timed 2.5x", res(correct=False, speedup=2.5, error_code="CORRECTNESS_ERROR"), -0.3, 0.0, 0.0),
    ("cancelled", res("failed", False, False, error_code="CANCELLED"), -1.0, 0.0, 0.0),
]


@pytest.mark.parametrize("case,result,like,weighted,speed", CASES, ids=[c[0] for c in CASES])
def test_drkernel_formulas(case, result, like, weighted, speed):
    assert rewards.like_kernel(result)["score"] == pytest.approx(like)
    assert rewards.weighted(result)["score"] == pytest.approx(weighted)
    assert rewards.speedup(result)["score"] == pytest.approx(speed)
    # drkernel's names, and a kgym.Result in place of the dict, give the same.
    r = kgym.Result.from_dict(result)
    assert rewards.compute(r, "calculate_reward_like_kernel")["score"] == pytest.approx(like)
    assert rewards.compute(r, "calculate_reward_weighted")["reward"] == pytest.approx(weighted)
    assert rewards.compute(r, "calculate_reward_speedup")["score"] == pytest.approx(speed)


# (case, config, result, function, expected)
CONFIG_CASES = [
    ("penalty_score -1", RewardConfig(penalty_score=-1.0), res("failed", False, False), "weighted", -1.0),
    ("penalty_score -1, decoy", RewardConfig(penalty_score=-1.0), res(speedup=2, decoy=True), "speedup", -1.0),
    ("number coverage", RewardConfig(coverage="number"), res(speedup=1.5, **COV), "weighted", 1.25),
    ("coverage off", RewardConfig(coverage=None), res(speedup=1.5, **COV), "weighted", 1.0),
    ("coverage weight 0.25", RewardConfig(coverage_weight=0.25), res(speedup=1.5, **COV), "speedup", 1.4375),
    ("speedup lower bound 1", RewardConfig(speedup_lower=1.0), res(speedup=0.8), "speedup", 0.5),
    ("speedup upper bound 2", RewardConfig(speedup_upper=2.0), res(speedup=3.5), "speedup", 1.5),
    ("weights 1/0", RewardConfig(correct_weight=1.0, performance_weight=0.0), res(speedup=2.0), "weighted", 1.0),
    ("speedup_eps 0.1", RewardConfig(speedup_eps=0.1), res(speedup=1.05), "weighted", 0.5),
    # drkernel's raw formulas: hacks judged by correctness alone, speed not gated.
    ("raw: hack", RewardConfig(hack_is_decoy=False), res(correct=False, speedup=4.0, error_code="REWARD_HACK"),
     "like_kernel", -0.3),
    ("raw: incorrect but fast", RewardConfig(speed_needs_correct=False), res(correct=False, speedup=4.0),
     "weighted", 0.5),
    ("raw: incorrect but fast, speedup", RewardConfig(speed_needs_correct=False), res(correct=False, speedup=4.0),
     "speedup", 1.5),
    ("like_kernel's own penalties", RewardConfig(correctness_fail=-0.7), res(correct=False), "like_kernel", -0.7),
    ("like_kernel's tiers", RewardConfig(tiers=((2.0, 5.0),)), res(speedup=2.5), "like_kernel", 5.0),
]


@pytest.mark.parametrize("case,cfg,result,fn,expected", CONFIG_CASES, ids=[c[0] for c in CONFIG_CASES])
def test_reward_config(case, cfg, result, fn, expected):
    assert rewards.compute(result, fn, cfg)["score"] == pytest.approx(expected)


def test_reward_dict_is_flat_scalars():
    out = rewards.weighted(res(speedup=1.5, **COV))
    for key in ("score", "reward", "correctness", "compiled", "speedup", "coverage", "time_coverage",
                "number_coverage", "decoy_kernel", "error_code"):
        assert key in out
        assert isinstance(out[key], (bool, int, float, str)), key
    assert out["time_coverage"] == pytest.approx(0.75) and out["number_coverage"] == pytest.approx(0.5)
    assert rewards.coverage({"status": "completed"}) == {"time_coverage": 0.0, "number_coverage": 0.0}


def test_reward_errors():
    with pytest.raises(ValueError, match="like_kernel, weighted, speedup"):
        rewards.compute(res(), "nope")
    with pytest.raises(ValueError, match="coverage"):
        rewards.weighted(res(speedup=1.0), RewardConfig(coverage="bogus"))
    with pytest.raises(TypeError, match="result"):
        rewards.weighted(42)
    # A response without code is never sent anywhere: the penalty, at once.
    nocode = rewards.compute_score("kb", "Sorry, no kernel today.", "reference", None, reward="like_kernel",
                                   address="/nonexistent/kgymd.sock")
    assert nocode["score"] == -1.0 and nocode["error_code"] == "NO_CODE"
    assert rewards.penalty("like_kernel", error_code="NO_CODE") == dict(
        rewards.like_kernel({"status": "failed", "error_code": "NO_CODE"}))


# ------------------------------------------------------------ feedback

LOG_HEAD = "kernel.cu(3): error: expected a ';'\n"
LOG_TAIL = "\n2 errors detected in the compilation of kernel.cu."


def big_log_result():
    filler = "kernel.cu(12): warning: variable 'x' was declared but never referenced\n"
    body = filler * (1_000_000 // len(filler) + 1)
    log = LOG_HEAD + body + LOG_TAIL
    assert len(log) > 1_000_000
    return {"task_id": "t", "status": "failed", "compiled": False, "correctness": False,
            "error_code": "COMPILATION_ERROR", "error_message": log}


@pytest.mark.parametrize("limit", [0, 1, 10, 64, 100, 300, 500, 2048, 4096, 100_000])
def test_feedback_bound_on_a_1mb_compiler_log(limit):
    r = big_log_result()
    text = kgym.feedback(r, max_chars=limit)
    assert len(text) <= limit
    if limit >= 300:
        assert "COMPILATION_ERROR" in text
        assert "expected a ';'" in text            # the log's head: the first error
        assert "2 errors detected" in text         # and its tail
        m = text.split("[... ")[1].split(" characters cut")[0]
        assert int(m) >= len(r["error_message"]) - limit
    if limit >= 2048:
        assert len(text) >= limit - 64             # the room is used, not wasted


def test_feedback_default_bound_and_short_errors_whole():
    assert len(kgym.feedback(big_log_result())) <= 2048
    short = {"status": "failed", "compiled": False, "error_code": "COMPILATION_ERROR",
             "error_message": "kernel_code line 2: SyntaxError: invalid syntax"}
    text = kgym.feedback(short)
    assert "kernel_code line 2: SyntaxError: invalid syntax" in text and "cut" not in text


def test_feedback_mismatch_timing_and_hack():
    r = {"status": "completed", "compiled": True, "correctness": False, "error_code": "CORRECTNESS_ERROR",
         "error_message": "output 'out' is wrong at index [3, 17]: expected 1.5, got 0",
         "correctness_trials": [{"trial": 0, "passed": True},
                                {"trial": 1, "passed": False, "output": "out", "first_bad_index": [3, 17],
                                 "mismatches": 12, "max_abs_err": 1.5, "max_rel_err": 1.0}],
         "timing": {"kernel": {"median_ms": 0.25, "trials": 50, "ci95_ms": [0.24, 0.26]},
                    "reference": {"median_ms": 0.5, "trials": 50}},
         "speedup": 2.0, "metadata": {"hack": {"kind": "stale_memory", "detail": "outputs left from before"}}}
    text = kgym.feedback(r, max_chars=2048)
    assert "expected 1.5, got 0" in text
    assert "trial 1" in text and "[3, 17]" in text and "12 mismatching" in text
    assert "0.25 ms" in text and "0.5 ms" in text and "2x" in text
    assert "stale_memory" in text and "outputs left from before" in text
    ok = kgym.feedback({"status": "completed", "compiled": True, "correctness": True, "speedup": 1.8,
                        "kernel_runtime": 1.0, "reference_runtime": 1.8})
    assert "correct" in ok and "1.8x" in ok and "Error" not in ok


# ------------------------------------------------------------ extracting the kernel

RESPONSES = [
    ("last fenced block", "Try:\n```python\nfirst = 1\n```\nBetter:\n```python\nclass ModelNew: pass\n```\nDone.",
     "class ModelNew: pass\n"),
    ("fence without language", "```\nclass ModelNew: pass\n```", "class ModelNew: pass\n"),
    ("unterminated last fence", "```python\nx = 1\n```\n```python\nclass ModelNew: pass\n",
     "class ModelNew: pass\n"),
    ("marked section", "# Kernel Implementation\nclass ModelNew: pass\n# End\ntrailing words",
     "class ModelNew: pass\n"),
    ("marked section with a fence", "# Generated kernel:\n```python\nclass ModelNew: pass\n```\n",
     "class ModelNew: pass\n"),
    ("thinking ignored", "<think>```python\nwrong = 1\n```</think>\n```python\nclass ModelNew: pass\n```",
     "class ModelNew: pass\n"),
    ("no code", "I cannot write this kernel.", None),
    ("code only in thinking", "<think>```python\nclass ModelNew: pass\n```</think> no answer", None),
]


@pytest.mark.parametrize("case,response,expected", RESPONSES, ids=[c[0] for c in RESPONSES])
def test_extract_kernel(case, response, expected):
    assert kgym.extract_kernel(response) == expected


def test_errors_name_the_field():
    from kgym.errors import field_of
    assert field_of("field 'payload': 'action': expected a string") == "payload.action"
    assert field_of("field 'task_id' is missing: expected a string") == "task_id"
    assert field_of("field 'payload': num_perf_trials: expected an integer from 1 to 1000") == \
        "payload.num_perf_trials"
    assert field_of("field 'v': expected an integer, got string") == "v"
    assert field_of("no task with task_id 'x'") is None

