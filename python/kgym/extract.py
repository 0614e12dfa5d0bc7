"""Finding the kernel in a model's response.

In order: a marked section (a line ``# Kernel Implementation``,
``# Your implementation:`` or ``# Generated kernel:``, up to a line ``# End``
or the end), else the last fenced code block (```` ```python ```` ...
```` ``` ````; an unterminated last fence runs to the end), else nothing.
Reasoning between ``<think>`` and ``</think>`` is ignored first, so code the
model only thought about is never taken for its answer.
"""
from __future__ import annotations

import re
from typing import Optional

_THINK = re.compile(r"<think>.*?(?:</think>|\Z)", re.S)
_MARKED = re.compile(r"^[ \t]*#[ \t]*(?:Kernel Implementation|Your implementation:|Generated kernel:)[ \t]*\n"
                     r"(.*?)(?=^[ \t]*#[ \t]*End\b|\Z)", re.S | re.M | re.I)
_FENCE = re.compile(r"^[ \t]*```[ \t]*([A-Za-z0-9_+.-]*)[ \t]*\n(.*?)(?:^[ \t]*```[ \t]*$|\Z)", re.S | re.M)


def extract_kernel(response: str) -> Optional[str]:
    """The candidate's code in a response, or None when there is none."""
    if not isinstance(response, str):
        return None
    text = _THINK.sub("", response)
    marked = _MARKED.findall(text)
    if marked:
        code = _strip_fences(marked[-1]).strip()
        if code:
            return code + "\n"
    blocks = [str(body) for _lang, body in _FENCE.findall(text) if body.strip()]
    if blocks:
        return blocks[-1].strip() + "\n"
    return None


def _strip_fences(code: str) -> str:
    m = _FENCE.search(code)
    return str(m.group(2)) if m else code
