"""kgym.AsyncClient: kgymd over its Unix socket, or a KernelGYM-style HTTP
server (kgymd-http, KernelGYM itself), with the same calls for both.

The address is a socket path (``unix:PATH`` too) or an ``http://`` URL;
without one, ``$KGYM_URL``, else ``$KGYM_SOCKET``, else
/run/kgym/kgymd.sock.

Retries: every task the client sends carries a task id (it makes one when
the caller gives none), and kgymd answers a task id it already has with
that task (kgymd-protocol(7), TASKS), so a request cut off by a broken
connection, a restarted daemon or an HTTP 503 is sent again, up to
``max_retries`` times with a doubling back-off, without ever running a task
twice.  A full queue (QueueFull) is raised by ``submit``; ``evaluate`` and
``evaluate_many`` wait the time it asks and submit again.  A draining
server is not retried.

kgym.Client (sync.py) runs this class on a private event loop.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import math
import os
import time
import urllib.parse
import uuid
from typing import (Any, AsyncGenerator, Awaitable, Callable, Dict, IO, Iterable, List, Mapping, Optional, Tuple,
                    TypeVar)

from . import _http, _socket
from .errors import (ConnectionLost, KgymError, NotFound, NotReady, ProtocolError, QueueFull, Unavailable,
                     WaitTimeout)
from .progress import Progress
from .result import Result, Status

DEFAULT_SOCKET = "/run/kgym/kgymd.sock"
_TASK_KEYS = ("task_id", "priority", "timeout_s", "resources")
_WAIT_MAX_IDS = 100000          # kgymd-protocol(7): at most this many ids per wait
T = TypeVar("T")


def resolve_address(address: Optional[str] = None) -> Tuple[str, str]:
    """("unix", path) or ("http", url) for an address, or for the environment."""
    if address is None:
        address = os.environ.get("KGYM_URL") or os.environ.get("KGYM_SOCKET") or DEFAULT_SOCKET
    if not isinstance(address, str) or not address:
        raise ValueError("address: expected a socket path or an http:// URL")
    if address.startswith(("http://", "https://")):
        return "http", address
    if address.startswith("unix:"):
        address = address[5:]
    return "unix", address


def new_task_id() -> str:
    return "kgym-" + uuid.uuid4().hex


def build_task(reference_code: Optional[str] = None, kernel_code: Optional[str] = None,
               backend: Optional[str] = "triton", workflow: str = "kernelbench", **fields: Any) -> Dict[str, Any]:
    """The kgymd task for evaluate()'s arguments: task_id, priority,
    timeout_s and resources are the task's; every other field goes into the
    payload (KernelGYM's request fields by their names)."""
    if not isinstance(workflow, str) or not workflow:
        raise ValueError("workflow: expected a workflow name such as 'kernelbench'")
    task: Dict[str, Any] = {"workflow": workflow}
    for k in _TASK_KEYS:
        if fields.get(k) is not None:
            task[k] = fields.pop(k)
        else:
            fields.pop(k, None)
    payload: Dict[str, Any] = {}
    if reference_code is not None:
        payload["reference_code"] = reference_code
    if kernel_code is not None:
        payload["kernel_code"] = kernel_code
    if backend is not None:
        payload["backend"] = backend
    payload.update(fields)
    task["payload"] = payload
    return task


def as_task(item: Mapping[str, Any]) -> Dict[str, Any]:
    """A task of evaluate_many: a dict of evaluate()'s keyword arguments, or
    a whole kgymd task (one with a "payload"); always with a task id."""
    if not isinstance(item, Mapping):
        raise TypeError("a task is a dict of evaluate()'s arguments, not %s" % type(item).__name__)
    task = dict(item) if "payload" in item else build_task(**item)
    if not task.get("task_id"):
        task["task_id"] = new_task_id()
    return task


class AsyncClient:
    """An asyncio client of kgymd (see the module's documentation).

    ``timeout`` bounds the wait for one reply (not for a task: that is the
    task's own ``timeout_s``); ``token`` is the HTTP bearer token (default
    ``$KGYM_TOKEN``).
    """

    def __init__(self, address: Optional[str] = None, *, token: Optional[str] = None, timeout: float = 60.0,
                 max_retries: int = 5, retry_backoff: float = 0.25, max_request_bytes: int = 4 << 20,
                 max_line_bytes: int = 256 << 20, http_threads: int = 64, poll_interval: float = 0.5) -> None:
        self.kind, self.address = resolve_address(address)
        self.timeout = timeout
        self.max_retries = max_retries
        self.retry_backoff = retry_backoff
        self.max_request_bytes = max_request_bytes
        self.max_line_bytes = max_line_bytes
        self.poll_interval = poll_interval
        self._conn: Optional[_socket.SocketConnection] = None
        self._lock: Optional[asyncio.Lock] = None
        self._http: Optional[_http.HTTPTransport] = None
        self._pool: Optional[concurrent.futures.ThreadPoolExecutor] = None
        if self.kind == "http":
            self._http = _http.HTTPTransport(self.address, token or os.environ.get("KGYM_TOKEN"), None)
            self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=http_threads,
                                                               thread_name_prefix="kgym-http")

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    async def close(self) -> None:
        if self._conn is not None:
            await self._conn.close()
            self._conn = None
        if self._pool is not None:
            self._pool.shutdown(wait=False)
            self._pool = None
        if self._http is not None:
            self._http.close()

    # ------------------------------------------------------------ plumbing

    async def _retry(self, fn: Callable[[], Awaitable[T]]) -> T:
        delay = self.retry_backoff
        attempt = 0
        while True:
            try:
                return await fn()
            except (ConnectionLost, Unavailable) as e:
                if getattr(e, "code", "") == "draining" or attempt >= self.max_retries:
                    raise
                attempt += 1
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)

    async def _connection(self) -> _socket.SocketConnection:
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self._conn is None or self._conn.closed:
                conn = _socket.SocketConnection(self.address, self.max_line_bytes, self.max_request_bytes)
                await conn.open()
                try:
                    hello = await self._one(conn, {"op": "hello"})
                except BaseException:
                    await conn.close()
                    raise
                if 1 not in (hello.get("protocol") or []):
                    await conn.close()
                    raise ProtocolError("the server at the socket does not speak kgymd protocol 1")
                self._conn = conn
            return self._conn

    async def _one(self, conn: _socket.SocketConnection, req: Dict[str, Any], task_id: Optional[str] = None
                   ) -> Dict[str, Any]:
        rid, call = await conn.start(req)
        try:
            try:
                msg = await asyncio.wait_for(call.next(), self.timeout) if self.timeout else await call.next()
            except asyncio.TimeoutError:
                raise WaitTimeout("kgymd did not answer '%s' within %g s" % (req.get("op"), self.timeout)) from None
        finally:
            conn.finish(rid)
        return _socket.check(msg, task_id)

    async def _request(self, req: Dict[str, Any], task_id: Optional[str] = None) -> Dict[str, Any]:
        async def once() -> Dict[str, Any]:
            return await self._one(await self._connection(), req, task_id)
        return await self._retry(once)

    async def _in_thread(self, fn: Callable[..., T], *args: Any) -> T:
        loop = asyncio.get_event_loop()
        return await loop.run_in_executor(self._pool, fn, *args)

    async def _hcall(self, method: str, path: str, body: Any = None, task_id: Optional[str] = None) -> Any:
        assert self._http is not None
        http = self._http

        async def once() -> Any:
            return await self._in_thread(http.call, method, path, body, task_id)
        return await self._retry(once)

    @staticmethod
    def _q(task_id: str) -> str:
        return urllib.parse.quote(task_id, safe="")

    # ------------------------------------------------------------ single operations

    async def hello(self) -> Dict[str, Any]:
        """Who is there: kgymd's hello reply, or the HTTP server's ``GET /``."""
        if self._http is not None:
            return _as_dict(await self._hcall("GET", "/"))
        return _strip(await self._request({"op": "hello"}))

    async def submit_task(self, task: Mapping[str, Any]) -> str:
        """Submit one kgymd task ({"workflow", "payload", ...}); its task id."""
        t = as_task(task)
        tid = t["task_id"]
        if self._http is not None:
            body = {k: t[k] for k in ("workflow", "payload", "task_id", "priority", "timeout_s", "resources")
                    if k in t}
            doc = await self._hcall("POST", "/workflow/submit", body, tid)
            return str((doc or {}).get("task_id") or tid)
        reply = await self._request({"op": "submit", "task": t}, tid)
        err = _socket.rejected_error(reply, tid)
        if err is not None:
            raise err
        acc = reply.get("accepted") or []
        if not acc:
            raise ProtocolError("kgymd neither accepted nor rejected the task")
        return str(acc[0].get("task_id") or tid)

    async def submit(self, reference_code: Optional[str] = None, kernel_code: Optional[str] = None,
                     backend: Optional[str] = "triton", **fields: Any) -> str:
        """Submit a task with evaluate()'s arguments; its task id."""
        return await self.submit_task(build_task(reference_code, kernel_code, backend, **fields))

    async def status(self, task_id: str) -> Status:
        if self._http is not None:
            d = await self._hcall("GET", "/status/" + self._q(task_id), None, task_id) or {}
            st = _http.STATES.get(str(d.get("status")), str(d.get("status")))
            return Status(task_id=str(d.get("task_id") or task_id), state=st, error_code=d.get("error_code"),
                          error_message=d.get("error_message"), queue_position=d.get("queue_position"), raw=d)
        d = _strip(await self._request({"op": "status", "task_id": task_id}, task_id))
        return Status(task_id=d.get("task_id", task_id), state=str(d.get("state")), error_code=d.get("error_code"),
                      error_message=d.get("error_message"), attempt=d.get("attempt"), raw=d)

    async def result(self, task_id: str) -> Result:
        """The result of a task that ended; NotReady while it runs."""
        if self._http is not None:
            d = await self._hcall("GET", "/results/" + self._q(task_id), None, task_id) or {}
            if isinstance(d.get("result"), dict):          # KernelGYM's WorkflowResponse
                d = dict(d["result"], task_id=d.get("task_id", task_id))
            st = _http.STATES.get(str(d.get("status")), "")
            if st in ("queued", "running") or not any(k in d for k in ("compiled", "correctness", "error_code")):
                raise NotReady("task '%s' has not ended (%s)" % (task_id, st or d.get("status")))
            return Result.from_dict(d, task_id=task_id)
        d = await self._request({"op": "result", "task_id": task_id}, task_id)
        return Result.from_dict(d.get("result") or {}, state=d.get("state"), task_id=task_id)

    async def cancel(self, task_id: str) -> Dict[str, Any]:
        """Cancel a queued or running task: {task_id, state, cancelled}."""
        if self._http is not None:
            d = await self._hcall("DELETE", "/tasks/" + self._q(task_id), None, task_id) or {}
            if "state" not in d and "status" in d:
                d["state"] = _http.STATES.get(str(d["status"]), d["status"])
            return d
        return _strip(await self._request({"op": "cancel", "task_id": task_id}, task_id))

    async def health(self) -> Dict[str, Any]:
        if self._http is not None:
            return _as_dict(await self._hcall("GET", "/health"))
        return _strip(await self._request({"op": "health"}))

    async def workers(self) -> Dict[str, Any]:
        if self._http is not None:
            return _as_dict(await self._hcall("GET", "/workers/status"))
        return _strip(await self._request({"op": "workers"}))

    async def stats(self) -> Dict[str, Any]:
        if self._http is not None:
            return _as_dict(await self._hcall("GET", "/queue/status"))
        return _strip(await self._request({"op": "stats"}))

    # ------------------------------------------------------------ waiting

    async def iter_wait(self, task_ids: Iterable[str], timeout: Optional[float] = None
                        ) -> AsyncGenerator[Result, None]:
        """Results of the tasks as they end (at once for those that had
        ended), until all have or ``timeout`` seconds passed.  NotFound at
        the end when some id names no task."""
        remaining = dict.fromkeys(task_ids)      # ordered, and O(1) to remove from
        deadline = None if timeout is None else time.monotonic() + timeout
        if self._http is not None:
            async for r in self._poll(list(remaining), deadline):
                yield r
            return
        failures = 0
        delay = self.retry_backoff
        while remaining:
            chunk = list(remaining)[:_WAIT_MAX_IDS]
            req: Dict[str, Any] = {"op": "wait", "task_ids": chunk}
            if deadline is not None:
                req["timeout_ms"] = max(0, int((deadline - time.monotonic()) * 1000))
            try:
                conn = await self._connection()
                rid, call = await conn.start(req)
                try:
                    while True:
                        msg = await call.next()
                        if msg.get("event") == "result":
                            tid = str(msg.get("task_id"))
                            remaining.pop(tid, None)
                            failures = 0
                            yield Result.from_dict(msg.get("result") or {}, state=msg.get("state"), task_id=tid)
                        elif msg.get("done") is True:
                            missing = msg.get("not_found") or []
                            if missing:
                                raise NotFound("no task with task_id %s" % ", ".join("'%s'" % m for m in missing),
                                               task_id=str(missing[0]))
                            if msg.get("pending"):
                                return          # the timeout came first
                            for tid in chunk:
                                remaining.pop(tid, None)
                            break
                        else:
                            _socket.check(msg)
                finally:
                    conn.finish(rid)
            except (ConnectionLost, Unavailable) as e:
                if getattr(e, "code", "") == "draining" or failures >= self.max_retries:
                    raise
                failures += 1
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)

    async def _poll(self, ids: List[str], deadline: Optional[float]) -> AsyncGenerator[Result, None]:
        """HTTP has no wait: poll each task's status, fetch results of ended ones."""
        remaining = list(ids)
        interval = 0.05
        while remaining:
            for tid in list(remaining):
                st = await self.status(tid)
                if st.done:
                    remaining.remove(tid)
                    r = await self.result(tid)
                    r.state = st.state
                    yield r
            if not remaining or (deadline is not None and time.monotonic() >= deadline):
                return
            pause = interval if deadline is None else min(interval, max(0.0, deadline - time.monotonic()))
            await asyncio.sleep(pause)
            interval = min(interval * 1.5, self.poll_interval)

    async def wait(self, task_id: str, timeout: Optional[float] = None) -> Result:
        """The task's result once it ends; WaitTimeout after ``timeout`` s."""
        gen = self.iter_wait([task_id], timeout)
        try:
            async for r in gen:
                return r
        finally:
            await gen.aclose()
        raise WaitTimeout("task '%s' did not end within %s s" % (task_id, timeout))

    async def wait_many(self, task_ids: Iterable[str], timeout: Optional[float] = None) -> Dict[str, Result]:
        """{task_id: result} of the tasks that ended within ``timeout`` s."""
        return {r.task_id: r async for r in self.iter_wait(task_ids, timeout)}

    # ------------------------------------------------------------ evaluating

    async def _evaluate_once(self, task: Dict[str, Any]) -> Result:
        tid = task["task_id"]
        if self._http is not None:
            if task.get("workflow") == "kernelbench":
                body = dict(task["payload"], task_id=tid)
                if "priority" in task:
                    body["priority"] = task["priority"]
                if "timeout_s" in task:
                    body["timeout"] = int(math.ceil(float(task["timeout_s"])))
                if "resources" in task:
                    body["resources"] = task["resources"]
                d = await self._hcall("POST", "/evaluate", body, tid)
                return Result.from_dict(d or {}, task_id=tid)
            await self.submit_task(task)
            return await self.wait(tid)

        async def once() -> Result:
            conn = await self._connection()
            rid, call = await conn.start({"op": "submit", "task": task, "wait": True})
            try:
                reply = _socket.check(await call.next(), tid)
                err = _socket.rejected_error(reply, tid)
                if err is not None:
                    raise err
                while True:
                    msg = await call.next()
                    if msg.get("event") == "result":
                        return Result.from_dict(msg.get("result") or {}, state=msg.get("state"), task_id=tid)
                    if msg.get("done") is True:
                        raise ProtocolError("kgymd ended the wait without the task's result")
                    _socket.check(msg, tid)
            finally:
                conn.finish(rid)
        return await self._retry(once)

    async def evaluate_task(self, task: Mapping[str, Any]) -> Result:
        """Submit one kgymd task and wait for its result; waits and submits
        again while the queue is full."""
        t = as_task(task)
        while True:
            try:
                return await self._evaluate_once(t)
            except QueueFull as e:
                await asyncio.sleep(e.retry_after)

    async def evaluate(self, reference_code: Optional[str], kernel_code: Optional[str],
                       backend: Optional[str] = "triton", **fields: Any) -> Result:
        """Evaluate a candidate against a reference: KernelGYM's request
        fields by their names (num_correct_trials, num_perf_trials, device,
        entry_point, ...), plus the task's task_id, priority, timeout_s,
        resources and workflow (default kernelbench)."""
        return await self.evaluate_task(build_task(reference_code, kernel_code, backend, **fields))

    async def evaluate_many(self, tasks: Iterable[Mapping[str, Any]], concurrency: int = 32, progress: Any = True,
                            raise_errors: bool = False, progress_stream: Optional[IO[str]] = None
                            ) -> AsyncGenerator[Result, None]:
        """Evaluate many tasks, ``concurrency`` in flight, yielding results as
        they end (``Result.index`` is the task's position).  Each task is a
        dict of evaluate()'s keyword arguments, or a kgymd task.  With
        ``progress`` a line on stderr (only when it is a terminal) counts
        them.  A task the client cannot get evaluated (rejected, server gone)
        yields a Result with state "error" and error_code CLIENT_ERROR, or,
        with ``raise_errors``, raises."""
        if concurrency < 1:
            raise ValueError("concurrency: expected at least 1")
        try:
            total: Optional[int] = len(tasks)  # type: ignore[arg-type]
        except TypeError:
            total = None
        items = enumerate(tasks)
        out: "asyncio.Queue[Tuple[str, Any]]" = asyncio.Queue()
        prog = Progress(total, progress, progress_stream)

        async def worker() -> None:
            try:
                for idx, item in items:
                    tid = item.get("task_id", "") if isinstance(item, Mapping) else ""
                    try:
                        task = as_task(item)
                        tid = task["task_id"]
                        r = await self.evaluate_task(task)
                    except (KgymError, TypeError, ValueError) as e:
                        if raise_errors:
                            raise
                        r = Result.client_error(str(tid or ""), e)
                    r.index = idx
                    out.put_nowait(("res", r))
            except asyncio.CancelledError:
                raise
            except Exception as e:  # noqa: BLE001 - raised in the consumer (a bad iterable, a bug)
                out.put_nowait(("exc", e))

        n = min(concurrency, total) if total is not None else concurrency
        workers = [asyncio.ensure_future(worker()) for _ in range(max(n, 1))]
        for w in workers:
            w.add_done_callback(lambda _f: out.put_nowait(("end", None)))
        running = len(workers)
        try:
            while running:
                kind, v = await out.get()
                if kind == "end":
                    running -= 1
                elif kind == "exc":
                    raise v
                else:
                    prog.update(failed=v.state != "completed")
                    yield v
        finally:
            for w in workers:
                w.cancel()
            prog.close()


def _as_dict(doc: Any) -> Dict[str, Any]:
    if not isinstance(doc, dict):
        raise ProtocolError("the HTTP server's reply is not a JSON object")
    return doc


def _strip(reply: Dict[str, Any]) -> Dict[str, Any]:
    return {k: v for k, v in reply.items() if k not in ("v", "id", "ok")}
