"""Problem sets for kgym-eval: KernelBench-layout folders and JSONL files, and
the per-level summary of their results.

A KernelBench layout is a folder of ``levelN`` folders of problems, one
file each (``level1/19_ReLU.py``: Model, get_inputs, get_init_inputs); a
problem's key is ``level1/19_ReLU``.  Candidates come in the same layout
(the same file names, holding ModelNew), or as JSONL lines naming the
problem ("key" or "problem": ``level1/19_ReLU``; or "level" with "name" or
"problem_id") with "kernel_code", or a model's "response" from which the
code is extracted.  A JSONL of tasks has one problem a line: "key",
"reference_code", optionally "kernel_code" and any task fields.
"""
from __future__ import annotations

import json
import math
import os
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple

from .extract import extract_kernel

_LEVEL_DIR = re.compile(r"^level[_-]?(\d+)$", re.I)
_LEADING = re.compile(r"^(\d+)")
FAST_P = (0.0, 1.0, 1.5, 2.0)


class DatasetError(ValueError):
    """A problem set or candidate file that cannot be read as one."""


@dataclass
class Problem:
    key: str
    level: Optional[int]
    name: str
    reference_code: str
    kernel_code: Optional[str] = None
    fields: Dict[str, Any] = field(default_factory=dict)


def _level_of(key: str) -> Optional[int]:
    m = re.match(r"^level[_-]?(\d+)/", key, re.I)
    return int(m.group(1)) if m else None


def _sort_name(name: str) -> Tuple[int, str]:
    m = _LEADING.match(name)
    return (int(m.group(1)) if m else 1 << 30, name)


def _read(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


def _layout(root: str) -> List[Tuple[int, str, str]]:
    """(level, name, path) of every problem file of a KernelBench layout."""
    levels = []
    for entry in os.listdir(root):
        m = _LEVEL_DIR.match(entry)
        if m and os.path.isdir(os.path.join(root, entry)):
            levels.append((int(m.group(1)), entry))
    if not levels:
        raise DatasetError("%s: no level folders (level1/, level2/, ...) in it" % root)
    out = []
    for level, entry in sorted(levels):
        d = os.path.join(root, entry)
        for name in sorted((n[:-3] for n in os.listdir(d) if n.endswith(".py")), key=_sort_name):
            out.append((level, name, os.path.join(d, name + ".py")))
    return out


def _jsonl(path: str) -> Iterable[Tuple[int, Dict[str, Any]]]:
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                raise DatasetError("%s:%d: not JSON (%s)" % (path, n, e.msg)) from None
            if not isinstance(obj, dict):
                raise DatasetError("%s:%d: expected a JSON object" % (path, n))
            yield n, obj


def _key_of(obj: Mapping[str, Any]) -> Optional[str]:
    for k in ("key", "problem"):
        v = obj.get(k)
        if isinstance(v, str) and v:
            return v
    level = obj.get("level")
    name = obj.get("name") if obj.get("name") is not None else obj.get("problem_id")
    if isinstance(level, int) and name is not None:
        return "level%d/%s" % (level, name)
    return None


def load_problems(src: str) -> List[Problem]:
    """The problems of a KernelBench-layout folder or a JSONL of tasks."""
    if os.path.isdir(src):
        return [Problem(key="level%d/%s" % (lv, name), level=lv, name=name, reference_code=_read(p))
                for lv, name, p in _layout(src)]
    if not os.path.isfile(src):
        raise DatasetError("%s: no such folder or file" % src)
    probs = []
    seen = set()
    for n, obj in _jsonl(src):
        ref = obj.get("reference_code")
        if not isinstance(ref, str) or not ref.strip():
            raise DatasetError("%s:%d: field 'reference_code': expected the reference's source" % (src, n))
        key = _key_of(obj) or "task%d" % n
        if key in seen:
            raise DatasetError("%s:%d: key '%s' appears twice" % (src, n, key))
        seen.add(key)
        kc = obj.get("kernel_code")
        fields = {k: v for k, v in obj.items()
                  if k not in ("key", "problem", "level", "name", "problem_id", "reference_code", "kernel_code")}
        probs.append(Problem(key=key, level=obj["level"] if isinstance(obj.get("level"), int) else _level_of(key),
                             name=key.split("/")[-1], reference_code=ref,
                             kernel_code=kc if isinstance(kc, str) else None, fields=fields))
    return probs


def _match(key: str, problems: Mapping[str, Problem]) -> Optional[str]:
    """The problem key a candidate's key means: exact, or level/number."""
    if key in problems:
        return key
    lv = _level_of(key)
    tail = key.split("/")[-1]
    m = _LEADING.match(tail)
    if lv is None or m is None:
        return None
    hits = [k for k, p in problems.items() if p.level == lv and _LEADING.match(p.name)
            and int(_LEADING.match(p.name).group(1)) == int(m.group(1))]  # type: ignore[union-attr]
    return hits[0] if len(hits) == 1 else None


def load_candidates(src: str, problems: List[Problem]) -> Dict[str, str]:
    """{problem key: candidate code} from a folder in the same layout or a JSONL."""
    index = {p.key: p for p in problems}
    out: Dict[str, str] = {}
    if os.path.isdir(src):
        for lv, name, path in _layout(src):
            key = _match("level%d/%s" % (lv, name), index)
            if key is not None:
                out[key] = _read(path)
        return out
    if not os.path.isfile(src):
        raise DatasetError("%s: no such folder or file" % src)
    for n, obj in _jsonl(src):
        raw = _key_of(obj)
        if raw is None:
            raise DatasetError("%s:%d: no problem named: expected 'key', 'problem', or 'level' with 'name'" % (src, n))
        key = _match(raw, index)
        if key is None:
            raise DatasetError("%s:%d: '%s' names no problem of the set" % (src, n, raw))
        code = obj.get("kernel_code")
        if not isinstance(code, str):
            resp = next((obj[k] for k in ("response", "completion", "output") if isinstance(obj.get(k), str)), None)
            code = extract_kernel(resp) if resp is not None else None
        if code is None:
            raise DatasetError("%s:%d: field 'kernel_code': expected the candidate's source "
                               "(or a 'response' with a code block)" % (src, n))
        out[key] = code
    return out


# ------------------------------------------------------------ the summary


@dataclass
class LevelSummary:
    level: str
    tasks: int = 0
    correct: int = 0
    fast: Dict[float, int] = field(default_factory=lambda: {p: 0 for p in FAST_P})
    log_speedups: List[float] = field(default_factory=list)
    failures: "Counter[str]" = field(default_factory=Counter)

    def add(self, result: Mapping[str, Any]) -> None:
        self.tasks += 1
        code = result.get("error_code")
        if code:
            self.failures[str(code)] += 1
        if result.get("status") == "completed" and result.get("correctness") is True:
            self.correct += 1
            s = result.get("speedup")
            if isinstance(s, (int, float)) and not isinstance(s, bool) and s > 0 and math.isfinite(s):
                self.log_speedups.append(math.log(s))
                for p in FAST_P:
                    if s > p:
                        self.fast[p] += 1

    def pct(self, n: int) -> str:
        return "%.1f%%" % (100.0 * n / self.tasks) if self.tasks else "-"

    @property
    def geomean(self) -> Optional[float]:
        if not self.log_speedups:
            return None
        return math.exp(sum(self.log_speedups) / len(self.log_speedups))

    def row(self) -> List[str]:
        g = self.geomean
        fails = " ".join("%s:%d" % kv for kv in sorted(self.failures.items())) or "-"
        return ([self.level, str(self.tasks), self.pct(self.correct)] + [self.pct(self.fast[p]) for p in FAST_P]
                + ["%.3fx" % g if g is not None else "-", fails])


HEADER = ["level", "tasks", "correct", "fast_0", "fast_1", "fast_1.5", "fast_2", "geomean", "failures"]


def summarize(records: Iterable[Mapping[str, Any]]) -> List[LevelSummary]:
    """One summary per level (in order), then "all"."""
    levels: Dict[Any, LevelSummary] = {}
    total = LevelSummary("all")
    for rec in records:
        res = rec.get("result") or {}
        lv = rec.get("level")
        name = str(lv) if lv is not None else "-"
        levels.setdefault(lv if lv is not None else 1 << 30, LevelSummary(name)).add(res)
        total.add(res)
    return [levels[k] for k in sorted(levels)] + [total]


def table(summaries: List[LevelSummary]) -> str:
    rows = [HEADER] + [s.row() for s in summaries]
    widths = [max(len(r[i]) for r in rows) for i in range(len(HEADER))]
    lines = []
    for r in rows:
        cells = [r[i].ljust(widths[i]) if i in (0, len(HEADER) - 1) else r[i].rjust(widths[i])
                 for i in range(len(HEADER))]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)
