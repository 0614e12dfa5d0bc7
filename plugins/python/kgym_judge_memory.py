"""kgym_judge_memory.py -- where a job's buffers live: the judge's shared
areas (inputs, each executor's outputs), each executor's output arena on a
GPU, the limit on a call's outputs and admission by size.

A part of the judge (kgym_judge.Judge inherits it), split from
kgym_judge.py so that each file has one job; like it, imported only by the
judge, after its fork: never in an executor's address space.
"""

import errno
import os
import time

import torch

from kgym_common import CTL_BYTES, CTL_OUTS, area_layout, device_bytes, dtype_name, tensors_of_area, wait_until
from kgym_judge_compare import Verdict

# An executor's arena (make_arena): room for a round's outputs four times
# over and the forward's own tensors; at least this much.
ARENA_MIN_BYTES = 512 << 20
# A problem whose buffers (six times a call's inputs and outputs) take more
# than 1/BIG_PROBLEM_SHARE of the device runs alone on it (admit_alone).
BIG_PROBLEM_SHARE = 4
# How long a job waits for device memory another job holds (make_arena):
# a 6 GiB problem's job holds its own for about 20 s on an H200.
DEVICE_MEMORY_WAIT_S = 60


class DeviceMemory:
    """The judge's device and shared memory (see the module's text)."""

    def allocate(self, specs, name):
        """An area for tensors of `specs` [(dtype, shape)]: (desc, views, fd)."""
        offs, size = area_layout(specs)
        desc = {"kind": "cuda" if self.gpu else "memfd", "size": size,
                "tensors": [{"dtype": dtype_name(dt), "shape": list(sh), "offset": o}
                            for (dt, sh), o in zip(specs, offs)]}
        fd = None
        if self.gpu:
            ptr, fd, _ = self.cuda.create(size)
            self.area_fds.append(fd)
            views = tensors_of_area(desc, ptr)
            for v in views:
                v.zero_()          # handed over freshly initialised, whatever the memory held
        else:
            import mmap
            fd = self.memfds[name]
            try:
                os.ftruncate(fd, size)
            except OSError as e:
                if e.errno != errno.EFBIG:
                    raise
                # RLIMIT_FSIZE bounds a memfd as it bounds a file.
                raise Verdict("RESOURCE_ERROR", "the problem's %s take %.1f MiB, over [plugin.python] "
                              "max_file_size, which bounds the judge's shared areas on a CPU"
                              % (name.replace("-", " "), size / (1 << 20)), completed=False) from None
            mm = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
            self.keep_maps = getattr(self, "keep_maps", []) + [mm]
            views = tensors_of_area(desc, None, mm)
        return desc, views, fd

    def make_arena(self, peer, out_bytes, in_bytes):
        """On a GPU, device memory of the judge's for an executor's forward
        to allocate from (kgym_executor.OutputArena): its outputs then lie
        where the judge reads them, and no executor copy needs subtracting.
        An eighth of what the device has free, or what a round's outputs
        need at least (twice over); RESOURCE_ERROR when the device has not
        that much free; none (the old copy) only when limits.output_arena
        is false (a diagnostic: bench/judge_clock.py --arena off)."""
        peer.arena = peer.arena_fd = None
        peer.arena_views = {}
        if not self.gpu or self.limits.get("output_arena") is False:
            return
        if peer.role == "candidate" and self.ref.arena is None:
            return
        if CTL_OUTS + len(self.out_specs) * self.slots > CTL_BYTES // 8:
            self.meta["output_arena"] = "off: more outputs a round than the control page holds"
            return
        want = max(ARENA_MIN_BYTES, 4 * out_bytes + 2 * in_bytes)
        need = 2 * out_bytes + (64 << 20)
        # Another job on this GPU may hold what this one needs (two 6 GiB
        # problems at once do): wait for it to end, a while, rather than
        # fail at once.
        until = time.monotonic() + DEVICE_MEMORY_WAIT_S
        if self.deadline is not None:
            until = min(until, self.deadline - 5)
        free, waited = wait_until(self.device_free, lambda f: f >= need + (256 << 20), until)
        if waited >= 0.05:
            self.meta["device_memory_wait_ms"] = self.meta.get("device_memory_wait_ms", 0) + waited * 1e3
        # An eighth of what is free at most, beyond the need: a 6 GiB
        # problem's two arenas at a quarter each took 47 GiB of an H200,
        # and the judge then ran short for the outputs' own copies.
        size = min(want, max(need, free // 8))
        if size + (256 << 20) > free:
            # Fail closed: without an arena the executor's copy is back on
            # the clock and in the subtraction -- the copy a candidate can
            # skip -- and how full the device is may be another job's doing.
            raise Verdict("RESOURCE_ERROR", "the GPU has %d MiB free after %.0f s of waiting, too little for the "
                          "judge's output arena for the %s (%d MiB at least)"
                          % (free >> 20, waited, peer.role, need >> 20), completed=False)
        ptr, fd, size = self.cuda.create(size)
        self.area_fds.append(fd)
        peer.arena, peer.arena_fd = device_bytes(ptr, size), fd
        peer.arena.zero_()      # whatever the memory held before (another job's) is gone
        if peer.role == "reference":
            self.meta["output_arena"] = "on"

    def admit_alone(self, in_bytes, out_bytes):
        """A problem whose buffers take a big share of the device (its
        inputs and outputs held about six times over: areas, arenas, the
        judge's copies, the comparison's) runs alone on its GPU from here
        on: the exclusive lock, before anything of its size is allocated.
        Two 6 GiB problems side by side on an H200, each at its trials'
        peak, ran the judge of one of them out of memory (RESOURCE_ERROR
        for a problem that fits alone).  Jobs already on the GPU keep what
        they hold; the lock only stops new work beside this job's."""
        if not self.gpu:
            return
        total = torch.cuda.get_device_properties(torch.cuda.current_device()).total_memory
        if BIG_PROBLEM_SHARE * 6 * (in_bytes + out_bytes) > total:
            self.phase("compile", "exclusive")
            self.meta["gpu_alone_from"] = "set-up"

    def output_limit(self):
        """[plugin.python] max_output_bytes, or where it is auto (0): 4G on
        a CPU, a sixth of the device's memory on a GPU (one call's outputs
        are held about six times over: both executors' areas and arenas,
        the judge's copy, the expected outputs)."""
        limit = int(self.limits.get("max_output_bytes") or 0)
        if limit > 0:
            return limit
        if self.gpu:
            return torch.cuda.get_device_properties(torch.cuda.current_device()).total_memory // 6
        return 4 << 30
