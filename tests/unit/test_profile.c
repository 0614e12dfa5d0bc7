/*
 * test_profile.c -- unit tests of the CUPTI accounting (plugins/nvrtc/
 * profdata.c) with made-up activity records: no GPU, no CUPTI.
 *
 * What must hold: a kernel is the solution's, the reference's or ours by
 * the CUfunction its launch passed, whatever its name; records count in
 * whatever order they arrive; only complete, timed (or profiling) calls
 * make the profile and gpu_time_ms; work beside a call's window, on
 * another stream or after its end is counted for the detectors; CUPTI's
 * cost is the median with over the median without.
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "nvrtc_internal.h"

#define CTX		1u
#define STREAM		7u
#define OTHER_STREAM	9u

/* CUfunctions are only compared: any distinct addresses will do. */
static const int fn_sol_a, fn_sol_b, fn_ref, fn_helper, fn_stranger;
#define SOL_A		((const void *)&fn_sol_a)
#define SOL_B		((const void *)&fn_sol_b)
#define REF		((const void *)&fn_ref)
#define HELPER		((const void *)&fn_helper)
#define STRANGER	((const void *)&fn_stranger)

static struct profdata *
new_pd(void)
{
	struct profdata *pd = profdata_new(CTX, STREAM);

	assert_non_null(pd);
	assert_int_equal(profdata_add_function(pd, SOL_A, PROFILE_SOLUTION), 0);
	assert_int_equal(profdata_add_function(pd, SOL_B, PROFILE_SOLUTION), 0);
	assert_int_equal(profdata_add_function(pd, REF, PROFILE_REFERENCE), 0);
	assert_int_equal(profdata_add_function(pd, HELPER, PROFILE_OURS), 0);
	return pd;
}

static void
kernel(struct profdata *pd, uint32_t corr, uint32_t stream, uint64_t start, uint64_t end,
    const char *name, int grid)
{
	struct profdata_kernel k;

	memset(&k, 0, sizeof k);
	k.correlation = corr;
	k.context = CTX;
	k.stream = stream;
	k.start = start;
	k.end = end;
	k.grid[0] = grid;
	k.grid[1] = k.grid[2] = 1;
	k.block[0] = 256;
	k.block[1] = k.block[2] = 1;
	k.static_shared = 1024;
	k.dynamic_shared = 64;
	k.registers = 32;
	k.name = name;
	assert_int_equal(profdata_kernel(pd, &k), 0);
}

static void
copy(struct profdata *pd, bool is_memset, uint32_t stream, uint64_t start, uint64_t end)
{
	struct profdata_copy c;

	memset(&c, 0, sizeof c);
	c.memset = is_memset;
	c.context = CTX;
	c.stream = stream;
	c.start = start;
	c.end = end;
	c.bytes = 4096;
	assert_int_equal(profdata_copy(pd, &c), 0);
}

/*
 * One call of `program` beginning at host time t (ns): a helper launch
 * before it (outside the call), then the given launches, then the end.
 * Returns nothing; the records are the test's business.
 */
static void
call(struct profdata *pd, enum profile_owner program, enum profile_purpose purpose,
    bool profiled, uint64_t t, const uint32_t *corrs, const void *const *fns, size_t n,
    double events_ms)
{
	size_t i;

	assert_int_equal(profdata_call_begin(pd, program, purpose, profiled, t), 0);
	for (i = 0; i < n; i++)
		assert_int_equal(profdata_launch(pd, corrs[i], fns[i]), 0);
	profdata_call_end(pd, events_ms, events_ms + 0.02, t + 500000);
}

static const struct profile_call_summary *
get_call(struct profdata *pd, size_t i)
{
	size_t n;
	const struct profile_call_summary *s = profdata_calls(pd, &n);

	assert_true(i < n);
	return &s[i];
}

static json_t *
result_of(struct profdata *pd)
{
	json_t *r = json_pack("{s:{s:{s:f}, s:{s:f, s:b}}, s:{}}", "timing", "kernel",
	    "median_ms", 1.0, "reference", "median_ms", 2.0, "cached", 0, "metadata");

	assert_non_null(r);
	assert_int_equal(profdata_result(pd, r), 0);
	return r;
}

static json_t *
meta(json_t *r, const char *key)
{
	return json_object_get(json_object_get(r, "metadata"), key);
}

static json_t *
cupti(json_t *r, const char *key)
{
	return json_object_get(meta(r, "cupti"), key);
}

/* ------------------------------------------------------------- tests */

/* Names lie; the CUfunction of the launch decides.  Out-of-order records. */
static void
test_attribution_by_identity(void **state)
{
	struct profdata *pd = new_pd();
	const uint32_t corrs[] = { 11, 12 };
	const void *const fns[] = { SOL_A, SOL_A };
	const struct profile_call_summary *s;
	json_t *r, *prof, *e;

	/* A helper launch just before the call: ours, not the call's. */
	assert_int_equal(profdata_launch(pd, 10, HELPER), 0);
	call(pd, PROFILE_SOLUTION, PROFILE_PURPOSE_TIMING, true, 1000000, corrs, fns, 2, 0.025);
	profdata_mark_timed(pd, PROFILE_SOLUTION);
	assert_false(profdata_call_complete(pd));
	/* The solution's kernel calls itself kg_flush, the helper "solve". */
	kernel(pd, 12, STREAM, 1020000, 1030000, "kg_flush", 64);
	assert_false(profdata_call_complete(pd));
	kernel(pd, 10, STREAM, 990000, 1001000, "solve", 8);
	kernel(pd, 11, STREAM, 1005000, 1015000, "kg_flush", 128);
	assert_true(profdata_call_complete(pd));
	profdata_settle(pd, true);

	s = get_call(pd, 0);
	assert_int_equal(s->program, PROFILE_SOLUTION);
	assert_int_equal(s->launches, 2);
	assert_int_equal(s->kernels, 2);
	assert_true(s->complete);
	assert_true(s->counted);
	assert_float_equal(s->kernel_us, 20.0, 1e-9);		/* 10 + 10 us */
	assert_float_equal(s->span_us, 25.0, 1e-9);		/* 1005000 .. 1030000 */
	assert_int_equal(s->first_start_ns, 1005000);
	assert_int_equal(s->last_end_ns, 1030000);
	assert_int_equal(s->foreign_stream_kernels + s->after_end_kernels +
	    s->unattributed_kernels, 0);

	r = result_of(pd);
	prof = json_object_get(r, "profile");
	/* One kernel, two launch configurations; the helper is not listed. */
	assert_int_equal(json_array_size(prof), 2);
	e = json_array_get(prof, 0);
	assert_string_equal(json_string_value(json_object_get(e, "name")), "kg_flush");
	assert_string_equal(json_string_value(json_object_get(e, "module")), "solution");
	assert_int_equal(json_integer_value(json_object_get(e, "calls")), 1);
	assert_float_equal(json_real_value(json_object_get(e, "total_us")), 10.0, 1e-9);
	assert_int_equal(json_integer_value(json_object_get(e, "registers")), 32);
	assert_int_equal(json_integer_value(json_object_get(e, "shared_bytes")), 1088);
	assert_int_equal(json_integer_value(meta(r, "num_custom_kernels")), 1);
	assert_int_equal(json_integer_value(meta(r, "num_total_kernels")), 1);
	assert_float_equal(json_real_value(meta(r, "custom_kernel_cuda_time_in_profiling_us")),
	    20.0, 1e-9);
	assert_float_equal(json_real_value(meta(r, "total_kernel_run_time_in_profiling_us")),
	    20.0, 1e-9);
	assert_float_equal(json_real_value(meta(r, "custom_kernel_time_coverage")), 1.0, 1e-12);
	/* events 0.025 ms over CUPTI's 0.020 ms */
	assert_float_equal(json_real_value(meta(r, "events_vs_cupti")), 1.25, 1e-9);
	assert_float_equal(json_real_value(json_object_get(json_object_get(json_object_get(r,
	    "timing"), "kernel"), "gpu_time_ms")), 0.020, 1e-12);
	assert_float_equal(json_real_value(json_object_get(json_object_get(json_object_get(r,
	    "timing"), "kernel"), "gpu_span_ms")), 0.025, 1e-12);
	assert_int_equal(json_integer_value(json_object_get(cupti(r, "helper_kernels"), "count")),
	    1);
	/* No counted reference call: no gpu time for it. */
	assert_true(json_is_null(json_object_get(json_object_get(json_object_get(r, "timing"),
	    "reference"), "gpu_time_ms")));
	json_decref(r);
	profdata_free(pd);
}

/* Warm-ups, untimed timing calls and calls without CUPTI are not counted;
 * the medians come from the counted ones. */
static void
test_counted_calls(void **state)
{
	struct profdata *pd = new_pd();
	const uint32_t c0[] = { 1 }, c1[] = { 2 }, c2[] = { 3 }, c3[] = { 4 }, c4[] = { 5 },
	    c5[] = { 6 };
	const void *const sol[] = { SOL_B }, *const ref[] = { REF };
	json_t *r;

	call(pd, PROFILE_SOLUTION, PROFILE_PURPOSE_OTHER, true, 1000000, c0, sol, 1, 1.0);
	kernel(pd, 1, STREAM, 1100000, 1200000, "b", 1);
	call(pd, PROFILE_REFERENCE, PROFILE_PURPOSE_TIMING, true, 2000000, c1, ref, 1, 0.35);
	profdata_mark_timed(pd, PROFILE_REFERENCE);
	kernel(pd, 2, STREAM, 2100000, 2400000, "r", 1);
	/* Timing, but not marked timed (the extra checked call). */
	call(pd, PROFILE_SOLUTION, PROFILE_PURPOSE_TIMING, true, 3000000, c2, sol, 1, 1.0);
	kernel(pd, 3, STREAM, 3100000, 3200000, "b", 1);
	call(pd, PROFILE_SOLUTION, PROFILE_PURPOSE_TIMING, true, 4000000, c3, sol, 1, 0.105);
	profdata_mark_timed(pd, PROFILE_SOLUTION);
	kernel(pd, 4, STREAM, 4100000, 4200000, "b", 1);
	call(pd, PROFILE_SOLUTION, PROFILE_PURPOSE_TIMING, true, 5000000, c4, sol, 1, 0.125);
	profdata_mark_timed(pd, PROFILE_SOLUTION);
	kernel(pd, 5, STREAM, 5100000, 5220000, "b", 1);
	/* Not collecting: no records, never counted, no window. */
	call(pd, PROFILE_SOLUTION, PROFILE_PURPOSE_TIMING, false, 6000000, c5, sol, 0, 0.2);
	profdata_mark_timed(pd, PROFILE_SOLUTION);
	profdata_settle(pd, true);

	assert_false(get_call(pd, 0)->counted);
	assert_true(get_call(pd, 1)->counted);
	assert_false(get_call(pd, 2)->counted);
	assert_true(get_call(pd, 3)->counted);
	assert_true(get_call(pd, 4)->counted);
	assert_false(get_call(pd, 5)->counted);
	assert_true(get_call(pd, 5)->complete);

	r = result_of(pd);
	/* Median of 100 and 120 us. */
	assert_float_equal(json_real_value(json_object_get(json_object_get(json_object_get(r,
	    "timing"), "kernel"), "gpu_time_ms")), 0.110, 1e-12);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(json_object_get(r,
	    "timing"), "kernel"), "profiled_calls")), 2);
	assert_float_equal(json_real_value(json_object_get(json_object_get(json_object_get(r,
	    "timing"), "reference"), "gpu_time_ms")), 0.300, 1e-12);
	/* events 0.115 (median of 0.105, 0.125) / CUPTI 0.110 */
	assert_float_equal(json_real_value(meta(r, "events_vs_cupti")), 0.115 / 0.110, 1e-9);
	assert_float_equal(json_real_value(meta(r, "events_vs_cupti_reference")), 0.35 / 0.3,
	    1e-9);
	assert_int_equal(json_integer_value(json_object_get(cupti(r, "counted_calls"),
	    "solution")), 2);
	/* The most time first: the reference's 300 us, then the solution's
	 * two counted calls of 100 and 120 us. */
	assert_string_equal(json_string_value(json_object_get(json_array_get(json_object_get(r,
	    "profile"), 0), "module")), "reference");
	assert_int_equal(json_integer_value(json_object_get(json_array_get(json_object_get(r,
	    "profile"), 0), "calls")), 1);
	assert_string_equal(json_string_value(json_object_get(json_array_get(json_object_get(r,
	    "profile"), 1), "module")), "solution");
	assert_int_equal(json_integer_value(json_object_get(json_array_get(json_object_get(r,
	    "profile"), 1), "calls")), 2);
	assert_int_equal(json_array_size(json_object_get(r, "profile")), 2);
	assert_true(json_is_null(meta(r, "cupti_overhead")));
	json_decref(r);
	profdata_free(pd);
}

/* A cached reference timing is not ours to annotate. */
static void
test_cached_reference_untouched(void **state)
{
	struct profdata *pd = new_pd();
	const uint32_t c[] = { 1 };
	const void *const ref[] = { REF };
	json_t *r = json_pack("{s:{s:{s:f, s:b}}, s:{}}", "timing", "reference", "median_ms", 2.0,
	    "cached", 1, "metadata");

	call(pd, PROFILE_REFERENCE, PROFILE_PURPOSE_TIMING, true, 1000, c, ref, 1, 0.5);
	profdata_mark_timed(pd, PROFILE_REFERENCE);
	kernel(pd, 1, STREAM, 2000, 3000, "r", 1);
	profdata_settle(pd, true);
	assert_int_equal(profdata_result(pd, r), 0);
	assert_null(json_object_get(json_object_get(json_object_get(r, "timing"), "reference"),
	    "gpu_time_ms"));
	/* No counted solution call: KernelGYM's keys are left to the plan. */
	assert_null(meta(r, "num_custom_kernels"));
	json_decref(r);
	profdata_free(pd);
}

/* Records nobody of ours launched: beside the window, after it, before it. */
static void
test_foreign_and_after_end(void **state)
{
	struct profdata *pd = new_pd();
	const uint32_t c0[] = { 100 }, c1[] = { 200 };
	const void *const sol[] = { SOL_A };
	const struct profile_call_summary *s;
	json_t *r;

	/* Before any call: compared with nothing, flags nothing. */
	kernel(pd, 50, OTHER_STREAM, 10, 20, "early", 1);
	call(pd, PROFILE_SOLUTION, PROFILE_PURPOSE_TIMING, true, 1000000, c0, sol, 1, 0.1);
	profdata_mark_timed(pd, PROFILE_SOLUTION);
	kernel(pd, 100, STREAM, 1100000, 1200000, "a", 1);
	/* Overlapping the window on another stream. */
	kernel(pd, 101, OTHER_STREAM, 1150000, 1160000, "hidden", 2);
	/* Started during the call, ends after the window (on another stream). */
	kernel(pd, 102, OTHER_STREAM, 1190000, 1300000, "late", 3);
	/* On our stream, inside the window, launched by nobody we know. */
	kernel(pd, 103, STREAM, 1120000, 1130000, "sneaky", 4);
	/* A launch of ours whose function is no module's: unknown too. */
	assert_int_equal(profdata_launch(pd, 104, STRANGER), 0);
	kernel(pd, 104, OTHER_STREAM, 1140000, 1145000, "stranger", 5);
	/* Copies inside the window. */
	copy(pd, true, OTHER_STREAM, 1110000, 1111000);
	copy(pd, false, STREAM, 1300000, 1310000);	/* after: not during */
	/* The next call: settles the first. */
	call(pd, PROFILE_SOLUTION, PROFILE_PURPOSE_TIMING, true, 2000000, c1, sol, 1, 0.1);
	profdata_mark_timed(pd, PROFILE_SOLUTION);
	kernel(pd, 200, STREAM, 2100000, 2200000, "a", 1);
	profdata_settle(pd, true);
	/* Arriving late, after both calls settled: still matched. */
	kernel(pd, 201, OTHER_STREAM, 2150000, 2400000, "straggler", 6);
	/* Started after call 0's window while call 0 was still in progress
	 * (host 1000000 .. 1500000), ran through call 1: after call 0's end,
	 * beside call 1 -- not after call 1's end. */
	kernel(pd, 202, OTHER_STREAM, 1400000, 2300000, "bridge", 7);
	/* On our stream between the calls (kgymd preparing call 1): started
	 * after call 0 was over on the host, before call 1's window: nobody's. */
	kernel(pd, 203, STREAM, 1600000, 1700000, "between", 8);

	s = get_call(pd, 0);
	assert_int_equal(s->foreign_stream_kernels, 3);	/* hidden, late, stranger */
	assert_int_equal(s->after_end_kernels, 2);		/* late, bridge */
	assert_int_equal(s->unattributed_kernels, 1);		/* sneaky */
	assert_int_equal(s->copies_during, 1);
	s = get_call(pd, 1);
	assert_int_equal(s->foreign_stream_kernels, 2);	/* straggler, bridge */
	assert_int_equal(s->after_end_kernels, 1);		/* straggler */
	assert_int_equal(s->unattributed_kernels, 0);

	r = result_of(pd);
	assert_int_equal(json_integer_value(cupti(r, "foreign_stream_kernels")), 5);
	assert_int_equal(json_integer_value(cupti(r, "after_end_kernels")), 3);
	assert_int_equal(json_integer_value(cupti(r, "unattributed_kernels")), 1);
	assert_int_equal(json_integer_value(cupti(r, "copies_during_calls")), 1);
	assert_int_equal(json_integer_value(json_object_get(cupti(r, "memset"), "count")), 1);
	assert_int_equal(json_integer_value(json_object_get(cupti(r, "memcpy"), "count")), 1);
	/* Unknown kernels during the solution's calls count in the total only. */
	assert_int_equal(json_integer_value(meta(r, "num_custom_kernels")), 1);
	assert_int_equal(json_integer_value(meta(r, "num_total_kernels")), 7);
	assert_float_equal(json_real_value(meta(r, "custom_kernel_cuda_time_in_profiling_us")),
	    200.0, 1e-9);
	/* 200 + hidden 10 + late 110 + sneaky 10 + stranger 5 + straggler 250
	 * + bridge 900 */
	assert_float_equal(json_real_value(meta(r, "total_kernel_run_time_in_profiling_us")),
	    1485.0, 1e-9);
	assert_float_equal(json_real_value(meta(r, "custom_kernel_time_coverage")),
	    200.0 / 1485.0, 1e-12);
	json_decref(r);
	profdata_free(pd);
}

/* A record that never comes: the call waits a few calls, then is settled
 * incomplete and left out; a failed launch expects no record. */
static void
test_incomplete_and_failed(void **state)
{
	struct profdata *pd = new_pd();
	const uint32_t c0[] = { 1, 2 };
	const void *const sol2[] = { SOL_A, SOL_B };
	uint32_t c[1];
	const void *const sol[] = { SOL_A };
	json_t *r;
	int i;

	call(pd, PROFILE_SOLUTION, PROFILE_PURPOSE_TIMING, true, 1000, c0, sol2, 2, 0.1);
	profdata_mark_timed(pd, PROFILE_SOLUTION);
	kernel(pd, 1, STREAM, 1100, 1200, "a", 1);		/* 2 never comes */
	for (i = 0; i < 6; i++) {
		c[0] = (uint32_t)(10 + i);
		call(pd, PROFILE_SOLUTION, PROFILE_PURPOSE_TIMING, true, 10000 * (uint64_t)(i + 1),
		    c, sol, 1, 0.1);
		if (i == 0)
			assert_false(get_call(pd, 0)->counted);
		if (i == 2) {
			/* A launch that failed: its call needs no record. */
			profdata_launch_failed(pd, c[0]);
			assert_true(profdata_call_complete(pd));
			continue;
		}
		profdata_mark_timed(pd, PROFILE_SOLUTION);
		kernel(pd, c[0], STREAM, 10000 * (uint64_t)(i + 1) + 100,
		    10000 * (uint64_t)(i + 1) + 200, "a", 1);
	}
	/* Settled by age, not by completeness: reported before the end. */
	assert_true(get_call(pd, 0)->kernels == 1 && !get_call(pd, 0)->complete);
	assert_false(get_call(pd, 0)->counted);
	r = result_of(pd);
	assert_int_equal(json_integer_value(cupti(r, "incomplete_calls")), 1);
	json_decref(r);
	/* The missing record, much later: still the program's, not hidden
	 * work beside or after call 0. */
	kernel(pd, 2, STREAM, 1150, 1900, "b", 1);
	assert_int_equal(get_call(pd, 0)->unattributed_kernels, 0);
	assert_int_equal(get_call(pd, 0)->after_end_kernels, 0);
	profdata_settle(pd, true);
	assert_true(get_call(pd, 3)->complete);
	assert_int_equal(get_call(pd, 3)->launches, 0);
	assert_false(get_call(pd, 3)->counted);		/* no record: nothing to count */
	r = result_of(pd);
	assert_int_equal(json_integer_value(cupti(r, "incomplete_calls")), 1);
	assert_int_equal(json_integer_value(cupti(r, "late_records")), 1);
	assert_int_equal(json_integer_value(json_object_get(cupti(r, "counted_calls"),
	    "solution")), 5);
	json_decref(r);
	profdata_free(pd);
}

/* A record CUPTI could not time makes its call incomplete. */
static void
test_untimed_record(void **state)
{
	struct profdata *pd = new_pd();
	const uint32_t c0[] = { 1 };
	const void *const sol[] = { SOL_A };
	json_t *r;

	call(pd, PROFILE_SOLUTION, PROFILE_PURPOSE_TIMING, true, 1000, c0, sol, 1, 0.1);
	profdata_mark_timed(pd, PROFILE_SOLUTION);
	kernel(pd, 1, STREAM, 0, 0, "a", 1);
	assert_false(profdata_call_complete(pd));
	profdata_settle(pd, true);
	assert_false(get_call(pd, 0)->complete);
	assert_false(get_call(pd, 0)->counted);
	r = result_of(pd);
	assert_int_equal(json_integer_value(cupti(r, "untimed_records")), 1);
	assert_true(json_is_null(json_object_get(json_object_get(json_object_get(r, "timing"),
	    "kernel"), "gpu_time_ms")));
	assert_true(json_is_null(meta(r, "events_vs_cupti")));
	assert_int_equal(json_array_size(json_object_get(r, "profile")), 0);
	json_decref(r);
	profdata_free(pd);
}

/* CUPTI's cost: alternate calls with and without it. */
static void
test_overhead(void **state)
{
	struct profdata *pd = new_pd();
	const void *const sol[] = { SOL_A };
	uint32_t c[1];
	json_t *r, *o;
	int i;

	for (i = 0; i < 10; i++) {
		c[0] = (uint32_t)(i + 1);
		call(pd, PROFILE_SOLUTION, PROFILE_PURPOSE_OVERHEAD, i % 2 == 0,
		    1000000 * (uint64_t)(i + 1), c, sol, i % 2 == 0, i % 2 == 0 ? 0.102 : 0.100);
		if (i % 2 == 0)
			kernel(pd, c[0], STREAM, 1000000 * (uint64_t)(i + 1) + 100,
			    1000000 * (uint64_t)(i + 1) + 100100, "a", 1);
	}
	profdata_settle(pd, true);
	r = result_of(pd);
	o = meta(r, "cupti_overhead");
	assert_true(json_is_object(o));
	assert_float_equal(json_real_value(json_object_get(o, "with_cupti_ms")), 0.102, 1e-12);
	assert_float_equal(json_real_value(json_object_get(o, "without_cupti_ms")), 0.100, 1e-12);
	assert_float_equal(json_real_value(json_object_get(o, "ratio")), 1.02, 1e-9);
	assert_int_equal(json_integer_value(json_object_get(o, "calls_with")), 5);
	assert_int_equal(json_integer_value(json_object_get(o, "calls_without")), 5);
	/* Overhead calls are not the profile. */
	assert_int_equal(json_array_size(json_object_get(r, "profile")), 0);
	json_decref(r);
	profdata_free(pd);
}

/* profile_during_timing = no: profiling calls are counted unmarked, and
 * they are the "with" side of the overhead. */
static void
test_profile_purpose(void **state)
{
	struct profdata *pd = new_pd();
	const void *const sol[] = { SOL_A };
	const uint32_t c0[] = { 1 }, c1[] = { 2 };
	json_t *r;

	call(pd, PROFILE_SOLUTION, PROFILE_PURPOSE_TIMING, false, 1000, c0, sol, 0, 0.1);
	profdata_mark_timed(pd, PROFILE_SOLUTION);
	call(pd, PROFILE_SOLUTION, PROFILE_PURPOSE_PROFILE, true, 100000, c1, sol, 1, 0.11);
	kernel(pd, 2, STREAM, 100100, 200100, "a", 1);
	call(pd, PROFILE_SOLUTION, PROFILE_PURPOSE_OVERHEAD, false, 300000, NULL, NULL, 0, 0.1);
	profdata_settle(pd, true);
	assert_true(get_call(pd, 1)->counted);
	r = result_of(pd);
	assert_float_equal(json_real_value(json_object_get(meta(r, "cupti_overhead"), "ratio")),
	    1.1, 1e-9);
	assert_int_equal(json_integer_value(meta(r, "num_custom_kernels")), 1);
	json_decref(r);
	profdata_free(pd);
}

/* detect.c's summary. */
static void
test_detect_summary(void **state)
{
	struct profdata *pd = new_pd();
	const void *const sol[] = { SOL_A };
	struct detect_profile d;
	uint32_t c[1];
	int i;

	assert_int_equal(profdata_detect(pd, &d), -ENODATA);
	for (i = 0; i < 3; i++) {
		c[0] = (uint32_t)(i + 1);
		call(pd, PROFILE_SOLUTION, PROFILE_PURPOSE_TIMING, true, 1000000 * (uint64_t)(i + 1),
		    c, sol, 1, 0.2);
		profdata_mark_timed(pd, PROFILE_SOLUTION);
		kernel(pd, c[0], STREAM, 1000000 * (uint64_t)(i + 1) + 1000,
		    1000000 * (uint64_t)(i + 1) + 1000 + 100000 * (uint64_t)(i + 1), "a", 1);
	}
	kernel(pd, 99, OTHER_STREAM, 2050000, 2300000, "hidden", 1);
	profdata_settle(pd, true);
	assert_int_equal(profdata_detect(pd, &d), 0);
	assert_int_equal(d.calls, 3);
	assert_float_equal(d.kernel_ms_median, 0.2, 1e-12);
	assert_float_equal(d.custom_ms, 0.6, 1e-12);
	assert_float_equal(d.total_ms, 0.85, 1e-12);
	assert_int_equal(d.custom_kernels, 2);		/* SOL_A and SOL_B exist */
	assert_int_equal(d.foreign_stream_kernels, 1);
	assert_int_equal(d.after_end_kernels, 1);
	assert_float_equal(d.wall_ms_median, 0.22, 1e-12);
	profdata_free(pd);
}

/* Helper launches whose records never come do not pile up; a program's
 * launch is kept however many come after it; correlation ids out of order
 * are still found. */
static void
test_bounded_and_unsorted(void **state)
{
	struct profdata *pd = new_pd();
	const uint32_t c0[] = { 50000, 49999 }, lost[] = { 5 };
	const void *const sol[] = { SOL_A, SOL_B };
	json_t *r;
	uint32_t i;

	/* A call whose record comes only at the very end. */
	call(pd, PROFILE_SOLUTION, PROFILE_PURPOSE_TIMING, true, 100, lost, sol, 1, 0.1);
	profdata_mark_timed(pd, PROFILE_SOLUTION);
	for (i = 10; i < 10010; i++)
		assert_int_equal(profdata_launch(pd, i, HELPER), 0);
	call(pd, PROFILE_SOLUTION, PROFILE_PURPOSE_TIMING, true, 1000, c0, sol, 2, 0.1);
	profdata_mark_timed(pd, PROFILE_SOLUTION);
	kernel(pd, 49999, STREAM, 1300, 1400, "b", 1);
	kernel(pd, 50000, STREAM, 1100, 1200, "a", 1);
	profdata_settle(pd, true);
	assert_false(get_call(pd, 0)->counted);
	assert_true(get_call(pd, 1)->counted);
	/* Inside call 1's window on our stream, but launched in call 0. */
	kernel(pd, 5, STREAM, 1150, 1190, "a", 1);
	assert_int_equal(get_call(pd, 1)->unattributed_kernels, 0);
	r = result_of(pd);
	assert_int_equal(json_integer_value(cupti(r, "late_records")), 1);
	/* At most twice PROFDATA_MAX_OPEN (4096) wait, behind the stuck one. */
	assert_true(json_integer_value(cupti(r, "launches_forgotten")) >= 10000 - 2 * 4096 - 2);
	assert_int_equal(json_integer_value(meta(r, "num_custom_kernels")), 2);
	json_decref(r);
	profdata_free(pd);
}

/* Dropped records are reported; a NULL name is "?", not a crash. */
static void
test_dropped_and_nameless(void **state)
{
	struct profdata *pd = new_pd();
	const uint32_t c0[] = { 1 };
	const void *const sol[] = { SOL_A };
	json_t *r;

	call(pd, PROFILE_SOLUTION, PROFILE_PURPOSE_PROFILE, true, 1000, c0, sol, 1, 0.1);
	kernel(pd, 1, STREAM, 1100, 1200, NULL, 1);
	profdata_dropped(pd, 3);
	profdata_settle(pd, true);
	r = result_of(pd);
	assert_int_equal(json_integer_value(cupti(r, "dropped_records")), 3);
	assert_string_equal(json_string_value(json_object_get(json_array_get(json_object_get(r,
	    "profile"), 0), "name")), "?");
	json_decref(r);
	profdata_free(pd);
}

/*
 * The candidate's module loaded again (its __device__ state reset): the
 * new function stands for the old one -- one kernel, counted once, the
 * solution's -- and a launch of it is the call's.
 */
static void
test_reloaded_module(void **state)
{
	static const int fn_sol_a2, fn_unknown;
	struct profdata *pd = new_pd();
	const uint32_t c1[] = { 21 }, c2[] = { 22 };
	const void *const f1[] = { SOL_A }, *const f2[] = { (const void *)&fn_sol_a2 };
	struct detect_profile d;
	json_t *r;

	assert_int_equal(profdata_add_alias(pd, (const void *)&fn_sol_a2, SOL_A), 0);
	/* An alias of a function nobody registered registers nothing. */
	assert_int_equal(profdata_add_alias(pd, STRANGER, (const void *)&fn_unknown), 0);
	call(pd, PROFILE_SOLUTION, PROFILE_PURPOSE_TIMING, true, 1000000, c1, f1, 1, 0.011);
	profdata_mark_timed(pd, PROFILE_SOLUTION);
	kernel(pd, 21, STREAM, 1005000, 1015000, "solve", 64);
	call(pd, PROFILE_SOLUTION, PROFILE_PURPOSE_TIMING, true, 2000000, c2, f2, 1, 0.011);
	profdata_mark_timed(pd, PROFILE_SOLUTION);
	kernel(pd, 22, STREAM, 2005000, 2015000, "solve", 64);
	profdata_settle(pd, true);
	assert_int_equal(get_call(pd, 1)->launches, 1);
	assert_int_equal(get_call(pd, 1)->unattributed_kernels, 0);
	r = result_of(pd);
	assert_int_equal(json_array_size(json_object_get(r, "profile")), 1);
	assert_int_equal(json_integer_value(json_object_get(json_array_get(json_object_get(r,
	    "profile"), 0), "calls")), 2);
	assert_int_equal(json_integer_value(meta(r, "num_custom_kernels")), 1);
	assert_int_equal(profdata_detect(pd, &d), 0);
	assert_int_equal(d.custom_kernels, 2);	/* SOL_A and SOL_B, not the alias */
	json_decref(r);
	profdata_free(pd);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_attribution_by_identity),
		cmocka_unit_test(test_reloaded_module),
		cmocka_unit_test(test_counted_calls),
		cmocka_unit_test(test_cached_reference_untouched),
		cmocka_unit_test(test_foreign_and_after_end),
		cmocka_unit_test(test_incomplete_and_failed),
		cmocka_unit_test(test_untimed_record),
		cmocka_unit_test(test_overhead),
		cmocka_unit_test(test_profile_purpose),
		cmocka_unit_test(test_detect_summary),
		cmocka_unit_test(test_bounded_and_unsorted),
		cmocka_unit_test(test_dropped_and_nameless),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
