"""A VERL custom reward function backed by kgymd.

In a VERL config::

    custom_reward_function:
      path: <site-packages>/kgym/verl.py      # python -c 'import kgym.verl as v; print(v.__file__)'
      name: compute_score                      # or compute_score_batch (BatchRewardManager)
      reward_kwargs: {address: /run/kgym/kgymd.sock, reward: weighted, backend: triton}

VERL loads this file by its path as a module of its own, so it imports the
installed kgym package absolutely, never relatively.

``ground_truth`` is the reference code (drkernel's data sets), or a dict
(or its JSON) with ``reference_code`` and any task fields.  Settings, each
overriding the one before: the environment (KGYM_URL / KGYM_SOCKET,
KGYM_REWARD, KGYM_BACKEND), reward_kwargs, then ``extra_info["kgym"]``:

address      socket path or http:// URL
reward       like_kernel, weighted (default) or speedup
reward_config  a dict of kgym.rewards.RewardConfig fields
backend      the task's backend (default triton, as drkernel)
fields       a dict of task fields (num_correct_trials, device, timeout_s, ...)
entry_point  also read from extra_info["entry_point"]

The return value is the reward's dict (score, correctness, speedup,
coverage, ...).  A response with no code in it, or one that cannot be
evaluated (server unreachable), gets the function's not-completed value
with error_code NO_CODE or CLIENT_ERROR, and is never an exception: one bad
sample must not stop a training step.
"""
from __future__ import annotations

import json
import logging
import os
import threading
from typing import Any, Dict, List, Mapping, Optional, Tuple

import kgym
from kgym import rewards
from kgym.extract import extract_kernel

log = logging.getLogger("kgym.verl")

_clients: Dict[Tuple[int, str], "kgym.Client"] = {}
_clients_lock = threading.Lock()


def _client(address: Optional[str]) -> "kgym.Client":
    """One client per process and address (VERL calls from worker processes)."""
    key = (os.getpid(), address or "")
    with _clients_lock:
        c = _clients.get(key)
        if c is None:
            c = kgym.Client(address)
            _clients[key] = c
        return c


def _settings(kwargs: Mapping[str, Any], extra_info: Optional[Mapping[str, Any]]) -> Dict[str, Any]:
    s: Dict[str, Any] = {"address": None, "reward": os.environ.get("KGYM_REWARD", "weighted"),
                         "backend": os.environ.get("KGYM_BACKEND", "triton"), "fields": {}, "reward_config": {}}
    s.update({k: v for k, v in kwargs.items() if v is not None})
    if isinstance(extra_info, Mapping):
        own = extra_info.get("kgym")
        if isinstance(own, Mapping):
            s.update(own)
        if "entry_point" in extra_info and "entry_point" not in s["fields"]:
            s["fields"] = dict(s["fields"], entry_point=extra_info["entry_point"])
    return s


def _reference(ground_truth: Any) -> Tuple[Optional[str], Dict[str, Any]]:
    gt = ground_truth
    if isinstance(gt, str) and gt.lstrip().startswith("{"):
        try:
            gt = json.loads(gt)
        except ValueError:
            pass
    if isinstance(gt, Mapping):
        fields = dict(gt)
        ref = fields.pop("reference_code", None)
        return (ref if isinstance(ref, str) else None), fields
    return (gt if isinstance(gt, str) else None), {}


def _config(s: Mapping[str, Any]) -> rewards.RewardConfig:
    rc = s.get("reward_config") or {}
    if isinstance(rc, rewards.RewardConfig):
        return rc
    return rewards.RewardConfig(**dict(rc))


def _task(solution_str: str, ground_truth: Any, s: Mapping[str, Any]) -> Optional[Dict[str, Any]]:
    code = extract_kernel(solution_str)
    ref, gt_fields = _reference(ground_truth)
    if code is None or ref is None:
        return None
    fields = dict(gt_fields)
    fields.update(s.get("fields") or {})
    fields.setdefault("backend", s.get("backend"))
    return kgym.client.build_task(ref, code, **fields)


def _score(result: Any, s: Mapping[str, Any], error_code: str = "") -> Dict[str, Any]:
    if result is None:
        return rewards.penalty(s.get("reward", "weighted"), _config(s), error_code)
    return rewards.compute(result, s.get("reward", "weighted"), _config(s))


def compute_score(data_source: Any, solution_str: str, ground_truth: Any, extra_info: Optional[Mapping[str, Any]] = None,
                  **kwargs: Any) -> Dict[str, Any]:
    """VERL's custom reward entry: evaluate the response's kernel, return
    the reward dict (its "score" is the reward)."""
    s = _settings(kwargs, extra_info)
    task = _task(solution_str, ground_truth, s)
    if task is None:
        return _score(None, s, "NO_CODE")
    try:
        result = _client(s.get("address")).evaluate_task(task)
    except kgym.KgymError as e:
        log.warning("kgym: could not evaluate a response: %s", e)
        return _score(None, s, "CLIENT_ERROR")
    return _score(result, s)


def compute_score_batch(data_sources: List[Any], solution_strs: List[str], ground_truths: List[Any],
                        extra_infos: Optional[List[Optional[Mapping[str, Any]]]] = None, **kwargs: Any
                        ) -> List[Dict[str, Any]]:
    """The same for a whole batch (VERL's BatchRewardManager), evaluated
    concurrently (``concurrency``, default 64); scores in input order."""
    n = len(solution_strs)
    infos = list(extra_infos) if extra_infos is not None else [None] * n
    settings = [_settings(kwargs, infos[i]) for i in range(n)]
    tasks = [_task(solution_strs[i], ground_truths[i], settings[i]) for i in range(n)]
    scores: List[Optional[Dict[str, Any]]] = [None] * n
    todo = [i for i in range(n) if tasks[i] is not None]
    for i in range(n):
        if tasks[i] is None:
            scores[i] = _score(None, settings[i], "NO_CODE")
    if todo:
        address = settings[todo[0]].get("address")
        concurrency = int(kwargs.get("concurrency") or 64)
        for r in _client(address).evaluate_many([t for t in tasks if t is not None], concurrency=concurrency,
                                                progress=False):
            i = todo[r.index if r.index is not None else 0]
            scores[i] = _score(None if r.state == "error" else r, settings[i],
                               "CLIENT_ERROR" if r.state == "error" else "")
    return [sc if sc is not None else _score(None, settings[i], "CLIENT_ERROR") for i, sc in enumerate(scores)]
