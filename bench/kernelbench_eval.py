#!/usr/bin/env python3
"""bench/kernelbench_eval.py -- one evaluation the way KernelBench's harness
does it, in a fresh process: bench/kernelbench.py's baseline.

usage: kernelbench_eval.py REFERENCE.py CANDIDATE.py [--device cuda|cpu]
           [--correct-trials 5] [--trials 100] [--warmup 3] [--seed 42]
           [--atol 1e-2] [--rtol 1e-2] [--interpret] [--append-ref FILE]

What KernelBench's eval_kernel_against_ref does, step by step: import the
reference (Model, get_inputs, get_init_inputs) and the candidate (ModelNew,
from a file, as KernelBench loads Triton candidates, since @triton.jit
reads its source); build both models under the same seed on the CPU and
move them to the device; for each of --correct-trials trials, seed, make
inputs with get_inputs() on the CPU, move them to the device, run both and
compare with torch.allclose(atol, rtol) after a shape check; then, on one
set of inputs, --warmup calls and --trials timed calls of the candidate,
each between two CUDA events with a synchronize after it -- and the same
for the reference, so that speedup = reference median / candidate median.
All under torch.no_grad().

--device cpu times with time.perf_counter (no events); --interpret runs
Triton candidates with TRITON_INTERPRET=1 on the CPU (bench/kernelbench.py
--dry-run: it proves the candidates and this script without a GPU).
--append-ref FILE appends FILE's text to the reference's source (the dry
run's small sizes: module constants that get_inputs reads when called).

Prints one JSON object on stdout: correct, error (null, or what failed:
"compile: ...", "runtime: ...", "shape: ...", "mismatch: ..."), per-trial
max_abs_err, candidate and reference medians (ms), speedup, and the
seconds of each step (import_torch, load, init, correctness, timing).
The exit status is 0 whenever that object was printed.
"""
import argparse
import importlib.util
import json
import os
import random
import statistics
import sys
import tempfile
import time

T0 = time.monotonic()


def load(path, name, append=""):
    """Import `path` as module `name`; `append` is added to its source."""
    src = open(path).read() + append
    d = tempfile.mkdtemp(prefix="kb-eval-")
    f = os.path.join(d, name + ".py")
    with open(f, "w") as out:
        out.write(src)
    spec = importlib.util.spec_from_file_location(name, f)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("reference")
    ap.add_argument("candidate")
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    ap.add_argument("--correct-trials", type=int, default=5)
    ap.add_argument("--trials", type=int, default=100)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--atol", type=float, default=1e-2)
    ap.add_argument("--rtol", type=float, default=1e-2)
    ap.add_argument("--interpret", action="store_true")
    ap.add_argument("--append-ref", default=None)
    args = ap.parse_args()
    out = {"correct": False, "error": None, "max_abs_err": [], "cand_median_ms": None,
           "ref_median_ms": None, "speedup": None, "steps_s": {}}
    step_t = [time.monotonic()]

    def step(name):
        now = time.monotonic()
        out["steps_s"][name] = round(now - step_t[0], 3)
        step_t[0] = now

    if args.interpret:
        os.environ["TRITON_INTERPRET"] = "1"
    import torch
    if args.interpret and not hasattr(torch.Tensor, "untyped_storage"):
        # Triton's interpreter asks for torch >= 2's storage API; older
        # torch (Debian's 1.13 on the CI machines) has the same under
        # another name.
        torch.Tensor.untyped_storage = lambda t: t.storage()
    dev = torch.device(args.device)
    step("import_torch")

    def emit():
        out["wall_s"] = round(time.monotonic() - T0, 3)
        print(json.dumps(out))
        return 0

    def set_seed(s):
        torch.manual_seed(s)
        if args.device == "cuda":
            torch.cuda.manual_seed(s)

    def to_dev(xs):
        return [x.to(dev) if isinstance(x, torch.Tensor) else x for x in xs]

    def sync():
        if args.device == "cuda":
            torch.cuda.synchronize(dev)

    append = open(args.append_ref).read() if args.append_ref else ""
    try:
        ref = load(args.reference, "kb_reference", "\n" + append)
    except Exception as e:  # noqa: BLE001 -- the reference's own failure is reported, not raised
        out["error"] = "reference: %s: %s" % (type(e).__name__, e)
        return emit()
    try:
        cand = load(args.candidate, "kb_candidate")
        ModelNew = cand.ModelNew
    except Exception as e:  # noqa: BLE001
        out["error"] = "compile: %s: %s" % (type(e).__name__, str(e)[:2000])
        return emit()
    step("load")
    with torch.no_grad():
        try:
            set_seed(args.seed)
            init = to_dev(ref.get_init_inputs())
            set_seed(args.seed)
            model = ref.Model(*init).to(dev)
            set_seed(args.seed)
            model_new = ModelNew(*init).to(dev)
            sync()
        except Exception as e:  # noqa: BLE001
            out["error"] = "init: %s: %s" % (type(e).__name__, str(e)[:2000])
            return emit()
        step("init")
        rng = random.Random(args.seed)
        ok = True
        for _ in range(args.correct_trials):
            seed = rng.randint(0, 2 ** 32 - 1)
            set_seed(seed)
            inputs = to_dev(ref.get_inputs())
            want = model(*inputs)
            sync()
            set_seed(seed)
            try:
                got = model_new(*inputs)
                sync()
            except Exception as e:  # noqa: BLE001
                out["error"] = "runtime: %s: %s" % (type(e).__name__, str(e)[:2000])
                return emit()
            if not isinstance(got, torch.Tensor) or got.shape != want.shape:
                out["error"] = "shape: expected %s, got %s" % (
                    tuple(want.shape), tuple(got.shape) if isinstance(got, torch.Tensor) else type(got).__name__)
                return emit()
            out["max_abs_err"].append(float((got.float() - want.float()).abs().max()))
            if not torch.allclose(want, got, atol=args.atol, rtol=args.rtol):
                ok = False
            del inputs, want, got
        step("correctness")
        if not ok:
            out["error"] = "mismatch: max abs error %s" % max(out["max_abs_err"])
            return emit()
        out["correct"] = True
        set_seed(args.seed)
        inputs = to_dev(ref.get_inputs())

        def time_it(fn):
            for _ in range(args.warmup):
                fn(*inputs)
            sync()
            ms = []
            for _ in range(args.trials):
                if args.device == "cuda":
                    start = torch.cuda.Event(enable_timing=True)
                    end = torch.cuda.Event(enable_timing=True)
                    start.record()
                    fn(*inputs)
                    end.record()
                    torch.cuda.synchronize(dev)
                    ms.append(start.elapsed_time(end))
                else:
                    t = time.perf_counter()
                    fn(*inputs)
                    ms.append((time.perf_counter() - t) * 1e3)
            return statistics.median(ms)

        out["cand_median_ms"] = time_it(model_new)
        out["ref_median_ms"] = time_it(model)
        out["speedup"] = out["ref_median_ms"] / out["cand_median_ms"] if out["cand_median_ms"] > 0 else None
        step("timing")
    return emit()


if __name__ == "__main__":
    sys.exit(main())
