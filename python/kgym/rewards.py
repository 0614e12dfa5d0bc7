"""Rewards from results: drkernel's three reward functions and its coverage terms.

drkernel (the KernelGYM RL recipe) turns a KernelGYM result into a scalar
reward with one of three functions, each configurable here through
RewardConfig (defaults: drkernel's published configuration):

``like_kernel``  tiers: not completed or decoy -1; not compiled -0.5;
                 incorrect -0.3; correct with speedup >= 3, 2, 1.5, 1.2, 1:
                 1.0, 0.8, 0.6, 0.4, 0.2; slower than the reference -0.1.
``weighted``     correct_weight * correct
                 + performance_weight * [speedup >= 1 + speedup_eps]
                 + coverage_weight * coverage (only when correct);
                 not completed or decoy: penalty_score.
``speedup``      correct_weight * correct
                 + performance_weight * s, s = min(speedup, speedup_upper)
                 (0 when s < speedup_lower)
                 + coverage_weight * coverage (only when correct);
                 not completed or decoy: penalty_score.

coverage is ``time_coverage`` (the candidate's own kernels' share of the GPU
time in the profiled calls) or ``number_coverage`` (its share of the kernels
launched), from the result's KernelGYM metadata keys; 0 when absent.

Two choices of kgymd's that drkernel's client does not need: a result
whose error_code is REWARD_HACK (kgymd's detectors; drkernel knows only the
decoy) is penalised like a decoy (``hack_is_decoy``), and the speed terms
count only for correct candidates (``speed_needs_correct``), as KernelGYM
times only those -- kgymd may time a candidate before finding it wrong.
Both can be turned off.

Every function returns a flat dict of scalars (what VERL's reward managers
collect): score, reward, correctness, compiled, speedup, coverage,
time_coverage, number_coverage, decoy_kernel, error_code.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable, Dict, Mapping, Optional, Tuple, Union

from .result import Result

ResultLike = Union[Result, Mapping[str, Any]]


@dataclass(frozen=True)
class RewardConfig:
    """Weights, bounds and penalties (drkernel's names in comments)."""

    correct_weight: float = 0.5           # init_correct_weight
    performance_weight: float = 0.5       # init_performance_weight
    speedup_eps: float = 0.01             # speedup_eps
    speedup_upper: float = 3.0            # speedup_reward_upper_bound
    speedup_lower: float = 0.0            # speedup_reward_lower_bound
    penalty_score: float = 0.0            # reward_policy.penalties.penalty_score
    coverage: Optional[str] = "time"      # coverage_reward: "time", "number" or None (off)
    coverage_weight: float = 0.5          # coverage_reward.weight
    # like_kernel's values
    failed_score: float = -1.0            # not completed, decoy
    compilation_fail: float = -0.5        # reward_policy.penalties.compilation_fail
    correctness_fail: float = -0.3        # reward_policy.penalties.correctness_fail
    perf_degrade: float = -0.1            # reward_policy.penalties.perf_degrade
    tiers: Tuple[Tuple[float, float], ...] = ((3.0, 1.0), (2.0, 0.8), (1.5, 0.6), (1.2, 0.4), (1.0, 0.2))
    # kgymd's additions (see the module's documentation)
    hack_is_decoy: bool = True
    speed_needs_correct: bool = True

    def with_(self, **changes: Any) -> "RewardConfig":
        return replace(self, **changes)


DEFAULT = RewardConfig()


def _fields(result: ResultLike) -> Dict[str, Any]:
    if isinstance(result, Result):
        d = dict(result.raw)
        d.setdefault("status", result.status)
        d.setdefault("compiled", result.compiled)
        d.setdefault("correctness", result.correctness)
        d.setdefault("decoy_kernel", result.decoy_kernel)
        d.setdefault("speedup", result.speedup)
        d.setdefault("error_code", result.error_code)
        d.setdefault("metadata", result.metadata)
        return d
    if isinstance(result, Mapping):
        return dict(result)
    raise TypeError("result: expected a kgym.Result or a result dict, not %s" % type(result).__name__)


def _number(v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v != v:
        return 0.0
    return float(v)


def coverage(result: ResultLike) -> Dict[str, float]:
    """{"time_coverage", "number_coverage"} from the result's metadata (or
    its top level), each 0 when its denominator is missing or 0."""
    d = _fields(result)
    m = d.get("metadata")
    meta: Mapping[str, Any] = m if isinstance(m, Mapping) else {}

    def get(*keys: str) -> float:
        for k in keys:
            if k in meta:
                return _number(meta.get(k))
            if k in d:
                return _number(d.get(k))
        return 0.0
    n_custom = get("num_custom_kernels", "num_custom_kernel")
    n_total = get("num_total_kernels", "num_total_kernel")
    t_custom = get("custom_kernel_cuda_time_in_profiling_us")
    t_total = get("total_kernel_run_time_in_profiling_us")
    return {"time_coverage": t_custom / t_total if t_total > 0 else 0.0,
            "number_coverage": n_custom / n_total if n_total > 0 else 0.0}


def _base(d: Dict[str, Any], cfg: RewardConfig) -> Dict[str, Any]:
    cov = coverage(d)
    code = d.get("error_code")
    return {"score": 0.0, "reward": 0.0, "correctness": d.get("correctness") is True,
            "compiled": d.get("compiled") is True, "speedup": max(0.0, _number(d.get("speedup"))),
            "coverage": 0.0, "time_coverage": cov["time_coverage"], "number_coverage": cov["number_coverage"],
            "decoy_kernel": d.get("decoy_kernel") is True,
            "error_code": code if isinstance(code, str) else ""}


def _rejected(d: Dict[str, Any], out: Dict[str, Any], cfg: RewardConfig) -> bool:
    """True when the result earns only the penalty: not completed, a decoy
    (or, with hack_is_decoy, any reward hack)."""
    if d.get("status") != "completed":
        return True
    if d.get("decoy_kernel") is True:
        return True
    return cfg.hack_is_decoy and d.get("error_code") == "REWARD_HACK"


def _set(out: Dict[str, Any], score: float) -> Dict[str, Any]:
    out["score"] = out["reward"] = float(score)
    return out


def _coverage_term(out: Dict[str, Any], cfg: RewardConfig) -> float:
    if cfg.coverage is None or not out["correctness"]:
        return 0.0
    if cfg.coverage not in ("time", "number"):
        raise ValueError("coverage: expected 'time', 'number' or None, not %r" % (cfg.coverage,))
    out["coverage"] = out["time_coverage"] if cfg.coverage == "time" else out["number_coverage"]
    return float(cfg.coverage_weight * out["coverage"])


def like_kernel(result: ResultLike, config: Optional[RewardConfig] = None) -> Dict[str, Any]:
    """drkernel's calculate_reward_like_kernel: fixed tiers."""
    cfg = config or DEFAULT
    d = _fields(result)
    out = _base(d, cfg)
    if _rejected(d, out, cfg):
        return _set(out, cfg.failed_score)
    if not out["compiled"]:
        return _set(out, cfg.compilation_fail)
    if not out["correctness"]:
        return _set(out, cfg.correctness_fail)
    for bound, value in cfg.tiers:
        if out["speedup"] >= bound:
            return _set(out, value)
    return _set(out, cfg.perf_degrade)


def _speed(out: Dict[str, Any], cfg: RewardConfig) -> float:
    if cfg.speed_needs_correct and not out["correctness"]:
        return 0.0
    return float(out["speedup"])


def weighted(result: ResultLike, config: Optional[RewardConfig] = None) -> Dict[str, Any]:
    """drkernel's calculate_reward_weighted: correct + [faster than 1+eps] + coverage."""
    cfg = config or DEFAULT
    d = _fields(result)
    out = _base(d, cfg)
    if _rejected(d, out, cfg):
        return _set(out, cfg.penalty_score)
    faster = _speed(out, cfg) >= 1.0 + cfg.speedup_eps
    score = cfg.correct_weight * out["correctness"] + cfg.performance_weight * faster
    return _set(out, score + _coverage_term(out, cfg))


def speedup(result: ResultLike, config: Optional[RewardConfig] = None) -> Dict[str, Any]:
    """drkernel's calculate_reward_speedup: correct + bounded speedup + coverage."""
    cfg = config or DEFAULT
    d = _fields(result)
    out = _base(d, cfg)
    if _rejected(d, out, cfg):
        return _set(out, cfg.penalty_score)
    s = min(_speed(out, cfg), cfg.speedup_upper)
    if s < cfg.speedup_lower:
        s = 0.0
    score = cfg.correct_weight * out["correctness"] + cfg.performance_weight * s
    return _set(out, score + _coverage_term(out, cfg))


REWARDS: Dict[str, Callable[..., Dict[str, Any]]] = {
    "like_kernel": like_kernel,
    "weighted": weighted,
    "speedup": speedup,
}
# drkernel's own names (reward_func_name) work too.
REWARDS.update({"calculate_reward_like_kernel": like_kernel, "calculate_reward_weighted": weighted,
                "calculate_reward_speedup": speedup})


def compute(result: ResultLike, name: str = "weighted", config: Optional[RewardConfig] = None) -> Dict[str, Any]:
    """The reward ``name`` (like_kernel, weighted, speedup) of a result."""
    fn = REWARDS.get(name)
    if fn is None:
        raise ValueError("reward: expected one of like_kernel, weighted, speedup, not %r" % (name,))
    return fn(result, config)


def penalty(name: str = "weighted", config: Optional[RewardConfig] = None, error_code: str = "") -> Dict[str, Any]:
    """The reward of a response that could not be evaluated at all (no code
    in it, the server unreachable): the function's not-completed value."""
    return compute({"status": "failed", "error_code": error_code}, name, config)


def compute_score(data_source: Any, solution_str: str, ground_truth: Any, extra_info: Any = None,
                  **kwargs: Any) -> Dict[str, Any]:
    """VERL's custom reward entry; the same as kgym.verl.compute_score (see
    there), which is the file to name in a VERL config."""
    from kgym import verl  # here, not at the top: kgym.verl imports this module
    return verl.compute_score(data_source, solution_str, ground_truth, extra_info, **kwargs)
