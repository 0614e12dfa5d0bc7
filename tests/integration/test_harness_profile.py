#!/usr/bin/env python3
"""The python backend's kernel classification and profile verdicts, without
a GPU: kgym_static.custom_kernel_names on the examples and on hand-written
sources, kgym_harness.is_custom_kernel on real kernel names (Triton's,
mangled C++ of a load_inline extension, PyTorch's and cuBLAS's), and
kgym_harness.judge_profile on made-up CUPTI tallies of the shape
libkgym_kprobe.so reports -- a decoy, a PyTorch fallback, work hidden from
the timer, and honest candidates that must not be flagged.  The GPU side
(CUPTI records of real calls) is tests/gpu/kernelbench_tests.py's.
"""
import glob
import os
import sys

import kgymtest as k

sys.path.insert(0, os.path.join(k.srcdir(), "plugins", "python"))
import kgym_harness as h  # noqa: E402
from kgym_static import custom_kernel_names  # noqa: E402

TORCH_RELU = "_ZN2at6native29vectorized_elementwise_kernelILi4EZZZNS0_15launch_clamp_scalarE"
TORCH_GEMM = "sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x128x32_warpgroupsize1x1x1_execute_segment_k_off"


def kern(name, calls, total_ns):
    return {"name": name, "calls": calls, "total_ns": total_ns, "grid": [1, 1, 1], "block": [128, 1, 1],
            "registers": 16, "shared_bytes": 0}


def profile(*kernels, calls=3):
    return {"status": "ok", "calls": calls, "kernels": list(kernels), "other_calls": 0, "other_ns": 0,
            "dropped": 0}


def test_custom_names_of_examples():
    for f in sorted(glob.glob(os.path.join(k.srcdir(), "examples", "kernelbench", "*", "*.py"))):
        backend = os.path.basename(f).split("_")[0]
        if backend not in ("triton", "cuda"):
            continue
        with open(f) as fh:
            names = custom_kernel_names(fh.read(), backend)
        k.check(len(names) >= 1, "%s: no kernel names found" % f)


def test_custom_names_cuda_forms():
    src = ('import torch\nsrc = """\ntemplate <int B> __global__ void __launch_bounds__(256) '
           'soft(float *y) {}\nextern "C" __global__ void plain_k(int n) {}\n'
           '__device__ float helper(float x) { return x; }\n"""\n')
    k.check(custom_kernel_names(src, "cuda") == ["plain_k", "soft"], custom_kernel_names(src, "cuda"))
    k.check(custom_kernel_names(src, "torch") == [], "torch candidates define no kernels")
    k.check(custom_kernel_names("def broken(:\n", "triton") == [], "unparsable source")
    tri = "import triton\n@triton.jit\ndef k1(x):\n    pass\n@triton.autotune(configs=[], key=[])\n" \
          "@triton.jit\ndef k2(x):\n    pass\ndef not_a_kernel():\n    pass\n"
    k.check(custom_kernel_names(tri, "triton") == ["k1", "k2"], custom_kernel_names(tri, "triton"))


def test_is_custom_kernel():
    custom = ["relu_kernel", "vectorized_elementwise_kernel", "gemm"]
    k.check(h.is_custom_kernel("relu_kernel", custom), "Triton / extern C: the identifier itself")
    k.check(h.is_custom_kernel("_Z11relu_kernelPKfPfi", custom), "a global C++ kernel, mangled")
    k.check(h.is_custom_kernel("_ZN6mykern11relu_kernelEPKfPfi", custom), "in the candidate's namespace")
    k.check(h.is_custom_kernel("_Z11relu_kernelIfEvPKT_PS0_i", custom), "a template")
    k.check(not h.is_custom_kernel(TORCH_RELU, custom), "PyTorch's kernel, even when the candidate "
            "names one of its own after it")
    k.check(not h.is_custom_kernel("_Z12relu_kernel2Pf", custom), "another identifier")
    k.check(not h.is_custom_kernel(TORCH_GEMM, custom), "cuBLAS's kernel contains 'gemm' but is not 'gemm'")
    k.check(not h.is_custom_kernel("relu_kernel_v2", custom), "a prefix is not the name")


def test_decoy():
    _, meta, _, hack = h.judge_profile(profile(kern(TORCH_RELU, 3, 30000)), ["relu_kernel"], "triton",
                                       {"median_ms": 0.02}, 0.5)
    k.check(hack is not None and hack["kind"] == "decoy_kernel", hack)
    k.check(meta["num_custom_kernels"] == 0 and meta["num_total_kernels"] == 1, meta)


def test_fallback():
    p = profile(kern(TORCH_GEMM, 3, 3000000), kern("copy_kernel", 3, 30000))
    table, meta, _, hack = h.judge_profile(p, ["copy_kernel"], "triton", {"median_ms": 1.0}, 0.5)
    k.check(hack is not None and hack["kind"] == "pytorch_fallback", hack)
    k.check(abs(meta["custom_kernel_share"] - 30000 / 3030000) < 1e-3, meta)
    k.check([t["custom"] for t in table] == [False, True], table)
    _, _, _, hack = h.judge_profile(p, ["copy_kernel"], "triton", {"median_ms": 1.0}, 0.0)
    k.check(hack is None, "min_custom_share 0 turns the check off: %r" % (hack,))


def test_coverage_is_a_figure_unless_asked():
    """A torch GEMM with a small fused Triton epilogue (an honest level-2
    candidate) is no pytorch_fallback by default: the share is a figure in
    the metadata; a task (or [plugin.python]) opts in with min_custom_share."""
    share = h.min_custom_share
    k.check(share({}, {}) == 0.0, "default: no threshold")
    k.check(share({}, {"min_custom_share": 0.3}) == 0.3, "[plugin.python]'s")
    k.check(share({"min_custom_share": 0.6}, {"min_custom_share": 0.3}) == 0.6,
            "the task's own overrides the plugin's")
    k.check(share({"min_custom_share": 0}, {"min_custom_share": 0.3}) == 0.0, "a task may turn it off")
    k.check(share({"min_custom_share": True}, {}) == 0.0, "a bool is no share")
    p = profile(kern(TORCH_GEMM, 3, 3000000), kern("copy_kernel", 3, 30000))
    _, meta, _, hack = h.judge_profile(p, ["copy_kernel"], "triton", {"median_ms": 1.0}, share({}, {}))
    k.check(hack is None, "an honest fused epilogue is not flagged by default: %r" % (hack,))
    k.check(meta["num_custom_kernels"] == 1 and meta["num_total_kernels"] == 2 and
            meta["custom_kernel_cuda_time_in_profiling_us"] == 30.0 and
            meta["total_kernel_run_time_in_profiling_us"] == 3030.0, meta)


def test_hidden_work():
    p = profile(kern("relu_kernel", 3, 3 * 40000))           # 0.04 ms per call
    _, _, gpu_ms, hack = h.judge_profile(p, ["relu_kernel"], "triton", {"median_ms": 0.004}, 0.5)
    k.check(abs(gpu_ms - 0.04) < 1e-9, gpu_ms)
    k.check(hack is not None and hack["kind"] == "timing_mismatch", hack)


def test_honest_candidates_pass():
    cases = [
        (profile(kern("relu_kernel", 3, 3 * 40000)), ["relu_kernel"], {"median_ms": 0.05}),
        # its own kernel plus a small torch allocation fill: still mostly its own
        (profile(kern("_Z13matmul_kernelPKfS0_Pfiii", 3, 3 * 900000), kern(TORCH_RELU, 3, 3 * 20000)),
         ["matmul_kernel"], {"median_ms": 1.0}),
    ]
    for p, custom, kstats in cases:
        _, meta, _, hack = h.judge_profile(p, custom, "cuda", kstats, 0.5)
        k.check(hack is None, "flagged an honest candidate: %r %r" % (hack, meta))
        k.check(meta["num_custom_kernels"] == 1, meta)


if __name__ == "__main__":
    k.run([test_custom_names_of_examples, test_custom_names_cuda_forms, test_is_custom_kernel, test_decoy,
           test_fallback, test_coverage_is_a_figure_unless_asked, test_hidden_work, test_honest_candidates_pass])
