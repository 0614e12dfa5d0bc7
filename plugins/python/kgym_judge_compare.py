"""kgym_judge_compare.py -- the judge's arithmetic: tolerances, the comparison
of a call's outputs with the reference's, and the timing statistics.

Split from kgym_judge.py (the judge process's protocol and verdicts) so that
each file has one job.  Like kgym_judge.py, it is imported only by the
judge, after its fork: never in an executor's address space (the name's
prefix is what tests/exploits/python/seed_scan.py looks for).
"""

import math

import torch

from kgym_common import dtype_name, finite


class Verdict(Exception):
    """The job's end, decided: raised with the result's fields."""

    def __init__(self, code, message, hack=None, completed=True):
        super().__init__(message)
        self.code, self.message, self.hack, self.completed = code, message, hack, completed


class OutputsReused(Exception):
    """A round of k calls whose outputs share memory in the executor's
    arena (a buffer the model keeps and returns every call, a CUDA graph's
    static output): by the time the judge copies them after DONE, every
    call shows the last one's values.  Not a verdict: the timing goes on
    with one call per round, where the judge copies each call's outputs
    before the next call runs."""


# Per-dtype default tolerances (kgymd-protocol(7), RESULTS): (atol, rtol).
TOLERANCES = {
    "float64": (1e-8, 1e-8), "complex128": (1e-8, 1e-8),
    "float32": (1e-4, 1e-4), "complex64": (1e-4, 1e-4),
    "float16": (1e-2, 1e-2), "bfloat16": (1e-2, 1e-2),
}

def tolerance(dt, job):
    name = dtype_name(dt)
    atol, rtol = TOLERANCES.get(name, (0.0, 0.0))
    if name in TOLERANCES:
        if isinstance(job.get("atol"), (int, float)):
            atol = float(job["atol"])
        if isinstance(job.get("rtol"), (int, float)):
            rtol = float(job["rtol"])
    return atol, rtol


def compare_tensor(ref, got, job):
    """{ok, max_abs_err, max_rel_err, mismatches, first_bad_index, message}."""
    r = {"ok": False, "max_abs_err": None, "max_rel_err": None, "mismatches": 0, "first_bad_index": None}
    if tuple(ref.shape) != tuple(got.shape):
        r["message"] = "shape %s, expected %s" % (list(got.shape), list(ref.shape))
        r["mismatches"] = ref.numel()
        return r
    if ref.dtype != got.dtype:
        r["message"] = "dtype %s, expected %s" % (dtype_name(got.dtype), dtype_name(ref.dtype))
        r["mismatches"] = ref.numel()
        return r
    atol, rtol = tolerance(ref.dtype, job)
    if ref.is_complex():
        ref, got = torch.view_as_real(ref), torch.view_as_real(got)
    if ref.is_floating_point():
        rd, gd = ref.double().reshape(-1), got.double().reshape(-1)
        diff = (gd - rd).abs()
        fin = torch.isfinite(rd)
        bad = torch.where(fin, ~(diff <= atol + rtol * rd.abs()),
                          torch.where(torch.isnan(rd), ~torch.isnan(gd), gd != rd))
        if bool(fin.any()):
            dfin = torch.where(fin, diff, torch.zeros_like(diff))
            r["max_abs_err"] = finite(float(dfin.max())) if bool(torch.isfinite(dfin).all()) else None
            nz = fin & (rd != 0)
            rel = torch.where(nz, dfin / torch.where(nz, rd.abs(), torch.ones_like(rd)), torch.zeros_like(rd))
            r["max_rel_err"] = finite(float(rel.max()))
        else:
            r["max_abs_err"] = r["max_rel_err"] = 0.0
    else:
        rd, gd = ref.reshape(-1), got.reshape(-1)
        bad = rd != gd
        r["max_abs_err"] = float((rd.double() - gd.double()).abs().max()) if rd.numel() else 0.0
        r["max_rel_err"] = None
    n = int(bad.sum())
    r["mismatches"] = n
    if n == 0:
        r["ok"] = True
        return r
    first = int(bad.nonzero()[0][0])
    r["first_bad_index"] = first
    coords, rest = [], first
    for s in reversed(list(ref.shape)):
        coords.append(rest % s if s else 0)
        rest = rest // s if s else 0
    exp, gv = rd[first].item(), gd[first].item()
    r["message"] = ("%d of %d elements differ beyond atol=%g rtol=%g (first at %s: expected %r, got %r; "
                    "max abs error %s, max rel error %s)" % (n, rd.numel(), atol, rtol, list(reversed(coords)),
                                                             exp, gv, r["max_abs_err"], r["max_rel_err"]))
    return r


def compare_outputs(ref_outs, got_outs, job):
    res = {"ok": True, "max_abs_err": 0.0, "max_rel_err": 0.0, "mismatches": 0, "first_bad_index": None}
    for k, (rt, gt) in enumerate(zip(ref_outs, got_outs)):
        c = compare_tensor(rt, gt, job)
        for key in ("max_abs_err", "max_rel_err"):
            if c[key] is None or res[key] is None:
                res[key] = None if c[key] is None and key == "max_abs_err" and not c["ok"] else res[key]
            else:
                res[key] = max(res[key], c[key])
        res["mismatches"] += c["mismatches"]
        if not c["ok"] and res["ok"]:
            res.update(ok=False, first_bad_index=c["first_bad_index"], output=k,
                       message="output %d: %s" % (k, c["message"]))
    return res


def same_tensor(a, b):
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.is_floating_point() or a.is_complex():
        return bool(((a == b) | (torch.isnan(a) & torch.isnan(b))).all())
    return bool((a == b).all())


def nearly_same(a, b, rtol=1e-3):
    """The decoy check's test: b within rtol of a, elementwise, relative
    to each element and to the largest magnitude of a (exact for integer
    and boolean outputs; NaN matches NaN).  Independent of the problem's
    tolerance, which can be coarse beside the outputs' own scale."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if not (a.is_floating_point() or a.is_complex()):
        return bool((a == b).all())
    a64, b64 = a.to(torch.complex128 if a.is_complex() else torch.float64), \
        b.to(torch.complex128 if b.is_complex() else torch.float64)
    finite = torch.isfinite(a64)
    scale = float(a64[finite].abs().max()) if bool(finite.any()) else 0.0
    near = (a64 - b64).abs() <= rtol * (a64.abs() + scale)
    same = (a64 == b64) | (torch.isnan(a64) & torch.isnan(b64))
    return bool((near | same).all())


def stats(samples_ms):
    """kgymd-protocol(7)'s timing block: median and a 95% interval of the median
    from order statistics (none below 6 samples)."""
    v = sorted(samples_ms)
    n = len(v)
    if n == 0:
        return None
    med = v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2
    mean = sum(v) / n
    std = math.sqrt(sum((x - mean) ** 2 for x in v) / (n - 1)) if n > 1 else 0.0
    half = 0.98 * math.sqrt(n)
    lo = max(1, int(math.floor(n / 2 - half)))
    hi = min(n, int(math.ceil(1 + n / 2 + half)))
    rel = max(med - v[lo - 1], v[hi - 1] - med) / med if n >= 6 and med > 0 else None
    return {"median_ms": med, "mean_ms": mean, "std_ms": std, "min_ms": v[0], "max_ms": v[-1],
            "ci95_ms": [v[lo - 1], v[hi - 1]], "ci95_rel": rel, "trials": n}


def median(v):
    v = sorted(v)
    return v[len(v) // 2] if v else None
