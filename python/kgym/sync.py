"""kgym.Client: the blocking client, for scripts and trainers without asyncio.

It runs an AsyncClient on a private event loop in a daemon thread and waits
for each call, so there is one implementation of the protocol, of the
retries and of evaluate_many's concurrency; it works the same from a plain
script, from a thread, and from a program (a notebook) that already runs an
event loop of its own.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import os
import queue
import threading
from typing import Any, Awaitable, Dict, IO, Iterable, Iterator, Mapping, Optional, TypeVar

from .client import AsyncClient
from .result import Result, Status

T = TypeVar("T")


class Client:
    """Blocking kgymd client; the arguments are AsyncClient's.

    >>> with kgym.Client() as c:                       # doctest: +SKIP
    ...     r = c.evaluate(ref, kernel, backend="torch", device="cpu")
    """

    def __init__(self, address: Optional[str] = None, **kw: Any) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="kgym-client", daemon=True)
        self._thread.start()
        try:
            self._aclient = AsyncClient(address, **kw)
        except BaseException:
            self._stop_loop()
            raise
        self.kind = self._aclient.kind
        self.address = self._aclient.address
        self._closed = False
        self._pid = os.getpid()

    def _check(self) -> None:
        if self._closed:
            raise RuntimeError("the client is closed")
        if os.getpid() != self._pid:
            # The loop's thread did not survive fork(): a call would hang.
            raise RuntimeError("a kgym.Client cannot be used across fork(); make one in each process")

    def _run(self, coro: Awaitable[T]) -> T:
        try:
            self._check()
        except RuntimeError:
            if asyncio.iscoroutine(coro):
                coro.close()
            raise
        fut: "concurrent.futures.Future[T]" = asyncio.run_coroutine_threadsafe(coro, self._loop)  # type: ignore[arg-type]
        try:
            return fut.result()
        except BaseException:
            fut.cancel()  # KeyboardInterrupt: stop the call on the loop too
            raise

    def _stop_loop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        if not self._thread.is_alive():
            self._loop.close()

    def close(self) -> None:
        if self._closed or os.getpid() != self._pid:
            return
        try:
            self._run(self._aclient.close())
        finally:
            self._closed = True
            self._stop_loop()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            if not self._closed and self._loop.is_running():
                self._loop.call_soon_threadsafe(self._loop.stop)
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass

    # The calls, as AsyncClient's.

    def hello(self) -> Dict[str, Any]:
        return self._run(self._aclient.hello())

    def evaluate(self, reference_code: Optional[str], kernel_code: Optional[str],
                 backend: Optional[str] = "triton", **fields: Any) -> Result:
        """Evaluate a candidate (see AsyncClient.evaluate)."""
        return self._run(self._aclient.evaluate(reference_code, kernel_code, backend, **fields))

    def evaluate_task(self, task: Mapping[str, Any]) -> Result:
        return self._run(self._aclient.evaluate_task(task))

    def submit(self, reference_code: Optional[str] = None, kernel_code: Optional[str] = None,
               backend: Optional[str] = "triton", **fields: Any) -> str:
        return self._run(self._aclient.submit(reference_code, kernel_code, backend, **fields))

    def submit_task(self, task: Mapping[str, Any]) -> str:
        return self._run(self._aclient.submit_task(task))

    def status(self, task_id: str) -> Status:
        return self._run(self._aclient.status(task_id))

    def result(self, task_id: str) -> Result:
        return self._run(self._aclient.result(task_id))

    def wait(self, task_id: str, timeout: Optional[float] = None) -> Result:
        return self._run(self._aclient.wait(task_id, timeout))

    def wait_many(self, task_ids: Iterable[str], timeout: Optional[float] = None) -> Dict[str, Result]:
        return self._run(self._aclient.wait_many(list(task_ids), timeout))

    def cancel(self, task_id: str) -> Dict[str, Any]:
        return self._run(self._aclient.cancel(task_id))

    def health(self) -> Dict[str, Any]:
        return self._run(self._aclient.health())

    def workers(self) -> Dict[str, Any]:
        return self._run(self._aclient.workers())

    def stats(self) -> Dict[str, Any]:
        return self._run(self._aclient.stats())

    def evaluate_many(self, tasks: Iterable[Mapping[str, Any]], concurrency: int = 32, progress: Any = True,
                      raise_errors: bool = False, progress_stream: Optional[IO[str]] = None) -> Iterator[Result]:
        """Results as they end (see AsyncClient.evaluate_many).  The tasks
        are read on the client's loop; pass a list (or any iterable that
        does not block)."""
        self._check()
        q: "queue.Queue[Any]" = queue.Queue()
        done = object()
        agen = self._aclient.evaluate_many(tasks, concurrency=concurrency, progress=progress,
                                           raise_errors=raise_errors, progress_stream=progress_stream)

        async def pump() -> None:
            try:
                async for r in agen:
                    q.put(r)
            except BaseException as e:  # noqa: BLE001 - handed to the caller's thread
                q.put(e)
            else:
                q.put(done)
            finally:
                await agen.aclose()

        fut = asyncio.run_coroutine_threadsafe(pump(), self._loop)
        try:
            while True:
                item = q.get()
                if item is done:
                    return
                if isinstance(item, asyncio.CancelledError):
                    return
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            fut.cancel()
