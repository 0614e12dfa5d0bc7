"""kgym_server.py -- the zygote's judge server: a judge and its reference
executor kept across the jobs of one reference, so that such a job costs
neither a judge's start nor the reference's set-up.

Its life, step by step, each step in the process that takes it:

  - start_server(), in the zygote before a job, where it has none: forks
    the server (kgym_judge.judge_server) and its reference executor, fresh
    from a process that never holds a task's data;
  - lend() and release(), in the job's supervisor: hand the server the
    job's sockets and descriptors, and at the job's end ask it to say that
    nothing of the job is left in it ("idle");
  - settle(), in the zygote after the job, by the supervisor's report: the
    server kept (bound to the job's reference), or killed and dropped;
    reap_dropped() reaps the dropped ones before a later job.

Not judge code: the zygote imports this module, so it is in every
executor's memory; it holds pids and sockets, never a seed, an input or a
verdict.  kgym_judge.py is imported only in the server's process, after
its forks.  (Hence the name: a "kgym_judge" prefix is what
tests/exploits/python/seed_scan.py looks for in an executor.)
"""

import os
import select
import signal
import socket
import sys

from kgym_common import control_memfd, recv_msg, send_msg
from kgym_procs import fork_frozen


class JudgeServer:
    """The zygote's record of its judge server (kgym_judge.judge_server)."""

    def __init__(self, pid, ctl):
        self.pid, self.ctl = pid, ctl
        self.key = None          # the reference it serves, after its first job

    def alive(self):
        try:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
        except ChildProcessError:
            return False
        if pid == 0:
            return True
        # Between jobs it ends only when dropped: say how, for the log.
        sys.stderr.write("kgym_harness: judge server %d ended: %s\n" % (
            self.pid, "signal %d" % os.WTERMSIG(status) if os.WIFSIGNALED(status) else
            "status %d" % os.WEXITSTATUS(status)))
        return False


def start_server(zygote_sock, sandbox_lib):
    """Fork a judge server and, below it, its reference executor; the
    zygote's record of it.  zygote_sock (the worker's) is closed in them."""
    # Imported by the zygote's preload, with torch: a look-up here.
    from kgym_executor import executor_main
    a, b = socket.socketpair()
    pid = fork_frozen()
    if pid == 0:
        try:
            a.close()
            zygote_sock.close()
            judge_ref, ref_end = socket.socketpair()
            ref_ctl = control_memfd()
            if fork_frozen() == 0:
                judge_ref.close()
                b.close()
                executor_main("reference", ref_end, ref_ctl, sandbox_lib)
                os._exit(0)
            ref_end.close()
            import kgym_judge       # after the forks: never in an executor's memory
            kgym_judge.judge_server(b, kgym_judge.Peer("reference", judge_ref, ref_ctl), sandbox_lib)
        finally:
            os._exit(70)
    b.close()
    return JudgeServer(pid, a)


def reap_dropped(dying):
    """Reap the dropped servers that are gone; the others stay in dying."""
    for pid in list(dying):
        try:
            if os.waitpid(pid, os.WNOHANG)[0] == 0:
                continue
        except ChildProcessError:
            pass
        dying.remove(pid)


def lend(srv, fds):
    """Hand the server a job: its descriptors, which it takes over
    (kgym_judge.judge_server's order).  False when it cannot take them
    (the zygote then drops it)."""
    try:
        socket.send_fds(srv.ctl, [b"j"], fds)
    except OSError:
        return False
    return True


def release(sup_sock, timeout):
    """Tell a lent server the job is over; True when it says, within
    `timeout` s, that nothing of the job is left in it."""
    try:
        send_msg(sup_sock, {"type": "done"})
        if select.select([sup_sock], [], [], timeout)[0]:
            msg = recv_msg(sup_sock)
            if msg is not None and msg.get("type") == "idle":
                return True
    except (OSError, ValueError):
        pass
    return False


def settle(srv, report, dying):
    """After a job, by its supervisor's report on the server ({"server":
    "kept"}: not lent; "ok" with the reference's key: lent and idle;
    anything else: to be dropped): the server the zygote keeps, or None
    (it is killed, and its pid added to dying)."""
    if srv is None:
        return None
    if report.get("server") == "ok" and isinstance(report.get("key"), str):
        srv.key = report["key"]
    elif report.get("server") != "kept":
        try:
            os.kill(srv.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        srv.ctl.close()
        dying.append(srv.pid)
        return None
    return srv
