"""Reward hack, GPU (the red team's copy skip, 2026-11-25/28, carried to a
GPU past the static checks): code in the candidate's process finds its
executor (gc), computes straight into the judge's output area, says so in
the control page and writes DONE itself -- skipping the executor's copy of
the outputs, which the judge used to subtract from every call's time.

Not in the exploit manifest (it needs the static checks off):
tests/gpu/judge_gpu_tests.py:test_copy_skip_gains_nothing runs it beside
the honest ReLU.  With the judge's arena there is no executor copy, and
nothing executor-side is subtracted: skipping gains nothing."""
import gc

import torch
import torch.nn as nn

_found = []


def _executor():
    if not _found:
        for o in gc.get_objects():
            if type(o).__name__ == "Executor" and getattr(o, "outputs", None) and hasattr(o, "ctl"):
                _found.append(o)
                break
    return _found[0] if _found else None


class ModelNew(nn.Module):
    def forward(self, x):
        ex = _executor()
        if ex is None or ex.slots != 1 or ex.outputs[0].shape != x.shape:
            return torch.relu(x)
        out = ex.outputs[0]
        torch.clamp(x, min=0.0, out=out)
        torch.cuda.synchronize()
        w = ex.ctl.words
        w[8] = (1 << 64) - 1       # CTL_OUTS: "in the output area"
        w[2] = 0                   # STATUS
        w[1] = w[0]                # DONE = GO
        return out
