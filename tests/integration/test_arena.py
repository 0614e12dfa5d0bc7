#!/usr/bin/env python3
"""libkgym_arena.so (plugins/python/arena.c), the allocator a GPU executor's
forward allocates from, on any machine: it only hands out and takes back
addresses, so fake ones test it.  What it must hold: allocations inside the
arena, aligned, never overlapping; freed ranges merged and reused; nothing
handed out twice; a pointer of an earlier arena ignored (a later arena may
reuse its addresses); and when the arena is full, no pointer into it (the
driver's memory, or NULL where there is no driver)."""
import ctypes
import os
import subprocess

import kgymtest as k

LIB = os.path.join(k.builddir(), "plugins", "python", ".libs", "libkgym_arena.so")
BASE = 1 << 40
MIB = 1 << 20


def load():
    if not os.path.exists(LIB):
        raise k.Skip("%s is not built" % LIB)
    lib = ctypes.CDLL(LIB)
    lib.kgym_arena_set.argtypes = [ctypes.c_uint64, ctypes.c_uint64]
    lib.kgym_arena_alloc.argtypes = [ctypes.c_ssize_t, ctypes.c_int, ctypes.c_void_p]
    lib.kgym_arena_alloc.restype = ctypes.c_void_p
    lib.kgym_arena_free.argtypes = [ctypes.c_void_p, ctypes.c_ssize_t, ctypes.c_int, ctypes.c_void_p]
    lib.kgym_arena_spilled.restype = ctypes.c_uint64
    return lib


def have_driver():
    try:
        ctypes.CDLL("libcuda.so.1")
        return True
    except OSError:
        return False


def test_allocations_fit_and_never_overlap():
    lib = load()
    k.check(lib.kgym_arena_set(BASE, 8 * MIB) == 0, "set")
    sizes = [1, 511, 512, 513, 3000, MIB, 2 * MIB + 7]
    got = []
    for n in sizes:
        p = lib.kgym_arena_alloc(n, 0, None)
        k.check(p is not None and p % 512 == 0, "aligned: %r for %d" % (p, n))
        k.check(BASE <= p and p + n <= BASE + 8 * MIB, "inside the arena: %x + %d" % (p, n))
        got.append((p, n))
    spans = sorted(got)
    for (a, n), (b, _) in zip(spans, spans[1:]):
        k.check(a + n <= b, "no overlap: %x+%d and %x" % (a, n, b))
    for p, n in got:
        lib.kgym_arena_free(p, n, 0, None)
    # Everything back and merged: the whole arena is one range again.
    p = lib.kgym_arena_alloc(8 * MIB, 0, None)
    k.check(p == BASE, "all of it in one piece after the frees: %r" % p)
    lib.kgym_arena_free(p, 8 * MIB, 0, None)


def test_full_arena_never_hands_out_its_memory_twice():
    lib = load()
    k.check(lib.kgym_arena_set(BASE, 4 * MIB) == 0, "set")
    a = lib.kgym_arena_alloc(3 * MIB, 0, None)
    b = lib.kgym_arena_alloc(2 * MIB, 0, None)      # does not fit
    k.check(a == BASE, "first fit: %r" % a)
    if have_driver():
        k.check(b is None or not (BASE <= b < BASE + 4 * MIB), "a spill is not arena memory: %r" % b)
    else:
        k.check(b is None, "no driver here: NULL, never arena memory: %r" % b)
    # Freeing something never handed out changes nothing.
    lib.kgym_arena_free(BASE + MIB, MIB, 0, None)
    c = lib.kgym_arena_alloc(2 * MIB, 0, None)
    k.check(c is None or not (BASE <= c < BASE + 3 * MIB), "a stray free gave nothing back: %r" % c)
    lib.kgym_arena_free(a, 3 * MIB, 0, None)
    k.check(lib.kgym_arena_alloc(4 * MIB, 0, None) == BASE, "the real free did")


def test_earlier_arena_pointers_ignored():
    lib = load()
    k.check(lib.kgym_arena_set(BASE, 4 * MIB) == 0, "set")
    lib.kgym_arena_alloc(MIB, 0, None)
    old = lib.kgym_arena_alloc(MIB, 0, None)        # at BASE + 1 MiB
    # A later job's arena at the same addresses: the old segment, handed
    # back late, must not become free space in the new one.
    k.check(lib.kgym_arena_set(BASE, 4 * MIB) == 0, "set again")
    live = lib.kgym_arena_alloc(4 * MIB, 0, None)
    k.check(live == BASE, "the new arena whole: %r" % live)
    lib.kgym_arena_free(old, MIB, 0, None)
    lib.kgym_arena_free(BASE, MIB, 0, None)         # the live one's address, another size
    again = lib.kgym_arena_alloc(MIB, 0, None)
    k.check(again is None or not (BASE <= again < BASE + 4 * MIB),
            "the old pointers' ranges are still in use, not free: %r" % again)
    lib.kgym_arena_free(live, 4 * MIB, 0, None)
    k.check(lib.kgym_arena_alloc(4 * MIB, 0, None) == BASE, "the live one's own free did")


def test_too_small():
    lib = load()
    k.check(lib.kgym_arena_set(BASE + 1, 100) != 0, "an arena smaller than one aligned block is refused")


# A call's outputs, once the executor lets go of them, are freed at once --
# with the garbage collector off, as it is during calls -- so that the
# caching allocator reuses their memory (in the arena) for the next call.
FREED_PROBE = """
import gc, sys, weakref
sys.path.insert(0, sys.argv[1])
import torch
from kgym_common import flatten_outputs
gc.disable()
x = torch.zeros(4)
w = weakref.ref(x)
flat = flatten_outputs((x, [torch.ones(1)], 2.0))
assert len(flat) == 3 and flat[0] is x, flat
del x, flat
print("freed" if w() is None else "kept")
"""


def run_probe(source, expect):
    """A probe's source run by the harness's interpreter (torch), with the
    harness's modules importable; fails unless it prints `expect`."""
    py = os.environ.get("KGYM_PYTHON", "/usr/bin/python3")
    p = subprocess.run([py, "-c", source, os.path.join(k.srcdir(), "plugins", "python")],
                       capture_output=True, text=True, timeout=120)
    if "No module named 'torch'" in p.stderr:
        raise k.Skip("%s cannot import torch" % py)
    k.check(p.returncode == 0 and p.stdout.strip() == expect, "%r %r" % (p.stdout, p.stderr[-1500:]))


def test_outputs_freed_without_the_collector():
    run_probe(FREED_PROBE, "freed")


# The judge's side of the arena, with a CPU tensor for the arena: where
# the executor says an output lies is the candidate's word, so an offset
# outside the arena or not aligned to the dtype is a forgery (REWARD_HACK
# forged_result), never a read; a good one gives a view of exactly those
# bytes, kept for the next call at the same offset; and a round's outputs
# that overlap are seen (OutputsReused: the timing goes on a call a round).
OFFSETS_PROBE = """
import sys
sys.path.insert(0, sys.argv[1])
import torch
import kgym_judge
from kgym_common import CTL_OUTS, OUT_IN_SLOT
from kgym_judge_compare import Verdict


class Ctl:
    words = [0] * (CTL_OUTS + 4)


peer = kgym_judge.Peer("candidate", None, None)
peer.ctl = Ctl()
peer.arena = torch.arange(256, dtype=torch.int32).to(torch.uint8).repeat(4)   # 1024 bytes
slot = torch.zeros(4, dtype=torch.float32)                                      # 16 bytes
judge = kgym_judge.Judge.__new__(kgym_judge.Judge)
peer.ctl.words[CTL_OUTS + 1] = OUT_IN_SLOT
assert judge.output_source(peer, 1, slot, "call 1") is slot
peer.ctl.words[CTL_OUTS] = 64
v = judge.output_source(peer, 0, slot, "call 1")
assert v.dtype == torch.float32 and tuple(v.shape) == (4,), v
assert v.view(torch.uint8).tolist() == list(range(64, 80)), v.view(torch.uint8)
assert judge.output_source(peer, 0, slot, "call 2") is v
for bad in (1024 - 8, 1010, 2, 1 << 63, OUT_IN_SLOT - 1):
    peer.ctl.words[CTL_OUTS] = bad
    try:
        judge.output_source(peer, 0, slot, "call 3")
    except Verdict as e:
        assert e.code == "REWARD_HACK" and e.hack["kind"] == "forged_result", (bad, e.code, e.hack)
    else:
        raise AssertionError("offset %d was read" % bad)
# A round's outputs in the arena must lie apart: a buffer the model keeps
# and returns every call would show the last call's values for all.
from kgym_judge_compare import OutputsReused
peer.outputs = [slot, slot, slot, slot]               # 2 calls x 2 outputs, 16 bytes each
for words, reused in (([0, 16, 32, 48], False), ([0, OUT_IN_SLOT, 0, OUT_IN_SLOT], True),
                      ([0, 16, 8, 64], True), ([OUT_IN_SLOT] * 4, False)):
    peer.ctl.words[CTL_OUTS:CTL_OUTS + 4] = words
    try:
        judge.outputs_apart(peer, 2, 2)
        assert not reused, words
    except OutputsReused:
        assert reused, words
print("checked")
"""


def test_judge_checks_offsets():
    run_probe(OFFSETS_PROBE, "checked")


if __name__ == "__main__":
    k.run([test_allocations_fit_and_never_overlap, test_full_arena_never_hands_out_its_memory_twice,
           test_earlier_arena_pointers_ignored, test_too_small, test_outputs_freed_without_the_collector,
           test_judge_checks_offsets])
