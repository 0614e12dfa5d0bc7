"""A one-line progress display for batches: done, failed, rate, ETA.

Drawn only on a terminal (the stream's isatty()), rewritten in place with a
carriage return at most ten times a second, and ended with a newline; on
anything else (a pipe, a log file) it writes nothing at all, so logs stay
clean.
"""
from __future__ import annotations

import sys
import time
from typing import IO, Any, Optional


def _duration(s: float) -> str:
    s = int(round(s))
    if s >= 3600:
        return "%dh%02dm" % (s // 3600, s % 3600 // 60)
    if s >= 60:
        return "%dm%02ds" % (s // 60, s % 60)
    return "%ds" % s


class Progress:
    """Counts tasks as they end and shows the count on a terminal."""

    def __init__(self, total: Optional[int], enabled: Any = True, stream: Optional[IO[str]] = None,
                 label: str = "kgym") -> None:
        self.stream = stream if stream is not None else sys.stderr
        try:
            tty = bool(self.stream.isatty())
        except (AttributeError, ValueError):
            tty = False
        self.enabled = bool(enabled) and tty
        self.total = total
        self.label = label
        self.done = 0
        self.failed = 0
        self.start = time.monotonic()
        self._last = 0.0
        self._width = 0
        self._drawn = -1

    def update(self, failed: bool = False) -> None:
        """One more task ended (``failed``: it did not complete correctly)."""
        self.done += 1
        if failed:
            self.failed += 1
        now = time.monotonic()
        if self.enabled and (now - self._last >= 0.1 or self.done == self.total):
            self._last = now
            self._draw(now)

    def line(self, now: Optional[float] = None) -> str:
        elapsed = (now if now is not None else time.monotonic()) - self.start
        rate = self.done / elapsed if elapsed > 0 else 0.0
        of = "/%d" % self.total if self.total is not None else ""
        s = "%s: %d%s done, %d failed, %.1f tasks/s" % (self.label, self.done, of, self.failed, rate)
        if self.total is not None and self.done < self.total and rate > 0:
            s += ", ETA %s" % _duration((self.total - self.done) / rate)
        elif self.total is not None and self.done >= self.total:
            s += ", %s" % _duration(elapsed)
        return s

    def _draw(self, now: float) -> None:
        self._drawn = self.done
        s = self.line(now)
        pad = max(0, self._width - len(s))
        self._width = len(s)
        try:
            self.stream.write("\r" + s + " " * pad)
            self.stream.flush()
        except (OSError, ValueError):
            self.enabled = False

    def close(self) -> None:
        if self.enabled:
            if self._drawn != self.done:        # the last count is not on the screen yet
                self._draw(time.monotonic())
            try:
                self.stream.write("\n")
                self.stream.flush()
            except (OSError, ValueError):
                pass
            self.enabled = False
