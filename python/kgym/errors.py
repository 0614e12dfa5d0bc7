"""Exceptions of the kgym client.

Every error kgymd (or kgymd-http) answers becomes one exception class, chosen
by the protocol's error code (kgymd-protocol(7), ERRORS) or the HTTP status;
programs test the class or ``.code``, people read the message.
"""
from __future__ import annotations

import re
from typing import Any, Dict, Optional, Type


class KgymError(Exception):
    """Base class: ``code`` is the protocol's error code (or the client's own)."""

    code: str = "error"

    def __init__(self, message: str, code: Optional[str] = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code


class ConnectionLost(KgymError):
    """The server could not be reached, or the connection broke, and the
    retries allowed for the request ran out."""

    code = "connection_lost"


class Unavailable(KgymError):
    """The server does not take work now (draining, or HTTP 503)."""

    code = "draining"


class ProtocolError(KgymError):
    """The server's reply is not what the protocol says (not JSON, no ok,
    an unsupported protocol version)."""

    code = "protocol_error"


class RequestError(KgymError):
    """The server refused the request; ``code`` says why."""

    code = "bad_request"


class BadRequest(RequestError):
    """A field of the request or of a task is missing, of the wrong type or
    out of range.  ``field`` names it when the message does (``None`` when it
    does not)."""

    code = "bad_request"

    def __init__(self, message: str, code: Optional[str] = None, field: Optional[str] = None) -> None:
        super().__init__(message, code)
        self.field = field if field is not None else field_of(message)


class NotFound(RequestError):
    """No task has this id (or it ended longer ago than the server keeps results)."""

    code = "not_found"

    def __init__(self, message: str, code: Optional[str] = None, task_id: Optional[str] = None) -> None:
        super().__init__(message, code)
        self.task_id = task_id


class NotReady(RequestError):
    """``result`` of a task that has not ended."""

    code = "not_ready"


class QueueFull(RequestError):
    """The server's queue is full; try again after ``retry_after`` seconds."""

    code = "queue_full"

    def __init__(self, message: str, code: Optional[str] = None, retry_after: Optional[float] = None) -> None:
        super().__init__(message, code)
        self.retry_after = retry_after if retry_after is not None else 1.0


class TooLarge(RequestError):
    """The request is larger than the server (or the client's
    ``max_request_bytes``) accepts."""

    code = "too_large"


class Forbidden(RequestError):
    """The peer may not connect, may not use an admin operation, or named
    another user's task."""

    code = "forbidden"


class ServerError(KgymError):
    """The server failed, not the request (``internal``, HTTP 5xx)."""

    code = "internal"


class WaitTimeout(KgymError, TimeoutError):
    """A wait ended before the task did."""

    code = "timeout"


_FIELD_RE = re.compile(r"(?:field|key) '([^']+)'|^\s*'([^']+)'\s*:")
_NEXT_RE = re.compile(r"\s*:\s*(?:(?:field|key) )?(?:'([^']+)'|([A-Za-z_][A-Za-z0-9_.\[\]]*)(?=:))")


def field_of(message: str) -> Optional[str]:
    """The field a kgymd error message names, as a dotted path: "field
    'task_id' is missing" gives task_id, "field 'payload': 'action':
    expected ..." and "field 'payload': num_perf_trials: expected ..." give
    payload.action and payload.num_perf_trials; None when it names none."""
    m = _FIELD_RE.search(message or "")
    if m is None:
        return None
    names = [m.group(1) or m.group(2)]
    end = m.end(1) + 1 if m.group(1) else m.end(2) + 1
    while True:
        n = _NEXT_RE.match(message, end)
        if n is None:
            break
        names.append(n.group(1) or n.group(2))
        end = n.end()
    return ".".join(names)


_BY_CODE: Dict[str, Type[KgymError]] = {
    "bad_request": BadRequest,
    "bad_json": ProtocolError,
    "unsupported_version": ProtocolError,
    "unknown_op": RequestError,
    "too_large": TooLarge,
    "busy": Unavailable,
    "not_found": NotFound,
    "not_ready": NotReady,
    "queue_full": QueueFull,
    "forbidden": Forbidden,
    "too_many_connections": Unavailable,
    "draining": Unavailable,
    "internal": ServerError,
}


def from_error(error: Any, **kw: Any) -> KgymError:
    """The exception for a protocol error object {"code":…, "message":…}."""
    if not isinstance(error, dict):
        return ProtocolError("malformed error object: %r" % (error,))
    code = str(error.get("code") or "error")
    message = str(error.get("message") or code)
    cls = _BY_CODE.get(code, RequestError)
    if cls is QueueFull:
        return QueueFull(message, code, retry_after=kw.get("retry_after"))
    if cls is NotFound:
        return NotFound(message, code, task_id=kw.get("task_id"))
    if cls is BadRequest:
        return BadRequest(message, code, field=kw.get("field"))
    return cls(message, code)
