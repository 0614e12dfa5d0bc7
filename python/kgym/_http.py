"""The HTTP transport: KernelGYM's wire API, as kgymd-http serves it.

Blocking calls on http.client (one keep-alive connection per thread); the
asyncio client runs them in a thread pool.  HTTP statuses become the same
exceptions as kgymd's error codes: 400/422 BadRequest, 404 NotFound, 413
TooLarge, 429 QueueFull (with Retry-After), 503 Unavailable, 5xx
ServerError.
"""
from __future__ import annotations

import http.client
import json
import socket
import threading
import urllib.parse
from typing import Any, Dict, Optional, Tuple

from .errors import (BadRequest, ConnectionLost, Forbidden, KgymError, NotFound, ProtocolError, QueueFull,
                     RequestError, ServerError, TooLarge, Unavailable, field_of)

#: KernelGYM's task statuses, as kgymd's states.
STATES = {"pending": "queued", "queued": "queued", "processing": "running", "running": "running",
          "completed": "completed", "failed": "failed", "cancelled": "cancelled", "timeout": "failed"}


def _retry_after(value: Optional[str]) -> Optional[float]:
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None  # an HTTP date: the default applies


def _error_text(body: Any) -> Tuple[str, Optional[str]]:
    """(message, field) from an error body: KernelGYM's ErrorResponse
    {"error","message","error_code"}, or FastAPI's {"detail": ...}."""
    if isinstance(body, dict):
        detail = body.get("detail")
        if isinstance(detail, list) and detail and isinstance(detail[0], dict):
            loc = detail[0].get("loc") or []
            field = str(loc[-1]) if loc else None
            return "field '%s': %s" % (field, detail[0].get("msg", "invalid")), field
        msg = body.get("message") or (detail if isinstance(detail, str) else None) or body.get("error")
        if isinstance(msg, str):
            f = body.get("field")
            return msg, f if isinstance(f, str) else field_of(msg)
    return "", None


class HTTPTransport:
    """Requests to one server; safe to use from several threads."""

    def __init__(self, url: str, token: Optional[str] = None, timeout: Optional[float] = None) -> None:
        u = urllib.parse.urlsplit(url)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ValueError("expected an http:// or https:// URL, not %r" % (url,))
        self.scheme = u.scheme
        self.host = u.hostname
        self.port = u.port
        self.base = u.path.rstrip("/")
        self.token = token
        self.timeout = timeout
        self._local = threading.local()

    def _conn(self) -> http.client.HTTPConnection:
        c = getattr(self._local, "conn", None)
        if c is None:
            cls = http.client.HTTPSConnection if self.scheme == "https" else http.client.HTTPConnection
            c = cls(self.host, self.port, timeout=self.timeout)
            self._local.conn = c
        return c

    def _drop(self) -> None:
        c = getattr(self._local, "conn", None)
        if c is not None:
            c.close()
        self._local.conn = None

    def close(self) -> None:
        self._drop()

    def raw(self, method: str, path: str, body: Any = None) -> Tuple[int, Dict[str, str], bytes]:
        """One request; (status, headers, body).  A keep-alive connection the
        server closed meanwhile is reopened once at once; any other failure
        to talk is ConnectionLost."""
        data = None if body is None else json.dumps(body, separators=(",", ":")).encode()
        headers = {"Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        if self.token:
            headers["Authorization"] = "Bearer " + self.token
        for attempt in (0, 1):
            c = self._conn()
            reused = c.sock is not None
            try:
                c.request(method, self.base + path, body=data, headers=headers)
                r = c.getresponse()
                payload = r.read()
                hdrs = {k.lower(): v for k, v in r.getheaders()}
                if (hdrs.get("connection") or "").lower() == "close":
                    self._drop()
                return r.status, hdrs, payload
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError) as e:
                self._drop()
                if reused and attempt == 0:
                    continue
                raise ConnectionLost("the HTTP server closed the connection: %s" % type(e).__name__) from None
            except (OSError, http.client.HTTPException) as e:
                self._drop()
                if isinstance(e, socket.timeout):
                    raise ConnectionLost("the HTTP server did not answer in time") from None
                raise ConnectionLost("cannot talk to the HTTP server: %s"
                                     % (getattr(e, "strerror", None) or type(e).__name__)) from None
        raise ConnectionLost("the HTTP server closed the connection")  # not reached

    def call(self, method: str, path: str, body: Any = None, task_id: Optional[str] = None) -> Any:
        """The decoded JSON of a 2xx reply; else the exception for it."""
        status, headers, payload = self.raw(method, path, body)
        try:
            doc = json.loads(payload) if payload else None
        except ValueError:
            doc = None
            if 200 <= status < 300:
                raise ProtocolError("HTTP %d reply that is not JSON" % status) from None
        if 200 <= status < 300:
            return doc
        raise self.error(status, headers, doc, task_id)

    @staticmethod
    def error(status: int, headers: Dict[str, str], doc: Any, task_id: Optional[str]) -> KgymError:
        msg, field = _error_text(doc)
        msg = msg or "HTTP %d" % status
        xcode = headers.get("x-error-code")
        if status in (400, 422):
            return BadRequest(msg, field=field)
        if status == 404:
            return NotFound(msg, task_id=task_id)
        if status == 413:
            return TooLarge(msg)
        if status == 429:
            return QueueFull(msg, retry_after=_retry_after(headers.get("retry-after")))
        if status == 503:
            return Unavailable(msg, code="unavailable")    # retried; a socket client's draining is not
        if status in (401, 403):
            return Forbidden(msg)
        if status >= 500:
            return ServerError(msg)
        return RequestError(msg, code=(xcode or "http_%d" % status).lower())
