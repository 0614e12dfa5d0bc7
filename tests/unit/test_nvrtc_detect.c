/*
 * test_nvrtc_detect.c -- unit tests of the nvrtc backend's detectors
 * (plugins/nvrtc/detect.c) without a GPU.
 *
 * The pure parts (the roofline floor, the nominal bandwidth, "nearly
 * constant", the CUPTI judgement) are tested on numbers; the rest through
 * the whole "evaluate" job against the fake CUDA driver (fake_cuda.c), whose
 * kernels include a reference that is not reproducible, candidates wrong or
 * only not bit-identical on every other call, and references whose outputs
 * are constant, a copy of an input, or independent of the inputs.  The
 * [plugin.nvrtc] keys come from a host table of the test's own.
 *
 * What the fake cannot show -- a real bandwidth, CUPTI records -- is left to
 * tests/exploits/run on a GPU.
 */
#include "config.h"

#include <dlfcn.h>
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
#include <jansson.h>

#include "nvrtc_internal.h"
#include "fake_cuda.h"
#include "rules.h"

/* ------------------------------------------------ [plugin.nvrtc] keys */

#define MAX_KEYS	16
static const char *cfg_keys[MAX_KEYS], *cfg_vals[MAX_KEYS];

static const char *
cfg_get(const struct kgym_plugin_handle *self, const char *key)
{
	size_t i;

	for (i = 0; i < MAX_KEYS && cfg_keys[i] != NULL; i++)
		if (strcmp(cfg_keys[i], key) == 0)
			return cfg_vals[i];
	return NULL;
}

static void
cfg_set(const char *key, const char *val)
{
	size_t i;

	for (i = 0; i < MAX_KEYS - 1 && cfg_keys[i] != NULL; i++)
		if (strcmp(cfg_keys[i], key) == 0)
			break;
	cfg_keys[i] = key;
	cfg_vals[i] = val;
}

static void
cfg_clear(void)
{
	memset(cfg_keys, 0, sizeof cfg_keys);
	memset(cfg_vals, 0, sizeof cfg_vals);
}

static struct kgym_host test_host;

/* ------------------------------------------------------- pure parts */

static void
test_roofline_floor(void **state)
{
	/* 1 GB beyond a 50 MB L2 at 1000 GB/s: 1 ms, times the safety. */
	double f = detect_roofline_floor_ms(1050000000, 50000000, 1000.0, 0.8);

	assert_true(fabs(f - 0.8) < 1e-12);
	assert_true(detect_roofline_floor_ms(50000000, 50000000, 1000.0, 0.8) == 0.0);
	assert_true(detect_roofline_floor_ms(1000, 50000000, 1000.0, 0.8) == 0.0);
	assert_true(detect_roofline_floor_ms(2000000000, 0, 0.0, 0.8) == 0.0);
	/* Halving the bandwidth doubles the floor. */
	assert_true(fabs(detect_roofline_floor_ms(1 << 30, 0, 500.0, 1.0) -
	    2.0 * detect_roofline_floor_ms(1 << 30, 0, 1000.0, 1.0)) < 1e-12);
}

static void
test_nominal_bandwidth(void **state)
{
	/* H100 SXM: 2619 MHz HBM3, 5120-bit bus: 3352 GB/s. */
	assert_true(fabs(detect_nominal_gbps(2619000, 5120) - 3352.32) < 0.01);
	assert_true(detect_nominal_gbps(0, 5120) == 0.0);
	assert_true(detect_nominal_gbps(2619000, 0) == 0.0);
}

static void
test_nearly_constant(void **state)
{
	float f[6] = { 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f };
	int32_t n[4] = { 7, 7, 7, 8 };
	uint16_t h[3];

	assert_true(detect_nearly_constant(SPEC_FLOAT32, f, 6, 1e-4, 1e-4));
	f[5] = 1.00005f;	/* within tolerance of a common value */
	assert_true(detect_nearly_constant(SPEC_FLOAT32, f, 6, 1e-4, 1e-4));
	f[5] = 1.01f;
	assert_false(detect_nearly_constant(SPEC_FLOAT32, f, 6, 1e-4, 1e-4));
	f[5] = NAN;
	assert_false(detect_nearly_constant(SPEC_FLOAT32, f, 6, 1e-4, 1e-4));
	f[5] = 1.0f;
	f[0] = INFINITY;
	assert_false(detect_nearly_constant(SPEC_FLOAT32, f, 6, 1e-4, 1e-4));
	/* One element is no evidence. */
	assert_false(detect_nearly_constant(SPEC_FLOAT32, f + 1, 1, 1e-4, 1e-4));
	/* Integers: exact. */
	assert_true(detect_nearly_constant(SPEC_INT32, n, 3, 0.0, 0.0));
	assert_false(detect_nearly_constant(SPEC_INT32, n, 4, 0.0, 0.0));
	h[0] = h[1] = h[2] = value_float_to_half(0.5f);
	assert_true(detect_nearly_constant(SPEC_FLOAT16, h, 3, 1e-2, 1e-2));
}

static const char *
status_of(const json_t *statuses, const char *name)
{
	const char *s = json_string_value(json_object_get(statuses, name));

	return s != NULL ? s : "";
}

static void
test_judge_profile(void **state)
{
	struct detect_settings s;
	struct detect_profile p;
	json_t *st = json_object();
	char detail[512] = "";
	bool wall = true;
	const char *kind;

	detect_settings_default(&s);
	/* No CUPTI: every CUPTI detector says it was skipped. */
	assert_null(detect_judge_profile(&s, 1.0, NULL, st, &wall, detail, sizeof detail));
	assert_false(wall);
	assert_non_null(strstr(status_of(st, "decoy"), "skipped: no CUPTI"));
	assert_non_null(strstr(status_of(st, "hidden_work"), "skipped"));
	assert_non_null(strstr(status_of(st, "timing_cross_check"), "skipped"));

	/* An honest call: 0.9 ms of kernels in 1 ms of events, all the solution's. */
	memset(&p, 0, sizeof p);
	p.calls = 20;
	p.kernel_ms_median = 0.9;
	p.custom_ms = p.total_ms = 18.0;
	p.custom_kernels = 2;
	p.wall_ms_median = 3.0;
	assert_null(detect_judge_profile(&s, 1.0, &p, st, &wall, detail, sizeof detail));
	assert_false(wall);
	assert_non_null(strstr(status_of(st, "decoy"), "passed: coverage 1.0000"));
	assert_non_null(strstr(status_of(st, "hidden_work"), "passed"));
	assert_non_null(strstr(status_of(st, "timing_cross_check"), "passed"));

	/* Work on another stream. */
	p.foreign_stream_kernels = 3;
	kind = detect_judge_profile(&s, 1.0, &p, st, &wall, detail, sizeof detail);
	assert_string_equal(kind, "hidden_work");
	assert_non_null(strstr(detail, "3 kernel(s) on another stream"));
	p.foreign_stream_kernels = 0;
	/* A kernel that outlived the end event. */
	p.after_end_kernels = 1;
	assert_string_equal(detect_judge_profile(&s, 1.0, &p, st, &wall, detail, sizeof detail),
	    "hidden_work");
	p.after_end_kernels = 0;

	/* CUPTI sees more kernel time than the events: within 5% + 5 us is fine. */
	p.kernel_ms_median = 1.05;
	assert_null(detect_judge_profile(&s, 1.0, &p, st, &wall, detail, sizeof detail));
	p.kernel_ms_median = 2.0;
	assert_string_equal(detect_judge_profile(&s, 1.0, &p, st, &wall, detail, sizeof detail),
	    "timing_mismatch");
	assert_non_null(strstr(status_of(st, "timing_cross_check"), "flagged"));
	p.kernel_ms_median = 0.9;

	/* A decoy: the solution's kernels take 0.5% of the kernel time. */
	p.custom_ms = 0.09;
	kind = detect_judge_profile(&s, 1.0, &p, st, &wall, detail, sizeof detail);
	assert_string_equal(kind, "decoy");
	assert_non_null(strstr(detail, "coverage 0.0050"));
	/* ... unless the threshold is lower. */
	s.decoy_min_coverage = 0.001;
	assert_null(detect_judge_profile(&s, 1.0, &p, st, &wall, detail, sizeof detail));
	s.decoy_min_coverage = 0.01;
	/* None at all, the solution's kernels never ran. */
	p.custom_ms = 0.0;
	assert_string_equal(detect_judge_profile(&s, 1.0, &p, st, &wall, detail, sizeof detail),
	    "decoy");
	/* Hidden work is named before the decoy it comes with. */
	p.foreign_stream_kernels = 1;
	assert_string_equal(detect_judge_profile(&s, 1.0, &p, st, &wall, detail, sizeof detail),
	    "hidden_work");
	assert_non_null(strstr(status_of(st, "decoy"), "flagged"));
	p.foreign_stream_kernels = 0;
	p.custom_ms = p.total_ms;

	/* No kernel time at all: nothing to judge a decoy by. */
	p.total_ms = p.custom_ms = 0.0;
	assert_null(detect_judge_profile(&s, 1.0, &p, st, &wall, detail, sizeof detail));
	assert_non_null(strstr(status_of(st, "decoy"), "skipped"));
	p.total_ms = p.custom_ms = 18.0;

	/* The host's clock far above the events is a note, not a verdict. */
	p.wall_ms_median = 50.0;
	assert_null(detect_judge_profile(&s, 1.0, &p, st, &wall, detail, sizeof detail));
	assert_true(wall);
	json_decref(st);
}

static void
test_settings(void **state)
{
	struct detect_settings s;

	test_host.config_get = cfg_get;
	test_host.gpu_lock = fake_host.gpu_lock;
	nvrtc_host = &test_host;
	cfg_clear();
	detect_settings_load(&s);
	assert_true(s.roofline && s.problem_checks && s.candidate_repeat);
	assert_true(s.roofline_safety == 0.8 && s.decoy_min_coverage == 0.01);
	cfg_set("roofline", "no");
	cfg_set("roofline_safety", "0.5");
	cfg_set("decoy_min_coverage", "2");		/* out of range: the default */
	cfg_set("roofline_bandwidth_gbps", "fast");	/* not a number: the default */
	cfg_set("candidate_repeat", "maybe");		/* not yes/no: the default */
	detect_settings_load(&s);
	assert_false(s.roofline);
	assert_true(s.roofline_safety == 0.5);
	assert_true(s.decoy_min_coverage == 0.01);
	assert_true(s.roofline_gbps == 0.0);
	assert_true(s.candidate_repeat);
	cfg_clear();
}

/* ------------------------------------- evaluate_job against the fake */

static struct fake_stats baseline;

static int
setup_device(void **state)
{
	char *cause = NULL;
	void *self = dlopen(NULL, RTLD_NOW);

	test_host.abi_major = KGYM_PLUGIN_ABI_MAJOR;
	test_host.abi_minor = KGYM_PLUGIN_ABI_MINOR;
	test_host.struct_size = sizeof test_host;
	test_host.config_get = cfg_get;
	nvrtc_host = &test_host;
	if (self == NULL || device_attach(self, true, false, &cause) < 0 || !nvdev.ready) {
		fprintf(stderr, "device_attach: %s\n", cause != NULL ? cause : "not ready");
		return -1;
	}
	baseline = fake_stats;
	return 0;
}

static int
teardown_device(void **state)
{
	device_fini();
	nvrtc_host = NULL;
	return 0;
}

static int
clear_config(void **state)
{
	cfg_clear();
	return 0;
}

/* A vector addition with N elements; the reference runs `ref`, the solution `kernel`. */
static json_t *
request(const char *ref, const char *kernel, int n)
{
	char *b64 = compile_b64_encode("fake cubin", 10);
	json_t *r;

	r = json_pack("{s:s, s:s, s:{s:s, s:{s:i}, s:[{s:s, s:s, s:[s], s:{s:s}},"
	    " {s:s, s:s, s:[s], s:{s:s, s:f, s:f}}], s:[{s:s, s:s, s:[s]}],"
	    " s:{s:s, s:[{s:s, s:[s,i,i], s:[i,i,i], s:[s,s,s,s]}]}},"
	    " s:{s:s, s:[{s:s, s:[s,i,i], s:[i,i,i], s:[s,s,s,s]}]},"
	    " s:s, s:s, s:s, s:{s:f}}",
	    "op", "evaluate", "mode", "kernelbench",
	    "problem", "name", "vadd", "sizes", "N", n,
	    "inputs", "name", "x", "dtype", "float32", "shape", "N", "init", "dist", "normal",
	    "name", "y", "dtype", "float32", "shape", "N", "init", "dist", "uniform", "low", -1.0,
	    "high", 1.0,
	    "outputs", "name", "out", "dtype", "float32", "shape", "N",
	    "reference", "source", "ref", "launch", "kernel", ref, "grid", "cdiv(N,256)",
	    1, 1, "block", 256, 1, 1, "args", "x", "y", "out", "N",
	    "solution", "source", "sol", "launch", "kernel", kernel, "grid", "cdiv(N,256)", 1, 1,
	    "block", 256, 1, 1, "args", "x", "y", "out", "N",
	    "reference_cubin_b64", b64, "solution_cubin_b64", b64, "seed", "987654321",
	    "settings", "max_timing_ms", 60000.0);
	free(b64);
	assert_non_null(r);
	return r;
}

static json_t *
step(json_t *req, const char *program)
{
	json_t *p = json_object_get(req, "solution");

	if (strcmp(program, "reference") == 0)
		p = json_object_get(json_object_get(req, "problem"), "reference");
	return json_array_get(json_object_get(p, "launch"), 0);
}

static void
set_json(json_t *obj, const char *key, const char *text)
{
	json_error_t jerr;
	json_t *v = json_loads(text, JSON_DECODE_ANY, &jerr);

	assert_non_null(v);
	json_object_set_new(obj, key, v);
}

/* Both programs o = x * alpha (scale64). */
static json_t *
scale_request(const char *alpha)
{
	json_t *req = request("scale64", "scale64", 3000);
	char args[128];

	snprintf(args, sizeof args, "[\"x\", \"out\", {\"f32\": %s}, \"N\"]", alpha);
	set_json(step(req, "reference"), "args", args);
	set_json(step(req, "solution"), "args", args);
	return req;
}

static void
no_timing(json_t *req)
{
	json_object_set_new(json_object_get(req, "settings"), "run_performance", json_false());
}

static json_t *
run(json_t *req)
{
	json_t *res = NULL;
	char *cause = NULL;
	int error;

	error = evaluate_job(req, &res, &cause);
	if (error < 0)
		fail_msg("evaluate_job: %d %s", error, cause ? cause : "");
	json_decref(req);
	assert_true(json_is_object(res));
	/* Nothing of the job, detectors' buffers included, is left behind. */
	assert_int_equal(fake_stats.live_allocs, baseline.live_allocs);
	assert_int_equal(fake_stats.live_handles, baseline.live_handles);
	assert_int_equal(fake_stats.leaks, baseline.leaks);
	return res;
}

static const char *
str(const json_t *o, const char *key)
{
	const char *s = json_string_value(json_object_get(o, key));

	return s != NULL ? s : "";
}

static json_t *
meta(const json_t *res)
{
	return json_object_get(res, "metadata");
}

static bool
has_flag(const json_t *res, const char *flag)
{
	const json_t *flags = json_object_get(meta(res), "problem_flags"), *f;
	size_t i;

	json_array_foreach(flags, i, f)
		if (strcmp(json_string_value(f), flag) == 0)
			return true;
	return false;
}

static void
dump_fail(json_t *res, const char *what)
{
	char *dump = json_dumps(res, JSON_INDENT(1));

	fail_msg("%s: %s", what, dump);
}

static void
expect_correct(json_t *res)
{
	if (!json_is_true(json_object_get(res, "correctness")))
		dump_fail(res, "expected correct");
}

static void
test_honest_candidate(void **state)
{
	json_t *res = run(request("vadd_ref", "vadd", 1000)), *m, *det;

	expect_correct(res);
	m = meta(res);
	assert_int_equal(json_array_size(json_object_get(m, "problem_flags")), 0);
	assert_true(json_is_false(json_object_get(m, "nondeterministic")));
	assert_true(json_is_true(json_object_get(m, "bitwise_reproducible")));
	assert_true(json_is_true(json_object_get(m, "reference_bitwise_reproducible")));
	assert_true(json_is_false(json_object_get(res, "decoy_kernel")));
	assert_null(json_object_get(m, "hack"));
	det = json_object_get(m, "detectors");
	assert_non_null(strstr(str(det, "roofline"), "passed: the outputs (4000 bytes) fit"));
	assert_non_null(strstr(str(det, "decoy"), "skipped: no CUPTI"));
	assert_string_equal(str(det, "candidate_repeat"), "passed");
	assert_string_equal(str(det, "reference_repeat"), "passed (bit for bit)");
	assert_string_equal(str(det, "degenerate_outputs"), "ran on 5 reference trial(s)");
	/* The speedup the repeats must not disturb: reference 0.1, candidate 0.05. */
	assert_true(fabs(json_real_value(json_object_get(res, "speedup")) - 2.0) < 0.02);
	json_decref(res);
}

static void
test_candidate_not_reproducible(void **state)
{
	json_t *res = run(request("vadd_ref", "vadd_flaky", 1000));

	if (strcmp(str(res, "error_code"), "CORRECTNESS_ERROR") != 0 ||
	    strstr(str(res, "error_message"), "a repeat of correctness trial 1") == NULL)
		dump_fail(res, "expected a CORRECTNESS_ERROR on the repeat");
	assert_non_null(strstr(str(res, "error_message"), "wrong at index 999"));
	assert_true(json_is_true(json_object_get(meta(res), "nondeterministic")));
	assert_false(json_is_true(json_object_get(res, "correctness")));
	/* The trial itself passed: one trial recorded, passed. */
	assert_int_equal(json_array_size(json_object_get(res, "correctness_trials")), 1);
	json_decref(res);
}

static void
test_candidate_not_bitwise(void **state)
{
	json_t *req = request("vadd_ref", "vadd_ulp", 1000), *res;

	no_timing(req);
	res = run(req);
	expect_correct(res);
	assert_true(json_is_false(json_object_get(meta(res), "nondeterministic")));
	assert_true(json_is_false(json_object_get(meta(res), "bitwise_reproducible")));
	json_decref(res);
}

static void
test_reference_not_reproducible(void **state)
{
	json_t *req = request("vadd_jitter", "vadd", 1000), *res;

	no_timing(req);
	res = run(req);
	if (!has_flag(res, "nondeterministic_reference"))
		dump_fail(res, "expected nondeterministic_reference");
	assert_non_null(strstr(str(json_object_get(meta(res), "problem_flag_detail"),
	    "nondeterministic_reference"), "second call on the same inputs differs"));
	assert_true(json_is_false(json_object_get(meta(res), "reference_bitwise_reproducible")));
	/* The problem is flagged, the candidate is not blamed. */
	assert_false(has_flag(res, "degenerate_outputs"));
	assert_null(json_object_get(meta(res), "hack"));
	json_decref(res);
}

static void
test_degenerate_constant(void **state)
{
	json_t *req = scale_request("0.0"), *res;

	no_timing(req);
	res = run(req);
	expect_correct(res);
	if (!has_flag(res, "degenerate_outputs"))
		dump_fail(res, "expected degenerate_outputs");
	assert_non_null(strstr(str(json_object_get(meta(res), "problem_flag_detail"),
	    "degenerate_outputs"), "output 'out' is (nearly) constant in all 5"));
	json_decref(res);
}

static void
test_degenerate_identity(void **state)
{
	json_t *req = scale_request("1.0"), *res;

	no_timing(req);
	res = run(req);
	expect_correct(res);
	if (!has_flag(res, "degenerate_outputs"))
		dump_fail(res, "expected degenerate_outputs");
	assert_non_null(strstr(str(json_object_get(meta(res), "problem_flag_detail"),
	    "degenerate_outputs"), "output 'out' equals input 'x'"));
	json_decref(res);

	/* x * 2 is neither constant, nor a copy, nor independent of x. */
	req = scale_request("2.0");
	no_timing(req);
	res = run(req);
	expect_correct(res);
	assert_int_equal(json_array_size(json_object_get(meta(res), "problem_flags")), 0);
	json_decref(res);
}

static void
test_degenerate_independent(void **state)
{
	json_t *req = request("iota4", "iota4", 2000), *res;

	no_timing(req);
	res = run(req);
	expect_correct(res);
	if (!has_flag(res, "degenerate_outputs"))
		dump_fail(res, "expected degenerate_outputs");
	assert_non_null(strstr(str(json_object_get(meta(res), "problem_flag_detail"),
	    "degenerate_outputs"), "is the same, bit for bit, for the inputs of all 5"));
	json_decref(res);
}

/* Several size sets: the problem checks compare like with like. */
static void
test_size_sets_problem_checks(void **state)
{
	json_t *req, *res, *det;

	/* An honest problem stays unflagged across shapes. */
	req = request("vadd_ref", "vadd", 1000);
	set_json(json_object_get(req, "problem"), "sizes", "[{\"N\": 1000}, {\"N\": 1500}]");
	no_timing(req);
	res = run(req);
	expect_correct(res);
	assert_int_equal(json_array_size(json_object_get(meta(res), "problem_flags")), 0);
	det = json_object_get(meta(res), "detectors");
	assert_string_equal(str(det, "degenerate_outputs"), "ran on 5 reference trial(s)");
	assert_string_equal(str(det, "reference_repeat"), "passed (bit for bit)");
	json_decref(res);

	/* Outputs independent of the inputs: seen among the first set's trials. */
	req = request("iota4", "iota4", 2000);
	set_json(json_object_get(req, "problem"), "sizes", "[{\"N\": 2000}, {\"N\": 3000}]");
	no_timing(req);
	res = run(req);
	expect_correct(res);
	if (!has_flag(res, "degenerate_outputs"))
		dump_fail(res, "expected degenerate_outputs");
	assert_non_null(strstr(str(json_object_get(meta(res), "problem_flag_detail"),
	    "degenerate_outputs"), "is the same, bit for bit, for the inputs of all 3 reference "
	    "trials of the first size set"));
	json_decref(res);
}

static void
test_roofline_flags(void **state)
{
	/* 100000 floats: 400000 bytes, beyond the fake's 64 KiB L2.  At 1 MB/s
	 * they need 0.27 s; the candidate reports 0.05 ms. */
	json_t *res, *hack, *roof;

	cfg_set("roofline_bandwidth_gbps", "0.001");
	res = run(request("vadd_ref", "vadd", 100000));
	if (strcmp(str(res, "error_code"), "REWARD_HACK") != 0)
		dump_fail(res, "expected REWARD_HACK roofline");
	assert_false(json_is_true(json_object_get(res, "correctness")));
	assert_string_equal(str(res, "status"), "completed");
	hack = json_object_get(meta(res), "hack");
	assert_string_equal(str(hack, "kind"), "roofline");
	assert_non_null(strstr(str(hack, "detail"), "400000 bytes of outputs"));
	roof = json_object_get(meta(res), "roofline");
	assert_string_equal(str(roof, "bandwidth_source"), "config");
	assert_true(fabs(json_real_value(json_object_get(roof, "floor_ms")) -
	    0.8 * (400000 - 65536) / 1000.0) < 1e-9);
	assert_non_null(strstr(str(json_object_get(meta(res), "detectors"), "roofline"),
	    "flagged"));
	/* The timing is still reported, for whoever looks into it. */
	assert_non_null(json_object_get(res, "timing"));
	assert_false(json_is_true(json_object_get(res, "decoy_kernel")));
	json_decref(res);
}

static void
test_roofline_passes(void **state)
{
	json_t *res, *roof;

	/* A plausible bandwidth: 0.05 ms for 400 KB is fine. */
	cfg_set("roofline_bandwidth_gbps", "3000");
	res = run(request("vadd_ref", "vadd", 100000));
	expect_correct(res);
	assert_non_null(strstr(str(json_object_get(meta(res), "detectors"), "roofline"),
	    "passed: median"));
	json_decref(res);

	/* Measured: the fake knows no memory clock, so the probe decides. */
	cfg_clear();
	res = run(request("vadd_ref", "vadd", 100000));
	expect_correct(res);
	roof = json_object_get(meta(res), "roofline");
	assert_string_equal(str(roof, "bandwidth_source"), "measured");
	assert_true(json_real_value(json_object_get(roof, "measured_gbps")) > 0.0);
	assert_true(json_real_value(json_object_get(roof, "nominal_gbps")) == 0.0);
	json_decref(res);

	/* Off. */
	cfg_set("roofline", "no");
	cfg_set("roofline_bandwidth_gbps", "0.001");
	res = run(request("vadd_ref", "vadd", 100000));
	expect_correct(res);
	assert_non_null(strstr(str(json_object_get(meta(res), "detectors"), "roofline"),
	    "skipped: off"));
	json_decref(res);
}

static void
test_checks_off(void **state)
{
	json_t *req, *res, *det;

	cfg_set("problem_checks", "no");
	cfg_set("candidate_repeat", "no");
	req = scale_request("0.0");
	no_timing(req);
	res = run(req);
	expect_correct(res);
	assert_false(has_flag(res, "degenerate_outputs"));
	det = json_object_get(meta(res), "detectors");
	assert_non_null(strstr(str(det, "degenerate_outputs"), "skipped: off"));
	assert_non_null(strstr(str(det, "roofline"), "skipped: the solution was not timed"));
	assert_null(json_object_get(meta(res), "nondeterministic"));
	json_decref(res);
}

static void
test_wrong_candidate_keeps_its_verdict(void **state)
{
	/* A candidate wrong on trial 1 is a CORRECTNESS_ERROR as before; the
	 * problem's checks still ran on the reference's trial. */
	json_t *res = run(request("vadd_ref", "vadd_off", 1000));

	assert_string_equal(str(res, "error_code"), "CORRECTNESS_ERROR");
	assert_null(strstr(str(res, "error_message"), "repeat"));
	assert_null(json_object_get(meta(res), "nondeterministic"));
	assert_string_equal(str(json_object_get(meta(res), "detectors"), "degenerate_outputs"),
	    "ran on 1 reference trial(s)");
	assert_int_equal(json_array_size(json_object_get(meta(res), "problem_flags")), 0);
	json_decref(res);
}

int
main(void)
{
	const struct CMUnitTest pure_tests[] = {
		cmocka_unit_test(test_roofline_floor),
		cmocka_unit_test(test_nominal_bandwidth),
		cmocka_unit_test(test_nearly_constant),
		cmocka_unit_test(test_judge_profile),
		cmocka_unit_test(test_settings),
	};
	const struct CMUnitTest eval_tests[] = {
		cmocka_unit_test_setup(test_honest_candidate, clear_config),
		cmocka_unit_test_setup(test_candidate_not_reproducible, clear_config),
		cmocka_unit_test_setup(test_candidate_not_bitwise, clear_config),
		cmocka_unit_test_setup(test_reference_not_reproducible, clear_config),
		cmocka_unit_test_setup(test_degenerate_constant, clear_config),
		cmocka_unit_test_setup(test_degenerate_identity, clear_config),
		cmocka_unit_test_setup(test_degenerate_independent, clear_config),
		cmocka_unit_test_setup(test_size_sets_problem_checks, clear_config),
		cmocka_unit_test_setup(test_roofline_flags, clear_config),
		cmocka_unit_test_setup(test_roofline_passes, clear_config),
		cmocka_unit_test_setup(test_checks_off, clear_config),
		cmocka_unit_test_setup(test_wrong_candidate_keeps_its_verdict, clear_config),
	};
	int failed;

	/* What prepare() would find through the worker's host->toolkit. */
	nvrtc_compare = &rules_api;
	failed = cmocka_run_group_tests_name("nvrtc detectors (pure)", pure_tests, NULL, NULL);
	failed += cmocka_run_group_tests_name("nvrtc detectors (fake driver)", eval_tests,
	    setup_device, teardown_device);
	return failed != 0;
}
