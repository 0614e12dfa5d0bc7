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


def nan_max(a, b):
    """max() of two floats where a NaN wins, as torch's max does (Python's
    max keeps whichever came first)."""
    return a if math.isnan(a) else b if math.isnan(b) else max(a, b)


# Elements compared at a time: the comparison works in float64 with a few
# temporaries per element, so a 6 GiB float32 output compared whole would
# need tens of GiB more device memory than the problem itself.
COMPARE_CHUNK = 1 << 25


def all_close(ref, got, atol, rtol):
    """Every element of got within the tolerance of ref -- compare_tensor's
    rule for finite values, tested in the outputs' own precision
    (float16/bfloat16 in float32): the timed calls' check, where only "all
    right" matters.  |got - ref| <= min(atol + rtol |ref|, the dtype's
    largest value) must hold everywhere: a NaN on either side, or an
    infinity, fails it, and such a "no" -- like any other -- is looked at
    again in float64 by compare_tensor (NaN for NaN, the same infinity), so
    this can only spare work, never fail a call that compare_tensor would
    pass.  Eight elementwise passes a chunk where torch.isclose takes about
    fifteen, and one wait for the answer, not one a chunk: on a 6 GiB
    output this check is most of a timed call's cost."""
    fr, fg = ref.reshape(-1), got.reshape(-1)
    bad = None
    for at in range(0, fr.numel(), COMPARE_CHUNK):
        rd, gd = fr[at:at + COMPARE_CHUNK], fg[at:at + COMPARE_CHUNK]
        if rd.dtype in (torch.float16, torch.bfloat16):
            rd, gd = rd.float(), gd.float()
        err = torch.sub(gd, rd).abs_()
        allowed = torch.abs(rd).mul_(rtol).add_(atol).clamp_(max=torch.finfo(rd.dtype).max)
        # Not "err > allowed": a NaN error must count as a failure.
        chunk_bad = torch.logical_not(err <= allowed).any()
        bad = chunk_bad if bad is None else bad.logical_or_(chunk_bad)
    return bad is None or not bool(bad)


def compare_tensor(ref, got, job, detail=True):
    """{ok, max_abs_err, max_rel_err, mismatches, first_bad_index, message},
    compared COMPARE_CHUNK elements at a time.  detail=False (the timed
    calls): a quick all_close first, and the errors only where it fails
    (max_abs_err and max_rel_err are None when it passes)."""
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
    if not detail and ref.is_floating_point() and all_close(ref, got, atol, rtol):
        r["ok"] = True
        return r
    flat_ref, flat_got = ref.reshape(-1), got.reshape(-1)
    floating = ref.is_floating_point()
    n = 0
    first = None
    any_fin, dfin_finite, max_abs, max_rel = False, True, 0.0, 0.0
    for at in range(0, flat_ref.numel(), COMPARE_CHUNK):
        rd, gd = flat_ref[at:at + COMPARE_CHUNK], flat_got[at:at + COMPARE_CHUNK]
        if floating:
            rd, gd = rd.double(), gd.double()
            diff = (gd - rd).abs()
            fin = torch.isfinite(rd)
            bad = torch.where(fin, ~(diff <= atol + rtol * rd.abs()),
                              torch.where(torch.isnan(rd), ~torch.isnan(gd), gd != rd))
            if bool(fin.any()):
                any_fin = True
                dfin = torch.where(fin, diff, torch.zeros_like(diff))
                dfin_finite = dfin_finite and bool(torch.isfinite(dfin).all())
                max_abs = nan_max(max_abs, float(dfin.max()))
                nz = fin & (rd != 0)
                rel = torch.where(nz, dfin / torch.where(nz, rd.abs(), torch.ones_like(rd)), torch.zeros_like(rd))
                max_rel = nan_max(max_rel, float(rel.max()))
        else:
            bad = rd != gd
            max_abs = max(max_abs, float((rd.double() - gd.double()).abs().max()))
        c = int(bad.sum())
        if c and first is None:
            first = at + int(bad.nonzero()[0][0])
        n += c
    if floating:
        if any_fin:
            r["max_abs_err"] = finite(max_abs) if dfin_finite else None
            r["max_rel_err"] = finite(max_rel)
        else:
            r["max_abs_err"] = r["max_rel_err"] = 0.0
    else:
        r["max_abs_err"] = max_abs if flat_ref.numel() else 0.0
        r["max_rel_err"] = None
    r["mismatches"] = n
    if n == 0:
        r["ok"] = True
        return r
    r["first_bad_index"] = first
    coords, rest = [], first
    for s in reversed(list(ref.shape)):
        coords.append(rest % s if s else 0)
        rest = rest // s if s else 0
    exp, gv = flat_ref[first].item(), flat_got[first].item()
    if floating:
        exp, gv = float(exp), float(gv)
    r["message"] = ("%d of %d elements differ beyond atol=%g rtol=%g (first at %s: expected %r, got %r; "
                    "max abs error %s, max rel error %s)" % (n, flat_ref.numel(), atol, rtol, list(reversed(coords)),
                                                             exp, gv, r["max_abs_err"], r["max_rel_err"]))
    return r


def compare_outputs(ref_outs, got_outs, job, detail=True):
    res = {"ok": True, "max_abs_err": 0.0, "max_rel_err": 0.0, "mismatches": 0, "first_bad_index": None}
    for k, (rt, gt) in enumerate(zip(ref_outs, got_outs)):
        c = compare_tensor(rt, gt, job, detail)
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
    """Equal element for element, NaN matching NaN (the inputs' check after
    every call).  torch.equal first: one pass, no full-size temporaries;
    it says no to any NaN, and only then is the NaN-aware test made."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if torch.equal(a, b):
        return True
    if a.is_floating_point() or a.is_complex():
        return bool(((a == b) | (torch.isnan(a) & torch.isnan(b))).all())
    return False


def nearly_same(a, b, rtol=1e-3):
    """The decoy check's test: b within rtol of a, elementwise, relative
    to each element and to the largest magnitude of a (exact for integer
    and boolean outputs; NaN matches NaN).  Independent of the problem's
    tolerance, which can be coarse beside the outputs' own scale.  Chunked
    as compare_tensor is."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.is_complex():
        a, b = torch.view_as_real(a), torch.view_as_real(b)
    fa, fb = a.reshape(-1), b.reshape(-1)
    if not a.is_floating_point():
        return all(bool((fa[i:i + COMPARE_CHUNK] == fb[i:i + COMPARE_CHUNK]).all())
                   for i in range(0, fa.numel(), COMPARE_CHUNK))
    scale = 0.0
    for i in range(0, fa.numel(), COMPARE_CHUNK):
        x = fa[i:i + COMPARE_CHUNK].double().abs()
        x = x[torch.isfinite(x)]
        if x.numel():
            scale = max(scale, float(x.max()))
    for i in range(0, fa.numel(), COMPARE_CHUNK):
        x, y = fa[i:i + COMPARE_CHUNK].double(), fb[i:i + COMPARE_CHUNK].double()
        near = (x - y).abs() <= rtol * (x.abs() + scale)
        if not bool((near | (x == y) | (torch.isnan(x) & torch.isnan(y))).all()):
            return False
    return True


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
