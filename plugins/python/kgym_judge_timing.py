"""kgym_judge_timing.py -- the judge's timing phase: warm-up, the timed
rounds, their verification, the calibration and the timing's statistics.
A part of the judge (kgym_judge.Judge inherits it); nothing here is
imported by an executor.

Rounds.  The judge's clock runs from its "go" to the executor's "done" and
the judge's copy of the outputs; that handshake between two processes
costs ~0.5 ms on an H100/H200 and varies by tens of microseconds from one
evaluation to the next, which no subtraction removes: a 0.1 ms kernel timed
one call per "go" repeated only within 20-180% (bench/judge_clock.py).  So
on a GPU the timed calls are grouped into rounds of k calls between one
"go" and one "done" (k chosen from the warm-up so that a round lasts about
ROUND_MS, at most MAX_CALLS_PER_ROUND and as many as the areas hold:
[plugin.python] round_bytes);
the handshake and its noise are then shared by k calls.  k is also at most
num_perf_trials / MIN_TIMING_TRIALS: the job times about num_perf_trials
calls, as before (KernelBench's 100 give rounds of up to 10).  Nothing else
changes: every call of a round has inputs of its own, made from a fresh
secret seed and placed, with the outputs poisoned and L2 flushed, before
the round's "go"; every call's outputs are checked; a sample is a round's
time over k.  The calibration and the reference's timing use rounds of the
same k.
"""

import math
import time

import torch

from kgym_common import MIN_TIMING_TRIALS
from kgym_judge_compare import OutputsReused, Verdict, compare_outputs, median, same_tensor, stats

CALIBRATION_CALLS = 21         # empty rounds of the reference executor: the handshake's cost
CALIBRATION_DISCARD = 3        # the first right after the candidate's exit ran 30x slower (H200)
WARM_WINDOW = 5                # warm-up: calls per window compared
WARM_MAX_CALLS = 200
WARM_MAX_MS = 1000.0
STASH_BYTES = 1 << 30          # candidate outputs of timed calls awaiting the reference's run
# What a round aims at: on an H200 rounds of ~10 ms left the net medians of
# five evaluations of a 2.7 ms matmul 1.8% apart (the calibration's own
# per-call cost moved by 0.03 ms between them: k was 4); the handshake's
# noise shrinks as 1/k.
ROUND_MS = 50.0
MAX_CALLS_PER_ROUND = 64
HANDSHAKE_PROBES = 5           # empty calls that estimate the handshake, to choose k


class TimingPhase:
    # -- how many calls a round holds
    def round_slots(self, in_bytes, out_bytes):
        """The calls a round may hold, decided before the areas are made:
        a request's calls_per_round (a diagnostic, for tests and
        bench/judge_clock.py), else 1 on a CPU, else what round_bytes
        holds of one call's inputs and three copies of its outputs."""
        forced = self.job.get("calls_per_round")
        if isinstance(forced, int) and not isinstance(forced, bool) and forced >= 1:
            return min(forced, MAX_CALLS_PER_ROUND)
        if not self.gpu:
            return 1
        # Rounds take no more than a quarter of what the device has free
        # now: the other jobs on this GPU need theirs, and a job whose
        # problem is big keeps one call per round rather than failing.
        budget = min(int(self.limits.get("round_bytes", 8 << 30)), self.device_free() // 4)
        per_call = max(1, in_bytes + 3 * out_bytes)
        return max(1, min(MAX_CALLS_PER_ROUND, budget // per_call, self.max_calls_per_round()))

    @staticmethod
    def device_free():
        """The bytes the current device has free now (0 when it cannot say)."""
        try:
            return torch.cuda.mem_get_info()[0]
        except RuntimeError:
            return 0

    def max_calls_per_round(self):
        """num_perf_trials stays the number of timed calls (what a job
        costs): at least MIN_TIMING_TRIALS rounds of them.  (With KernelGYM's
        10 trials: one call per round, and no areas made bigger -- making
        and clearing 8 GiB of them cost an H200 0.1 s a task.)"""
        return max(1, int(self.job.get("num_perf_trials") or 100) // MIN_TIMING_TRIALS)

    def calls_per_round(self, warm):
        """k for this job: a forced calls_per_round as it is; else from the
        candidate's warm-up calls less the handshake (a few empty calls of
        the reference executor: an estimate for choosing k only, never a
        figure of the result), so that a round lasts about ROUND_MS."""
        if self.slots <= 1 or isinstance(self.job.get("calls_per_round"), int):
            return self.slots
        probe = self.make_inputs(self.fresh_seed("probe"))
        handshake = median([self.call(self.ref, probe, mode="empty", what="handshake probe %d" % (i + 1))[0]
                            for i in range(HANDSHAKE_PROBES)])
        per_call = max(0.001, median(warm[-WARM_WINDOW:]) - handshake)
        self.meta["handshake_probe_ms"] = handshake
        return max(1, min(self.slots, math.ceil(ROUND_MS / per_call)))

    # -- the candidate's timing
    def timing(self):
        """Warm-up calls, then rounds until num_perf_trials calls (and at
        least MIN_TIMING_TRIALS rounds), or, after MIN_TIMING_TRIALS rounds,
        until the precision or the budget is reached, as one call per round
        did before.  Returns the samples, one per round: ms per call."""
        job = self.job
        n = max(1, int(job.get("num_perf_trials") or 100))
        warm = max(0, int(job.get("num_warmup", 3)))
        budget = float(job.get("max_timing_ms") or 10000.0)
        prec = float(job.get("timing_rel_precision") or 0.005)
        self.defer = self.inputs_repeat()
        self.meta["reference_runs_deferred"] = self.defer
        self.stash, self.stash_bytes = [], 0
        self.unsettled = False
        self.timed_calls = 0
        warm_times = []
        self.meta["candidate_warmup_calls"] = self.warm_up(lambda what: self.timed_round(what, 1), warm,
                                                           keep=warm_times)
        k = self.k = self.calls_per_round(warm_times)
        try:
            return self.timed_rounds(n, budget, prec, k)
        except OutputsReused:
            # The model returns memory it keeps (kgym_judge_compare): the
            # rounds so far are dropped (their stashed outputs, checked as
            # apart, stay) and the timing starts again, a call per round.
            self.meta["outputs_reused"] = True
            self.k = 1
            self.timed_calls = 0
            return self.timed_rounds(n, budget, prec, 1)

    def timed_rounds(self, n, budget, prec, k):
        """The timed rounds of k calls (the rest of timing())."""
        self.meta["calls_per_round"] = k
        if k > 1:
            # The first round of k: new buffers touched, its own warm-up.
            self.timed_round("the first round of %d calls (not timed)" % k, k)
        times = []
        t_start = time.monotonic()
        settling = 0
        while self.timed_calls < n or len(times) < MIN_TIMING_TRIALS:
            first = self.timed_calls + 1
            label = "timed call %d" % first if k == 1 else "timed calls %d-%d" % (first, first + k - 1)
            if self.unsettled:
                # The reference executor has just had the GPU (verify_stash):
                # the candidate's next call pays for the switch back.  One
                # call takes it (a whole round of k did, for nothing: 80 of
                # a job's 200 calls on big problems); it is checked like
                # every other, but not timed.
                self.unsettled = False
                settling += 1
                self.timed_round("%s (settling after the reference's runs)" % label, 1, count=False)
            times.append(self.timed_round(label, k))
            if len(times) >= MIN_TIMING_TRIALS:
                s = stats(times)
                if s["ci95_rel"] is not None and s["ci95_rel"] <= prec:
                    break
                if (time.monotonic() - t_start) * 1e3 > budget:
                    break
        self.verify_stash()
        self.meta["settling_calls"] = settling
        self.meta["timed_rounds"] = len(times)
        return times

    def warm_up(self, one_call, at_least, what="warm-up call", keep=None):
        """Warm-up calls until the clock is steady: at least `at_least`,
        then until the median of the last WARM_WINDOW calls is within 2%
        of the window's before (an idle GPU takes tens of milliseconds of
        work to reach its clocks: on an H100 the first ~50 calls of a
        190 us kernel ran up to twice as long), at most WARM_MAX_CALLS or
        WARM_MAX_MS.  Returns how many were made (their times into keep)."""
        times = keep if keep is not None else []
        t0 = time.monotonic()
        while len(times) < at_least:
            times.append(one_call("%s %d" % (what, len(times) + 1)))
        if self.trace is not None:
            self.trace[what] = times
        if not self.gpu:
            return len(times)
        while len(times) < at_least + WARM_MAX_CALLS and (time.monotonic() - t0) * 1e3 < WARM_MAX_MS:
            if len(times) >= 2 * WARM_WINDOW:
                last = median(times[-WARM_WINDOW:])
                before = median(times[-2 * WARM_WINDOW:-WARM_WINDOW])
                if abs(last - before) <= 0.02 * before:
                    break
            times.append(one_call("%s %d" % (what, len(times) + 1)))
        return len(times)

    def timed_round(self, what, k, count=True):
        """A round of k calls of the timing phase; returns its ms per call.
        Every call's outputs are checked like every other call's, but the
        reference's run on its inputs is deferred (inputs made again from
        the call's seed) until STASH_BYTES of the candidate's outputs wait:
        the GPU then alternates between two contexts only, the judge's and
        the candidate's -- a third context (the reference executor's)
        between two timed calls slowed the candidate's next call by a
        quarter of a millisecond on an H100 (bench/judge_clock.py: its own
        events showed it)."""
        seeds = [self.fresh_seed("perf") for _ in range(k)]
        calls = [self.make_inputs(s) for s in seeds]
        first = self.timed_calls + 1
        names = [what] if k == 1 else ["%s: call %d" % (what, first + j) for j in range(k)]
        if count:
            self.timed_calls += k
        ms, gots = self.round(self.cand, calls, what=what)
        for j, inputs in enumerate(calls):
            changed = None if self.ref_mutates else self.changed_input(inputs, j)
            self.timed_verdict(names[j], None, changed)
        if not self.defer:
            _, wants = self.round(self.ref, calls, what=what + " (the reference's run)")
            for j in range(k):
                self.checked_calls += 1
                self.timed_verdict(names[j], compare_outputs(wants[j], gots[j], self.job, detail=False), None)
            return ms / k
        for j in range(k):
            self.stash.append((names[j], seeds[j], gots[j]))
            self.stash_bytes += sum(o.numel() * o.element_size() for o in gots[j])
        if self.stash_bytes >= STASH_BYTES:
            self.verify_stash()
        return ms / k

    def timed_verdict(self, what, c, changed):
        if changed is not None:
            detail = "input %d was modified by the call" % changed
            raise Verdict("REWARD_HACK", "%s: %s" % (what, detail), {"kind": "input_mutation", "detail": detail})
        if c is not None and not c["ok"]:
            raise Verdict("REWARD_HACK", "%s: its outputs are wrong although the correctness trials passed: %s"
                          % (what, c["message"]),
                          {"kind": "timed_output_mismatch", "detail": "%s: %s" % (what, c["message"])})

    def verify_stash(self):
        """The reference on every stashed call's inputs, and the comparison."""
        stash, self.stash, self.stash_bytes = self.stash, [], 0
        self.unsettled = bool(stash)
        for what, seed, got in stash:
            _, want = self.call(self.ref, self.make_inputs(seed), what=what + " (the reference's run)")
            self.checked_calls += 1
            self.timed_verdict(what, compare_outputs(want, got, self.job, detail=False), None)

    def inputs_repeat(self):
        """Does get_inputs() give the same inputs for the same seed?  Only
        then may the reference's runs be deferred (inputs made again)."""
        seed = self.fresh_seed("repeat")
        a, b = self.make_inputs(seed), self.make_inputs(seed)
        return all(same_tensor(x, y) if isinstance(x, torch.Tensor) else x == y for x, y in zip(a, b))

    # -- the trusted side's timings, once the candidate is gone
    def reference_samples(self, n, what):
        times = []
        for i in range(n):
            calls = [self.make_inputs(self.fresh_seed("ref")) for _ in range(self.k)]
            ms, _ = self.round(self.ref, calls, what="%s %d" % (what, i + 1), outputs_matter=False)
            times.append(ms / self.k)
        return times

    def calibrate(self):
        """The handshake's own cost per call: the reference executor's empty
        rounds of k (arm, GO, a tiny kernel and outputs said to lie in the
        arena per call -- without an arena, a copy like the outputs --,
        synchronise, DONE, the judge's copy), the same preparation; measured with the
        trusted executor only.  The first few are dropped: right after the
        candidate's process is gone one took 16 ms."""
        inputs = self.make_inputs(self.fresh_seed("calibration"))
        out = [self.round(self.ref, [inputs] * self.k, mode="empty",
                          what="calibration round %d" % (i + 1))[0] / self.k
               for i in range(CALIBRATION_DISCARD + CALIBRATION_CALLS)]
        return out[CALIBRATION_DISCARD:]

    def timing_result(self, raw):
        """Once the candidate's process is gone: the calibration, the
        reference's timing (or the workflow's cached one), the statistics
        of both net of the handshake."""
        cal = sorted(self.calibrate())
        overhead = median(cal)
        # The clock's resolution: the spread of the handshake's own cost.  A
        # median below it is reported as it (below_resolution), so that
        # noise never turns into a speedup.
        resolution = max(0.001, cal[(3 * len(cal)) // 4] - cal[len(cal) // 4])

        def net(samples):
            st = stats([x - overhead for x in samples])
            below = st["median_ms"] < resolution
            st.update(median_ms=max(st["median_ms"], resolution), overhead_ms=overhead, resolution_ms=resolution,
                      raw_median_ms=median(samples), below_resolution=below)
            return st
        cached = self.job.get("reference_timing")
        if isinstance(cached, dict) and isinstance(cached.get("median_ms"), (int, float)):
            ref = None
            ref_stats = cached
        else:
            warm = max(0, int(self.job.get("num_warmup", 3)))
            self.meta["reference_warmup_calls"] = self.warm_up(
                lambda what: self.call(self.ref, self.make_inputs(self.fresh_seed("ref")), what=what)[0], warm,
                "the reference's warm-up call")
            if self.k > 1:
                self.reference_samples(1, "the reference's first round (not timed)")
            ref = self.reference_samples(len(raw), "the reference's timed round" if self.k > 1
                                         else "the reference's timed call")
            ref_stats = net(ref)
        if self.trace is not None:
            self.trace.update(timed=raw, calibration=cal, reference=ref, prep_ms=self.prep_ms)
            self.meta["clock_trace"] = self.trace
        return net(raw), ref_stats, ref is None
