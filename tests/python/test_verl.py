"""kgym.verl.compute_score loaded by VERL itself.

verl.trainer.ppo.reward.get_custom_reward_fn loads kgym/verl.py from its
path with the config's reward_kwargs, as a training run would, and the
function scores a right and a wrong response against a private kgymd
(torch on the CPU).  Skipped -- not passed -- when verl (with omegaconf)
is not importable; test_kernelbench.py checks the same file loaded the
same way without VERL.
"""
if __name__ == "__main__":      # run by make check: pytest on this file
    import os
    import sys
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import kgympytest
    sys.exit(kgympytest.main(__file__))

import os

import pytest

from conftest import SRCDIR
from test_kernelbench import FIELDS, RELU_OK, RELU_REF, RELU_WRONG, response


def test_verl_loads_compute_score(request):
    pytest.importorskip("verl", reason="verl is not installed in this Python")
    omegaconf = pytest.importorskip("omegaconf", reason="omegaconf (a verl dependency) is not installed")
    kernelbench_daemon = request.getfixturevalue("kernelbench_daemon")
    from verl.trainer.ppo.reward import get_custom_reward_fn
    cfg = omegaconf.OmegaConf.create({"custom_reward_function": {
        "path": os.path.join(SRCDIR, "python", "kgym", "verl.py"), "name": "compute_score",
        "reward_kwargs": {"address": kernelbench_daemon.socket, "backend": "torch", "fields": FIELDS,
                          "reward": "speedup"}}})
    fn = get_custom_reward_fn(cfg)
    good = fn(data_source="kernelbench", solution_str=response(RELU_OK), ground_truth=RELU_REF, extra_info={})
    assert good["correctness"] is True and good["score"] >= 0.5
    bad = fn(data_source="kernelbench", solution_str=response(RELU_WRONG), ground_truth=RELU_REF, extra_info={})
    assert bad["correctness"] is False and bad["score"] == 0.0
