"""The Unix socket transport: kgymd's control protocol, version 1.

One JSON object per line both ways (kgymd-protocol(7)).  One connection
carries every request of a client: each gets an integer id, and a reader
task hands each line to the request it answers, so many requests (waits
above all) are in flight at once.  When the connection breaks, every
request in flight sees ConnectionLost and the client (client.py) decides
whether to send it again: all the requests the client sends are safe to
repeat, because submits always carry a task id (the same id again returns
the existing task).
"""
from __future__ import annotations

import asyncio
import json
import socket
import time
from typing import Any, AsyncIterator, Dict, List, Optional, cast

from .errors import ConnectionLost, ProtocolError, TooLarge, from_error

_EOF = object()


class _Call:
    """One request in flight: the lines that answer it, in order."""

    def __init__(self) -> None:
        self.lines: "asyncio.Queue[Any]" = asyncio.Queue()

    async def next(self) -> Dict[str, Any]:
        msg = await self.lines.get()
        if msg is _EOF:
            raise ConnectionLost("the connection to kgymd closed")
        if isinstance(msg, BaseException):
            raise msg
        return cast(Dict[str, Any], msg)


# How long a connect waits for room in kgymd's listen backlog.
_BACKLOG_WAIT_S = 10.0


async def _connect_unix(path: str) -> socket.socket:
    """A connected Unix socket.  A non-blocking connect to a Unix socket
    whose listen backlog is full fails at once with EAGAIN (it does not
    wait, as TCP's does, and asyncio's own connect then fails with EINVAL):
    a daemon that is slow to accept while hundreds of clients connect
    would look unreachable.  So try again, briefly, until there is room."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.setblocking(False)
    deadline = time.monotonic() + _BACKLOG_WAIT_S
    delay = 0.005
    try:
        while True:
            try:
                sock.connect(path)
                return sock
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise
                await asyncio.sleep(delay)
                delay = min(delay * 2, 0.1)
    except BaseException:
        sock.close()
        raise


class SocketConnection:
    """One connection to kgymd."""

    def __init__(self, path: str, max_line_bytes: int, max_request_bytes: int) -> None:
        self.path = path
        self.max_line_bytes = max_line_bytes
        self.max_request_bytes = max_request_bytes
        self.reader: Optional[asyncio.StreamReader] = None
        self.writer: Optional[asyncio.StreamWriter] = None
        self.calls: Dict[int, _Call] = {}
        self.next_id = 1
        self.closed = False
        self.reason: Optional[BaseException] = None
        self._reader_task: Optional["asyncio.Task[None]"] = None
        # One writer at a time: drain() may not be awaited by several
        # coroutines at once before Python 3.10.
        self._wlock: Optional[asyncio.Lock] = None

    async def open(self) -> None:
        try:
            sock = await _connect_unix(self.path)
            self.reader, self.writer = await asyncio.open_unix_connection(sock=sock, limit=self.max_line_bytes)
        except OSError as e:
            # No path: the message is about the socket, not the host.
            raise ConnectionLost("cannot connect to kgymd's socket: %s" % (e.strerror or type(e).__name__)) from None
        self._wlock = asyncio.Lock()
        self._reader_task = asyncio.ensure_future(self._read_loop())

    async def _read_loop(self) -> None:
        assert self.reader is not None
        reason: Optional[BaseException] = None
        try:
            while True:
                line = await self.reader.readline()
                if not line:
                    break
                if not line.strip():
                    continue
                try:
                    msg = json.loads(line)
                except ValueError:
                    reason = ProtocolError("kgymd sent a line that is not JSON")
                    break
                if not isinstance(msg, dict):
                    reason = ProtocolError("kgymd sent a line that is not a JSON object")
                    break
                rid = msg.get("id")
                if rid is None and msg.get("ok") is False:
                    # too_large, busy: kgymd closes the connection after
                    # this line; every request in flight learns why.
                    reason = from_error(msg.get("error"))
                    continue
                call = self.calls.get(rid) if isinstance(rid, int) else None
                if call is not None:
                    call.lines.put_nowait(msg)
                # Lines for a request nobody waits for any more are dropped.
        except (OSError, ValueError, asyncio.IncompleteReadError, asyncio.LimitOverrunError) as e:
            reason = reason or ConnectionLost("the connection to kgymd failed: %s" % type(e).__name__)
        except asyncio.CancelledError:
            pass
        finally:
            self._shut(reason)

    def _shut(self, reason: Optional[BaseException]) -> None:
        if self.closed:
            return
        self.closed = True
        self.reason = reason
        for call in self.calls.values():
            call.lines.put_nowait(_EOF if reason is None or isinstance(reason, ConnectionLost) else
                                  ConnectionLost(str(reason)))
        if self.writer is not None:
            self.writer.close()

    async def start(self, req: Dict[str, Any]) -> "tuple[int, _Call]":
        """Send a request; the call that collects the lines answering it."""
        if self.closed or self.writer is None:
            raise ConnectionLost("the connection to kgymd is closed")
        rid = self.next_id
        self.next_id += 1
        line = json.dumps(dict(req, v=1, id=rid), separators=(",", ":")).encode() + b"\n"
        if len(line) > self.max_request_bytes:
            raise TooLarge("the request is %d bytes, more than max_request_bytes (%d)"
                           % (len(line), self.max_request_bytes))
        call = _Call()
        self.calls[rid] = call
        try:
            assert self._wlock is not None
            async with self._wlock:
                self.writer.write(line)
                await self.writer.drain()
        except (OSError, RuntimeError):
            self.calls.pop(rid, None)
            self._shut(None)
            raise ConnectionLost("the connection to kgymd broke while sending") from None
        return rid, call

    def finish(self, rid: int) -> None:
        self.calls.pop(rid, None)

    async def close(self) -> None:
        if self._reader_task is not None:
            self._reader_task.cancel()
            try:
                await self._reader_task
            except (asyncio.CancelledError, Exception):  # noqa: BLE001 - closing anyway
                pass
        self._shut(None)
        if self.writer is not None:
            try:
                await self.writer.wait_closed()
            except (OSError, RuntimeError):
                pass


def check(msg: Dict[str, Any], task_id: Optional[str] = None) -> Dict[str, Any]:
    """The reply itself when ok, else the exception for its error."""
    ok = msg.get("ok")
    if ok is True:
        return msg
    if ok is False:
        raise from_error(msg.get("error"), task_id=task_id)
    raise ProtocolError("kgymd's reply has no 'ok' field")


async def lines(conn: SocketConnection, req: Dict[str, Any]) -> AsyncIterator[Dict[str, Any]]:
    """Every line answering a request that may get several (submit with
    wait, wait), up to and including its last reply."""
    rid, call = await conn.start(req)
    try:
        while True:
            msg = await call.next()
            yield msg
            if msg.get("done") is True or msg.get("ok") is False:
                return
    finally:
        conn.finish(rid)


def rejected_error(reply: Dict[str, Any], task_id: Optional[str]) -> Optional[BaseException]:
    """The exception for the first task a submit reply rejected, or None."""
    rej: List[Any] = reply.get("rejected") or []
    if not rej:
        return None
    err = rej[0].get("error") if isinstance(rej[0], dict) else None
    return from_error(err, task_id=task_id)
