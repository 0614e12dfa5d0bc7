"""kgym.feedback(): what a multi-turn trainer tells the model about its kernel.

A short text built from a result: the verdict, the error (the compiler log,
the CUDA error, the first mismatch with its index and values, as kgymd
wrote it), the first failing trial's figures, the timings and the reward
hack found.  It never exceeds ``max_chars``: the short parts come first
and the error text gets what is left, cut in the middle (the head of a
compiler log names the first error, its tail the last), with a marker that
says how much was cut.
"""
from __future__ import annotations

from typing import Any, List, Mapping, Optional, Union

from .result import Result, Timing

_VERDICT = {
    "VALIDATION_ERROR": "rejected before running",
    "COMPILATION_ERROR": "failed to compile",
    "RUNTIME_ERROR": "failed while running",
    "CORRECTNESS_ERROR": "compiled but gives wrong outputs",
    "TIMEOUT_ERROR": "ran out of time",
    "RESOURCE_ERROR": "ran out of a resource",
    "SANDBOX_VIOLATION": "did something the sandbox forbids",
    "REWARD_HACK": "was caught gaming the measurement",
    "SYSTEM_ERROR": "could not be evaluated (not the kernel's fault)",
    "CANCELLED": "was cancelled",
}


def _ms(v: Optional[float]) -> str:
    if v is None:
        return "?"
    return "%.4g ms" % v


def _verdict(r: Result) -> str:
    if r.ok:
        if r.speedup is not None and r.speedup > 0:
            return "Verdict: correct; %.3gx the reference's speed." % r.speedup
        return "Verdict: correct."
    what = _VERDICT.get(r.error_code or "", "failed" if r.status != "completed" else "is incorrect")
    return "Verdict: the kernel %s%s." % (what, " (%s)" % r.error_code if r.error_code else "")


def _mismatch(r: Result) -> Optional[str]:
    for t in r.correctness_trials:
        if t.passed is False:
            parts = ["trial %s" % (t.trial if t.trial is not None else "?")]
            if t.output:
                parts.append("output '%s'" % t.output)
            if t.first_bad_index is not None:
                parts.append("first bad index %s" % (t.first_bad_index,))
            if t.mismatches is not None:
                parts.append("%d mismatching elements" % t.mismatches)
            if t.max_abs_err is not None:
                parts.append("max abs error %.4g" % t.max_abs_err)
            if t.max_rel_err is not None:
                parts.append("max rel error %.4g" % t.max_rel_err)
            if t.error:
                parts.append(t.error)
            return "First failing trial: " + ", ".join(parts) + "."
    return None


def _side(name: str, t: Optional[Timing], runtime: Optional[float]) -> Optional[str]:
    if t is not None and t.median_ms is not None:
        s = "%s %s median" % (name, _ms(t.median_ms))
        if t.trials:
            s += " of %d runs" % t.trials
        if t.ci95_ms:
            s += " (95%% CI %.4g-%.4g)" % t.ci95_ms
        return s
    if runtime is not None and runtime >= 0:
        return "%s %s" % (name, _ms(runtime))
    return None


def _timing(r: Result) -> Optional[str]:
    sides = [s for s in (_side("your kernel", r.kernel_timing, r.kernel_runtime),
                         _side("reference", r.reference_timing, r.reference_runtime)) if s]
    if not sides:
        return None
    s = "Timing: " + "; ".join(sides)
    if r.speedup is not None and r.speedup > 0:
        s += "; speedup %.3gx" % r.speedup
    return s + "."


def _hack(r: Result) -> Optional[str]:
    h = r.hack
    if h is None:
        return "Reward hack: a decoy kernel (defined, but not doing the work)." if r.decoy_kernel else None
    return "Reward hack: %s -- %s" % (h.get("kind", "?"), h.get("detail", ""))


def cut_middle(text: str, limit: int) -> str:
    """``text`` in at most ``limit`` characters: head and tail kept, the
    middle replaced by a marker saying how many characters were cut."""
    if len(text) <= limit:
        return text
    if limit <= 0:
        return ""
    marker = ""
    for _ in range(3):      # the marker's length depends on the count it shows
        marker = "\n[... %d characters cut ...]\n" % (len(text) - limit + len(marker))
    room = limit - len(marker)
    if room < 16:
        return text[:limit]
    head = room * 2 // 3
    tail = room - head
    return text[:head] + marker + text[len(text) - tail:]


def feedback(result: Union[Result, Mapping[str, Any]], max_chars: int = 2048) -> str:
    """The model-facing text for a result, at most ``max_chars`` characters."""
    if max_chars <= 0:
        return ""
    r = result if isinstance(result, Result) else Result.from_dict(result)
    short: List[str] = [s for s in (_verdict(r), _hack(r), _mismatch(r), _timing(r)) if s]
    error = (r.error_message or "").strip()
    head = "\n".join(short)
    if error:
        room = max_chars - len(head) - len("\nError:\n")
        if room >= 64 or room >= len(error):
            head = short[0] + "\nError:\n" + cut_middle(error, room) + (
                "\n" + "\n".join(short[1:]) if len(short) > 1 else "")
    return cut_middle(head, max_chars)
