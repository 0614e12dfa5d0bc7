#!/usr/bin/env python3
"""bench/cuda_start.py -- how long CUDA's start takes in N processes at once.

usage: bench/cuda_start.py        (on the GPU machine, with torch's python)

Each process is forked from a parent that imported torch and never
touched CUDA, as a zygote's job processes are; all start together and
time torch.cuda.init(), then the first allocation and kernel (the
context).  N = 1, 1, 2, 4, 8, 12, first alone, then with a keeper process
holding a context the whole time.  One line per N: the p50 and max of
both steps and the wall time.  If context creation took the same time
whatever N, the processes of several jobs could start side by side for
free; on an H200 (2026-11-29) the driver serialises it (0.12 s alone,
0.47 s each for 4, 1.6 s for 12), so each process a job starts costs
every job starting with it.  A developer's tool: no target."""
import json
import os
import time

import torch


def child(wfd, at):
    while time.time() < at:
        time.sleep(0.0005)
    t0 = time.monotonic()
    torch.cuda.init()
    t1 = time.monotonic()
    torch.zeros(1, device="cuda")
    torch.cuda.synchronize()
    t2 = time.monotonic()
    os.write(wfd, (json.dumps([t1 - t0, t2 - t1]) + "\n").encode())


def run(n):
    at = time.time() + 0.3
    pipes, pids = [], []
    for _ in range(n):
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            code = 0
            try:
                child(w, at)
            except BaseException as e:
                os.write(w, (json.dumps([-1, -1, str(e)]) + "\n").encode())
                code = 1
            os._exit(code)
        os.close(w)
        pipes.append(r); pids.append(pid)
    res = []
    for r in pipes:
        data = b""
        while True:
            c = os.read(r, 4096)
            if not c:
                break
            data += c
        os.close(r)
        res.append(json.loads(data.decode()) if data else [-1, -1])
    for p in pids:
        os.waitpid(p, 0)
    return res


def keeper():
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(w)
        torch.zeros(1, device="cuda")
        torch.cuda.synchronize()
        os.read(r, 1)
        os._exit(0)
    os.close(r)
    time.sleep(3)
    return pid, w


def main():
    for keep in (False, True):
        k = keeper() if keep else None
        for n in (1, 1, 2, 4, 8, 12):
            t0 = time.monotonic()
            res = run(n)
            wall = time.monotonic() - t0 - 0.3
            init = sorted(r[0] for r in res)
            ctx = sorted(r[1] for r in res)
            print("keeper=%-5s n=%2d  init p50 %.3f max %.3f | context+zeros p50 %.3f max %.3f | wall %.2f s" % (
                keep, n, init[len(init) // 2], init[-1], ctx[len(ctx) // 2], ctx[-1], wall), flush=True)
        if k:
            os.write(k[1], b"x")
            os.waitpid(k[0], 0)


if __name__ == "__main__":
    main()
