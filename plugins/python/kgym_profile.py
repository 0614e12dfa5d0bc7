"""kgym_profile.py -- what a candidate's CUPTI tally says (advisory: it is
the candidate process's word, so it can only catch, never excuse): which
kernels are the candidate's own, and the decoy, PyTorch-fallback and
hidden-work judgements on the tally.  Used by the supervisor."""


# Namespaces of library kernels: a mangled name under one of them is never
# the candidate's, whatever its last component is called.
LIBRARY_NAMESPACES = {"at", "c10", "cub", "thrust", "cutlass", "cute", "torch", "std", "cuda", "cudnn",
                      "cublas", "cublasLt", "flash", "triton", "pytorch_flash", "native", "cusparse",
                      "cufft", "curand", "nvfuser", "xformers", "fbgemm_gpu", "fmha"}


def _mangled_path(name):
    """The components of an Itanium-mangled function name's qualified name
    (_Z3foo..., _ZN2ns3fooE...), or None."""
    if not name.startswith("_Z"):
        return None
    i, nested = 2, name.startswith("_ZN")
    if nested:
        i = 3
        while i < len(name) and name[i] in "KVrRO":    # cv- and ref-qualifiers
            i += 1
    parts = []
    while i < len(name) and name[i].isdigit():
        j = i
        while j < len(name) and name[j].isdigit():
            j += 1
        n = int(name[i:j])
        parts.append(name[j:j + n])
        i = j + n
        if not nested:
            break
    return parts or None


def is_custom_kernel(name, custom):
    """Is the GPU kernel `name` one kernel_code defines?  Triton kernels and
    extern "C" ones keep their identifier; C++ ones are mangled, with the
    identifier as the last component of a path outside the libraries'
    namespaces."""
    if name in custom:
        return True
    path = _mangled_path(name)
    return bool(path) and path[-1] in custom and path[0] not in LIBRARY_NAMESPACES


def min_custom_share(req, limits):
    """The share of GPU kernel time a "triton" or "cuda" candidate's own
    kernels must take, or 0: a figure in the metadata only.  The task's own
    min_custom_share, else [plugin.python]'s (default 0): a torch GEMM with a
    fused Triton epilogue is an honest candidate whose kernels take a few
    percent, so coverage is the reward function's to weigh unless the task
    opts in."""
    v = req.get("min_custom_share")
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return float(v)
    return float(limits.get("min_custom_share", 0.0))


def judge_profile(profile, custom, backend, kstats, min_share):
    """What the candidate's profiled calls say (kgymd-protocol(7), "Reward hacks"): the metadata
    (KernelGYM's names) and the hack, if any -- a decoy (its own kernels
    never ran), a PyTorch fallback (its kernels a small share of the GPU
    time), or work outside the timed window (more kernel time per call than
    the timed median: another stream, or a forged time)."""
    calls = max(1, int(profile.get("calls") or 1))
    kernels = profile.get("kernels") or []
    total_ns = sum(k["total_ns"] for k in kernels) + int(profile.get("other_ns") or 0)
    mine = [k for k in kernels if is_custom_kernel(k["name"], custom)]
    custom_ns = sum(k["total_ns"] for k in mine)
    table = [{"name": k["name"], "calls": k["calls"], "total_us": k["total_ns"] / 1e3, "grid": k["grid"],
              "block": k["block"], "registers": k["registers"], "shared_bytes": k["shared_bytes"],
              "custom": k in mine} for k in sorted(kernels, key=lambda k: -k["total_ns"])]
    share = custom_ns / total_ns if total_ns > 0 else 0.0
    meta = {"num_custom_kernels": len(mine), "num_total_kernels": len(kernels),
            "custom_kernel_cuda_time_in_profiling_us": custom_ns / 1e3,
            "total_kernel_run_time_in_profiling_us": total_ns / 1e3,
            "custom_kernel_share": round(share, 4), "profiled_calls": calls,
            "custom_kernel_names": custom}
    gpu_ms = total_ns / 1e6 / calls
    hack = None
    if backend in ("triton", "cuda"):
        if custom_ns == 0:
            hack = {"kind": "decoy_kernel",
                    "detail": "none of the kernels kernel_code defines (%s) ran in %d profiled calls; %d other "
                              "kernel(s) did the work" % (", ".join(custom) or "none", calls, len(kernels))}
        elif min_share > 0 and share < min_share:
            hack = {"kind": "pytorch_fallback",
                    "detail": "kernel_code's own kernels took %.1f%% of the GPU kernel time (%.1f of %.1f us), "
                              "below the %.0f%% a %s candidate must do itself; the rest: %s" %
                              (100 * share, custom_ns / 1e3, total_ns / 1e3, 100 * min_share, backend,
                               ", ".join(t["name"][:80] for t in table if not t["custom"])[:600])}
    median = (kstats or {}).get("median_ms")
    if hack is None and isinstance(median, (int, float)) and gpu_ms > 1.5 * median + 0.005:
        hack = {"kind": "timing_mismatch",
                "detail": "the kernels of one call take %.4f ms on the GPU, but the timed median is %.4f ms: "
                          "work ran outside the timed window (another stream or thread) or the time was forged"
                          % (gpu_ms, median)}
    return table, meta, gpu_ms, hack
