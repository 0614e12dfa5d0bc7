"""Typed views of kgymd's result and status objects.

The fields are those of kgymd-protocol(7), RESULTS (a superset of
KernelGYM's, times in milliseconds).  Every object keeps what it was made
from in ``raw`` (``extra`` for the keys it has no field for), so a key a
newer server adds is never lost; ``to_dict()`` gives it back.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Tuple


def _num(v: Any) -> Optional[float]:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return float(v)


def _int(v: Any) -> Optional[int]:
    if isinstance(v, bool) or not isinstance(v, int):
        return None
    return v


@dataclass
class Timing:
    """How one side (the candidate, ``kernel``, or the ``reference``) was timed."""

    median_ms: Optional[float] = None
    mean_ms: Optional[float] = None
    std_ms: Optional[float] = None
    min_ms: Optional[float] = None
    max_ms: Optional[float] = None
    ci95_ms: Optional[Tuple[float, float]] = None
    ci95_rel: Optional[float] = None
    trials: Optional[int] = None
    gpu_time_ms: Optional[float] = None
    l2_flush: Optional[bool] = None
    clock_mhz: Optional[float] = None
    extra: Dict[str, Any] = field(default_factory=dict, repr=False)

    _KEYS = ("median_ms", "mean_ms", "std_ms", "min_ms", "max_ms", "ci95_ms", "ci95_rel", "trials",
             "gpu_time_ms", "l2_flush", "clock_mhz")

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Timing":
        ci = d.get("ci95_ms")
        ci95 = None
        if isinstance(ci, (list, tuple)) and len(ci) == 2 and all(_num(x) is not None for x in ci):
            ci95 = (float(ci[0]), float(ci[1]))
        l2 = d.get("l2_flush")
        return cls(median_ms=_num(d.get("median_ms")), mean_ms=_num(d.get("mean_ms")),
                   std_ms=_num(d.get("std_ms")), min_ms=_num(d.get("min_ms")), max_ms=_num(d.get("max_ms")),
                   ci95_ms=ci95, ci95_rel=_num(d.get("ci95_rel")), trials=_int(d.get("trials")),
                   gpu_time_ms=_num(d.get("gpu_time_ms")), l2_flush=l2 if isinstance(l2, bool) else None,
                   clock_mhz=_num(d.get("clock_mhz")),
                   extra={k: v for k, v in d.items() if k not in cls._KEYS})


@dataclass
class Trial:
    """One correctness trial."""

    trial: Optional[int] = None
    passed: Optional[bool] = None
    seed: Optional[str] = None
    init: Any = None
    max_abs_err: Optional[float] = None
    max_rel_err: Optional[float] = None
    mismatches: Optional[int] = None
    first_bad_index: Any = None
    output: Optional[str] = None
    error: Optional[str] = None
    extra: Dict[str, Any] = field(default_factory=dict, repr=False)

    _KEYS = ("trial", "passed", "seed", "init", "max_abs_err", "max_rel_err", "mismatches", "first_bad_index",
             "output", "error")

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Trial":
        passed = d.get("passed")
        seed = d.get("seed")
        out = d.get("output")
        err = d.get("error")
        return cls(trial=_int(d.get("trial")), passed=passed if isinstance(passed, bool) else None,
                   seed=None if seed is None else str(seed), init=d.get("init"),
                   max_abs_err=_num(d.get("max_abs_err")), max_rel_err=_num(d.get("max_rel_err")),
                   mismatches=_int(d.get("mismatches")), first_bad_index=d.get("first_bad_index"),
                   output=out if isinstance(out, str) else None,
                   error=err if isinstance(err, str) else None,
                   extra={k: v for k, v in d.items() if k not in cls._KEYS})


@dataclass
class Result:
    """A task's result.

    ``status`` is the result's own (``completed`` when the candidate compiled
    and was judged, correct or not; ``failed`` otherwise) -- reward code relies
    on that split.  ``state`` is the task's terminal state (completed, failed,
    cancelled), or ``error`` for a result the client made because it could
    not get one (``error_code`` ``CLIENT_ERROR``).  ``index`` is the task's
    position in the input of ``evaluate_many``.
    """

    task_id: str
    status: str
    state: str = ""
    compiled: bool = False
    correctness: bool = False
    decoy_kernel: bool = False
    kernel_runtime: Optional[float] = None
    reference_runtime: Optional[float] = None
    speedup: Optional[float] = None
    error_code: Optional[str] = None
    error_message: Optional[str] = None
    kernel_timing: Optional[Timing] = None
    reference_timing: Optional[Timing] = None
    correctness_trials: List[Trial] = field(default_factory=list)
    profile: List[Dict[str, Any]] = field(default_factory=list, repr=False)
    metadata: Dict[str, Any] = field(default_factory=dict, repr=False)
    index: Optional[int] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], state: Optional[str] = None, task_id: Optional[str] = None) -> "Result":
        t = d.get("timing")
        timing: Dict[str, Any] = t if isinstance(t, dict) else {}
        trials = d.get("correctness_trials")
        profile = d.get("profile")
        meta = d.get("metadata")
        status = str(d.get("status") or "failed")
        code = d.get("error_code")
        msg = d.get("error_message")
        if not state:
            state = "cancelled" if code == "CANCELLED" else ("completed" if status == "completed" else "failed")
        return cls(task_id=str(d.get("task_id") or task_id or ""), status=status, state=state,
                   compiled=d.get("compiled") is True, correctness=d.get("correctness") is True,
                   decoy_kernel=d.get("decoy_kernel") is True,
                   kernel_runtime=_num(d.get("kernel_runtime")), reference_runtime=_num(d.get("reference_runtime")),
                   speedup=_num(d.get("speedup")),
                   error_code=code if isinstance(code, str) and code else None,
                   error_message=msg if isinstance(msg, str) else None,
                   kernel_timing=Timing.from_dict(timing["kernel"]) if isinstance(timing.get("kernel"), dict) else None,
                   reference_timing=(Timing.from_dict(timing["reference"])
                                     if isinstance(timing.get("reference"), dict) else None),
                   correctness_trials=[Trial.from_dict(t) for t in trials if isinstance(t, dict)]
                   if isinstance(trials, list) else [],
                   profile=[p for p in profile if isinstance(p, dict)] if isinstance(profile, list) else [],
                   metadata=dict(meta) if isinstance(meta, dict) else {},
                   raw=dict(d))

    @classmethod
    def client_error(cls, task_id: str, exc: BaseException, index: Optional[int] = None) -> "Result":
        """A result standing for a task the client could not get evaluated."""
        code = getattr(exc, "code", None) or type(exc).__name__
        msg = "%s: %s" % (code, exc)
        return cls(task_id=task_id, status="failed", state="error", error_code="CLIENT_ERROR", error_message=msg,
                   index=index, raw={"task_id": task_id, "status": "failed", "error_code": "CLIENT_ERROR",
                                     "error_message": msg})

    @property
    def ok(self) -> bool:
        """Completed and correct."""
        return self.status == "completed" and self.correctness

    @property
    def hack(self) -> Optional[Dict[str, Any]]:
        """The reward hack kgymd found (``{"kind":…, "detail":…}``), or None."""
        h = self.metadata.get("hack")
        return h if isinstance(h, dict) else None

    def to_dict(self) -> Dict[str, Any]:
        """The result object as the server sent it."""
        return dict(self.raw)


@dataclass
class Status:
    """A task's state (``status`` operation, or HTTP ``GET /status/{id}``)."""

    task_id: str
    state: str
    error_code: Optional[str] = None
    error_message: Optional[str] = None
    attempt: Optional[int] = None
    queue_position: Optional[int] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def done(self) -> bool:
        return self.state in ("completed", "failed", "cancelled")
