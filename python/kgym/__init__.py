"""kgym: the Python client of kgymd, the GPU kernel evaluation daemon.

    import kgym
    with kgym.Client() as c:                 # $KGYM_SOCKET, or an http:// URL
        r = c.evaluate(reference_code, kernel_code, backend="triton")
        print(r.correctness, r.speedup, kgym.rewards.weighted(r)["score"])

Client (blocking) and AsyncClient (asyncio) speak kgymd's socket protocol
or KernelGYM's HTTP API; Result, Timing and Trial are typed results;
kgym.rewards holds drkernel's reward functions; kgym.feedback() the text a
multi-turn trainer shows the model; kgym.verl.compute_score a VERL reward.
Standard library only.
"""
from . import rewards
from .client import AsyncClient, build_task
from .errors import (BadRequest, ConnectionLost, Forbidden, KgymError, NotFound, NotReady, ProtocolError, QueueFull,
                     RequestError, ServerError, TooLarge, Unavailable, WaitTimeout)
from .extract import extract_kernel
from .feedback import feedback
from .result import Result, Status, Timing, Trial
from .sync import Client

__version__ = "0.1.0"

__all__ = [
    "AsyncClient", "BadRequest", "Client", "ConnectionLost", "Forbidden", "KgymError", "NotFound", "NotReady",
    "ProtocolError", "QueueFull", "RequestError", "Result", "ServerError", "Status", "Timing", "TooLarge", "Trial",
    "Unavailable", "WaitTimeout", "build_task", "extract_kernel", "feedback", "rewards",
]
