#!/usr/bin/env python3
"""tests/gpu/judge_gpu_tests.py -- the judge's clock on a GPU, against a
candidate that defeats its own process's defences (run past the static
checks, `kgym_harness.py --once --no-static-checks`, device cuda):

  sync_patched_side_stream   torch.cuda.synchronize patched to a no-op and
                             ~20 ms of work left queued on a side stream
                             when DONE is written: correct only with the
                             work on the judge's clock (kernel_runtime
                             >= 10 ms, no speedup), else caught (wrong
                             outputs); correct and fast fails the test
                             (with 20 ms the judge's copy reads mid-work)
  side_stream_honest         the same model with the synchronize left
                             alone: right, and the 20 ms on the clock (the
                             mutant py_executor_copy_unsynced: DONE before
                             the work ends, the output read mid-work)
  sync_patched_short_work    the exploit with ~0.35 ms queued, shorter than
                             the GPU's time slice between processes: the
                             judge's copy reads a right output, so correct
                             and fast fails the test (meant to kill the
                             mutant py_clock_before_clone, which survived
                             it on an H200: tests/mutation/mutants.py)
  copy_skip_gains_nothing    the honest ReLU and one that computes into
                             the judge's output area and writes DONE
                             itself (tests/gpu/candidates/
                             skip_executor_copy_gpu.py): with the judge's
                             arena (metadata.output_arena "on") nothing
                             executor-side is subtracted, so the skip
                             gains nothing (kernel_runtime at least 0.75
                             of the honest one's; the mutant
                             py_arena_off saw it at a fraction)

Builds nothing (KGYM_BUILDDIR, default ./build, for the sandbox library);
the harness runs under KGYM_PYTHON (default /opt/torch/.venv/bin/python3
where it exists, else /usr/bin/python3).
Without a GPU, torch or the sandbox library it reports SKIP (exit 77).
"""
import os
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "integration"))
os.environ.setdefault("KGYM_BUILDDIR", os.path.abspath(os.path.join(here, "..", "..", "build")))
# The harness's interpreter: one with torch (the GPU machine's system
# python3 has none; /opt/torch/.venv's has), unless KGYM_PYTHON names one.
if "KGYM_PYTHON" not in os.environ and os.path.exists("/opt/torch/.venv/bin/python3"):
    os.environ["KGYM_PYTHON"] = "/opt/torch/.venv/bin/python3"
import kgymtest as k  # noqa: E402
import test_python as tp  # noqa: E402

RELU_BIG = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(1024, 1024)]


def get_init_inputs():
    return []
'''


def need_gpu():
    d = "/proc/driver/nvidia/gpus"
    if not (os.path.isdir(d) and os.listdir(d)):
        raise k.Skip("no NVIDIA GPU on this machine (/proc/driver/nvidia/gpus)")


def test_sync_patched_side_stream():
    need_gpu()
    kernel = tp.read(os.path.join(k.srcdir(), "tests", "exploits", "python", "sync_patched_side_stream.py"))
    r = tp.run_once(kernel, backend="torch", reference=RELU_BIG, static_checks=False,
                    request={"device": "cuda", "num_perf_trials": 20, "num_warmup": 2})
    if r.get("correctness") is True:
        k.check(r["kernel_runtime"] >= 10.0 and r["speedup"] < 0.5,
                "the queued work is not on the judge's clock: %s" % tp.show(r))
    else:
        k.check(r.get("error_code") in ("CORRECTNESS_ERROR", "REWARD_HACK"),
                "caught, but not as wrong outputs: %s" % tp.show(r))
    print("  verdict: correctness %s %s, kernel_runtime %s ms" % (r.get("correctness"), r.get("error_code") or "",
                                                                r.get("kernel_runtime")))


def side_stream_candidate(patched, pad_matmuls):
    """The side-stream model of sync_patched_side_stream.py with pad_matmuls
    2048^3 matmuls (~0.35 ms each on an H200) before its ReLU; patched: the
    executor's synchronize made a no-op, as in the exploit, else honest."""
    kernel = tp.read(os.path.join(k.srcdir(), "tests", "exploits", "python", "sync_patched_side_stream.py"))
    kernel = kernel.replace("PAD_MATMULS = 40", "PAD_MATMULS = %d" % pad_matmuls)
    if not patched:
        kernel = kernel.replace("torch.cuda.synchronize = lambda *a, **k: None\n", "")
    return kernel


def test_side_stream_honest():
    # The same work with the executor's synchronize left alone: DONE comes
    # after the side stream's 40 matmuls, so the result is right and the
    # clock holds them.  An executor that wrote DONE before its work ended
    # would have the judge read the output while the side stream still
    # runs (wrong) -- the honest twin of the exploit above.
    need_gpu()
    r = tp.run_once(side_stream_candidate(False, 40), backend="torch", reference=RELU_BIG, static_checks=False,
                    request={"device": "cuda", "num_perf_trials": 20, "num_warmup": 2})
    k.check(r.get("correctness") is True and r["kernel_runtime"] >= 5.0,
            "an honest side stream is not judged right and whole: %s" % tp.show(r))
    print("  verdict: correctness %s, kernel_runtime %s ms" % (r.get("correctness"), r.get("kernel_runtime")))


def test_sync_patched_short_work():
    # The exploit with one matmul of padding (~0.35 ms), short beside the
    # GPU's time slice between processes: the judge's copy then mostly
    # runs after the candidate's work and reads the right output, so only
    # the judge's synchronize before it reads its clock puts all of that
    # work on the clock.  Measured against its honest twin (the executor's
    # synchronize left alone), in the same run: the cheat's time must be at
    # least 0.7 of the honest one's.  On an H200 the cheat took 0.84-1.0 of
    # its twin's time, and about 0.5 with the judge's clock read before its
    # synchronize (mutant py_clock_before_clone): part of the work had
    # left the clock.  (With four matmuls the copy read mid-work: caught
    # either way, so such a test could not tell the mutant apart.)
    need_gpu()
    req = {"device": "cuda", "num_perf_trials": 20, "num_warmup": 2, "clock_trace": True}
    honest = tp.run_once(side_stream_candidate(False, 1), backend="torch", reference=RELU_BIG, static_checks=False,
                         request=req)
    r = tp.run_once(side_stream_candidate(True, 1), backend="torch", reference=RELU_BIG, static_checks=False,
                    request=req)
    med = (lambda v: sorted(v)[len(v) // 2] if v else None)
    for name, x in (("honest", honest), ("cheat", r)):
        m = x.get("metadata", {})
        tr = m.get("clock_trace") or {}
        print("  %s: correctness %s %s, kernel_runtime %s ms; raw timed p50 %s ms, calibration p50 %s ms, "
              "calls per round %s, %s" % (
                  name, x.get("correctness"), x.get("error_code") or "", x.get("kernel_runtime"),
                  med(tr.get("timed") or []), med(tr.get("calibration") or []), m.get("calls_per_round"),
                  x.get("error_message") or ""))
    k.check(honest.get("correctness") is True, "the honest twin is not judged right: %s" % tp.show(honest))
    if r.get("correctness") is True:
        k.check(r["kernel_runtime"] >= 0.7 * honest["kernel_runtime"],
                "the queued work (a matmul) is not all on the judge's clock: cheat %.3f ms, honest twin %.3f ms"
                % (r["kernel_runtime"], honest["kernel_runtime"]))
    else:
        k.check(r.get("error_code") in ("CORRECTNESS_ERROR", "REWARD_HACK"),
                "caught, but not as wrong outputs: %s" % tp.show(r))


RELU_HUGE = RELU_BIG.replace("torch.randn(1024, 1024)", "torch.randn(16384, 16384)")


def test_copy_skip_gains_nothing():
    # One call per GO (the cheat knows no other slot than the first): the
    # handshake's noise is tens of microseconds a call, so the kernel is
    # big (1 GiB in, 1 GiB out, ~0.45 ms on an H200) -- the copy it could
    # skip costs about as much as the kernel itself.
    need_gpu()
    cheat = tp.read(os.path.join(k.srcdir(), "tests", "gpu", "candidates", "skip_executor_copy_gpu.py"))
    honest = tp.relu_candidate("return torch.relu(x)")
    req = {"device": "cuda", "num_perf_trials": 30, "num_warmup": 3, "calls_per_round": 1}
    lim = {"max_output_bytes": 4 << 30, "memory_bytes": 96 << 30}
    res = {name: tp.run_once(code, backend="torch", reference=RELU_HUGE, static_checks=False, request=req,
                             limits=lim)
           for name, code in (("honest", honest), ("cheat", cheat))}
    for name, r in res.items():
        print("  %s: correctness %s %s, kernel_runtime %s ms, speedup %s, output_arena %s" % (
            name, r.get("correctness"), r.get("error_code") or "", r.get("kernel_runtime"), r.get("speedup"),
            r.get("metadata", {}).get("output_arena")))
        print("    arena counts: candidate %s, reference %s; events p50: candidate %s, reference %s" % (
            r.get("metadata", {}).get("candidate_arena"), r.get("metadata", {}).get("reference_arena"),
            r.get("metadata", {}).get("candidate_events_ms_p50"), r.get("metadata", {}).get("reference_events_ms_p50")))
        k.check(r.get("correctness") is True, "%s: %s" % (name, tp.show(r)))
    k.check(res["cheat"]["kernel_runtime"] >= 0.75 * res["honest"]["kernel_runtime"],
            "skipping the executor's copy gained time: %.4f ms against %.4f ms honest" % (
                res["cheat"]["kernel_runtime"], res["honest"]["kernel_runtime"]))
    k.check(res["honest"]["metadata"].get("output_arena") == "on",
            "the arena is not in use: %s" % res["honest"]["metadata"].get("output_arena"))


if __name__ == "__main__":
    k.run([test_sync_patched_side_stream, test_side_stream_honest, test_sync_patched_short_work,
           test_copy_skip_gains_nothing])
