"""kgym_procs.py -- the job processes as the supervisor sees them: a child's
end and what it means (Child.death), the judge server lent to a job
(ServerChild), and the clean-up after a job (the subreaper's sweep, the
job's files), and the fork every job process is made with (fork_frozen).
Used by the zygote and the supervisors only (kgym_zygote.py,
kgym_supervisor.py, kgym_server.py)."""

import gc
import os
import shutil
import signal
import time


def fork_frozen():
    """os.fork() after gc.freeze(): in the child, what the parent held is
    kept out of every later collection, so that the child's collector never
    writes to the pages it shares with its parent (a fresh executor copying
    the heap page by page, a write at a time, on its first calls: a suspect
    for the slow first ~70 timed calls of a fresh candidate executor that
    bench/judge_clock.py --json showed).  The parent unfreezes at once: a
    long-lived zygote must still collect its own cycles."""
    gc.freeze()
    pid = -1
    try:
        pid = os.fork()
    finally:
        if pid != 0:            # the parent, or no child
            gc.unfreeze()
    return pid


class Child:
    def __init__(self, role, pid, sock):
        self.role, self.pid, self.sock = role, pid, sock
        self.status = None     # waitpid status once reaped
        self.eof = False

    def reap(self, block=True):
        if self.status is None:
            try:
                pid, st = os.waitpid(self.pid, 0 if block else os.WNOHANG)
                if pid == self.pid:
                    self.status = st
            except ChildProcessError:
                self.status = 0
        return self.status

    def kill(self, wait=True):
        """SIGKILL; wait=False leaves the reaping (a CUDA context's teardown
        takes a while) to Job.cleanup, after the answer."""
        if self.status is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            if wait:
                self.reap()
        if self.sock is not None:
            self.sock.close()

    def death(self):
        """A sentence for an unexpected end, and the error code."""
        st = self.reap()
        if os.WIFSIGNALED(st):
            sig = os.WTERMSIG(st)
            if sig == signal.SIGSYS:
                return "SANDBOX_VIOLATION", "the %s process made a system call the sandbox forbids " \
                                            "(killed by SIGSYS)" % self.role
            if sig == signal.SIGXFSZ:
                return "RESOURCE_ERROR", "the %s process wrote past its file size limit" % self.role
            if sig == signal.SIGXCPU:
                return "RESOURCE_ERROR", "the %s process used up its CPU time" % self.role
            if sig == signal.SIGKILL:
                return "RESOURCE_ERROR", "the %s process was killed by SIGKILL (most likely out of " \
                                         "memory)" % self.role
            return "RUNTIME_ERROR", "the %s process crashed: killed by %s" % (self.role, signal.Signals(sig).name)
        return "RUNTIME_ERROR", "the %s process exited (status %d) without a result" % (
            self.role, os.WEXITSTATUS(st) if os.WIFEXITED(st) else -1)


class ServerChild(Child):
    """The zygote's judge server, lent to one job: not the job's to reap;
    killed (by Job.kill_children) only when it did not say it is idle."""

    def kill(self, wait=True):
        self.status = -1

    def reap(self, block=True):
        return self.status


def remove_tree(path):
    """rm -r, also through directories a candidate made unreadable
    (mkdir with mode 0: its seccomp filter forbids chmod, ours does not);
    what is left would make the worker ask to be replaced.  Gone already
    is fine: the worker empties its directory once it has the answer, and
    may be first."""
    def fix(func, p, exc):
        if isinstance(exc[1], FileNotFoundError):
            return
        try:
            os.chmod(os.path.dirname(p), 0o700)
            if os.path.isdir(p) and not os.path.islink(p):
                os.chmod(p, 0o700)
                shutil.rmtree(p, onerror=lambda *a: None)
            else:
                os.unlink(p)
        except OSError:
            pass
    shutil.rmtree(path, onerror=fix)


def children_of(pid):
    """Pids whose parent is `pid` (from /proc: the comm field may hold
    spaces and parentheses, so the parent is read after the last ')')."""
    kids = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % name, "rb") as f:
                st = f.read()
        except OSError:
            continue
        fields = st[st.rfind(b")") + 2:].split()
        if len(fields) > 1 and int(fields[1]) == pid:
            kids.append(int(name))
    return kids


def reap_descendants(limit_s=10.0, exclude=()):
    """Kill and reap every process still below this one but `exclude`.
    This process is the job's subreaper, so what the candidate's compilers
    left running -- or anything the candidate started to outlive the job,
    in a process group of its own -- is reparented to it when its parent
    dies, and ends here.  Only the compiler profile can start processes."""
    me, end = os.getpid(), time.monotonic() + limit_s
    while time.monotonic() < end:
        kids = [k for k in children_of(me) if k not in exclude]
        if not kids:
            if exclude:
                return
            try:
                if os.waitpid(-1, os.WNOHANG)[0]:
                    continue
            except ChildProcessError:
                return                  # none left
            # A child /proc did not show yet (reparented between the two
            # looks): look again shortly rather than block on it.
            time.sleep(0.01)
            continue
        for k in kids:
            try:
                os.kill(k, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for k in kids:
            try:
                os.waitpid(k, 0)
            except ChildProcessError:
                pass


def tail_of(path, n=3000):
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - n))
            return f.read().decode(errors="replace").strip()
    except OSError:
        return ""
