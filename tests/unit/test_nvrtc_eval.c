/*
 * test_nvrtc_eval.c -- unit tests of the nvrtc backend's GPU side without a
 * GPU: host element conversions (values.c), timing statistics (stats.c),
 * the trusted helper kernels compiling with NVRTC (helpers.c), and the
 * whole "evaluate" job (evaluate.c, call.c, verdict.c, bind.c, timing.c,
 * device.c) against a fake CUDA driver made of host memory (fake_cuda.c),
 * whose "kernels" are
 * C functions: right, wrong at one element, half-written, input-mutating,
 * crashing, right only for their first calls, and right only at the size
 * they hard-code (caught by problems with several size sets).
 *
 * What the fake cannot show -- the real kernels' arithmetic, guard pages
 * catching a real overrun, event timing on a GPU -- is left to tests/gpu.
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
#include <openssl/evp.h>
#include <unistd.h>

#include "nvrtc_internal.h"
#include "fake_cuda.h"
#include "rules.h"

/* ------------------------------------------------------------- values.c */

/* Elements read back as nvrtc reads them: by the compare toolkit's value(). */
static float
half_value(uint16_t h)
{
	return (float)value_get(SPEC_FLOAT16, &h);
}

static float
bf16_value(uint16_t b)
{
	return (float)value_get(SPEC_BFLOAT16, &b);
}

static void
test_half_roundtrip(void **state)
{
	uint32_t h;
	float f;

	/* Every half that is not NaN survives half -> float -> half. */
	for (h = 0; h < 0x10000; h++) {
		f = half_value((uint16_t)h);
		if (isnan(f))
			continue;
		assert_int_equal(value_float_to_half(f), h);
	}
}

static void
test_half_rounding(void **state)
{
	assert_int_equal(value_float_to_half(1.0f), 0x3c00);
	assert_int_equal(value_float_to_half(-2.0f), 0xc000);
	assert_int_equal(value_float_to_half(65504.0f), 0x7bff);
	assert_int_equal(value_float_to_half(65519.0f), 0x7bff);
	assert_int_equal(value_float_to_half(65520.0f), 0x7c00);	/* ties to even: inf */
	assert_int_equal(value_float_to_half(ldexpf(1.0f, -24)), 0x0001);
	assert_int_equal(value_float_to_half(ldexpf(1.0f, -25)), 0x0000);	/* tie: even */
	assert_int_equal(value_float_to_half(ldexpf(3.0f, -25)), 0x0002);	/* tie: even */
	assert_int_equal(value_float_to_half(ldexpf(1.0f, -14)), 0x0400);
	/* 1 + 2^-11 is halfway between 1 and 1 + 2^-10: even is 1. */
	assert_int_equal(value_float_to_half(1.0f + ldexpf(1.0f, -11)), 0x3c00);
	assert_int_equal(value_float_to_half(1.0f + ldexpf(3.0f, -11)), 0x3c02);
	assert_true(isnan(half_value(value_float_to_half(NAN))));
	assert_true(half_value(0x0001) == ldexpf(1.0f, -24));
}

static void
test_bf16(void **state)
{
	uint32_t bits;
	float f;

	assert_int_equal(value_float_to_bf16(1.0f), 0x3f80);
	bits = 0x3f808000;	/* halfway, lower is even */
	memcpy(&f, &bits, 4);
	assert_int_equal(value_float_to_bf16(f), 0x3f80);
	bits = 0x3f818000;	/* halfway, upper is even */
	memcpy(&f, &bits, 4);
	assert_int_equal(value_float_to_bf16(f), 0x3f82);
	assert_true(bf16_value(0x4040) == 3.0f);
	assert_true(isnan(bf16_value(value_float_to_bf16(NAN))));
}

static void
test_value_put(void **state)
{
	unsigned char b[8];
	char s[64];

	assert_int_equal(value_put(SPEC_INT8, 127, b), 0);
	assert_int_equal(value_put(SPEC_INT8, 128, b), -ERANGE);
	assert_int_equal(value_put(SPEC_UINT8, -1, b), -ERANGE);
	assert_int_equal(value_put(SPEC_INT32, 1.5, b), -EINVAL);
	assert_int_equal(value_put(SPEC_BOOL, 2, b), -ERANGE);
	assert_int_equal(value_put(SPEC_INT64, 9223372036854775808.0, b), -ERANGE);
	assert_int_equal(value_put(SPEC_INT16, -32768, b), 0);
	assert_true(value_get(SPEC_INT16, b) == -32768.0);
	assert_int_equal(value_put(SPEC_FLOAT16, 0.5, b), 0);
	assert_true(value_get(SPEC_FLOAT16, b) == 0.5);
	assert_int_equal(value_put(SPEC_BFLOAT16, INFINITY, b), 0);
	assert_true(isinf(value_get(SPEC_BFLOAT16, b)));
	assert_int_equal(value_put(SPEC_FLOAT32, 0.1, b), 0);
	rules_api.format_value(KGYM_DTYPE_FLOAT32, b, s, sizeof s);
	assert_string_equal(s, "0.100000001");
	assert_int_equal(value_put(SPEC_INT64, -5, b), 0);
	rules_api.format_value(KGYM_DTYPE_INT64, b, s, sizeof s);
	assert_string_equal(s, "-5");
}

static void
test_seeds(void **state)
{
	/* Distinct for neighbouring tags and indexes, and reproducible. */
	assert_true(value_seed(1, VALUE_TAG_TRIAL, 0) != value_seed(1, VALUE_TAG_TRIAL, 1));
	assert_true(value_seed(1, VALUE_TAG_TRIAL, 0) != value_seed(1, VALUE_TAG_INPUT, 0));
	assert_true(value_seed(1, VALUE_TAG_TRIAL, 0) != value_seed(2, VALUE_TAG_TRIAL, 0));
	assert_true(value_seed(7, VALUE_TAG_HASH, 3) == value_seed(7, VALUE_TAG_HASH, 3));
}

/* -------------------------------------------------------------- stats.c */

static void
test_stats_small(void **state)
{
	double x[] = { 5, 1, 4, 2, 3 };
	struct stats_summary s;

	assert_int_equal(stats_summarise(x, 5, &s), 0);
	assert_true(s.median == 3.0 && s.min == 1.0 && s.max == 5.0 && s.mean == 3.0);
	assert_true(fabs(s.std - sqrt(2.5)) < 1e-12);
	assert_true(isinf(s.ci_rel));		/* 5 samples: no 95% interval */
	assert_int_equal(stats_summarise(x, 0, &s), -EINVAL);
	x[2] = NAN;
	assert_int_equal(stats_summarise(x, 5, &s), -EINVAL);
}

static void
test_stats_ci(void **state)
{
	double x[100];
	struct stats_summary s;
	size_t i;

	for (i = 0; i < 10; i++)
		x[i] = (double)(10 - i);
	assert_int_equal(stats_summarise(x, 10, &s), 0);
	assert_true(s.median == 5.5);
	assert_true(s.ci_lo == 1.0 && s.ci_hi == 10.0);	/* ranks clamp to the extremes */
	assert_true(fabs(s.ci_rel - 4.5 / 5.5) < 1e-12);

	for (i = 0; i < 100; i++)
		x[i] = (double)(100 - i);
	assert_int_equal(stats_summarise(x, 100, &s), 0);
	/* n = 100: ranks 40 and 61, the textbook interval. */
	assert_true(s.median == 50.5 && s.ci_lo == 40.0 && s.ci_hi == 61.0);
}

static void
test_stats_json(void **state)
{
	double x[] = { 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0 };
	struct stats_summary s;
	json_t *j;

	assert_int_equal(stats_summarise(x, 7, &s), 0);
	j = stats_json(&s);
	assert_non_null(j);
	assert_true(json_real_value(json_object_get(j, "median_ms")) == 1.0);
	assert_true(json_real_value(json_object_get(j, "ci95_rel")) == 0.0);
	assert_int_equal(json_integer_value(json_object_get(j, "trials")), 7);
	assert_int_equal(json_array_size(json_object_get(j, "ci95_ms")), 2);
	json_decref(j);
}

/* ------------------------------------------------------------- nvrtc.c */

extern const struct kgym_plugin kgym_plugin;	/* nvrtc.c's, linked in */

static const struct kgym_toolkit_api *
no_toolkit(const char *name, uint32_t min_version, char **ret_cause)
{
	*ret_cause = strdup("no toolkit serves the 'compare' API (test)");
	return NULL;
}

/* Without the compare toolkit nvrtc fails closed in prepare(), naming it. */
static void
test_prepare_needs_compare(void **state)
{
	const struct kgym_host *saved = nvrtc_host;
	struct kgym_host h = fake_host;
	char *cause = NULL;

	h.toolkit = no_toolkit;
	nvrtc_host = &h;
	assert_int_equal(kgym_plugin.prepare(&cause), -ENOENT);
	assert_non_null(cause);
	if (strstr(cause, "nvrtc needs the 'compare' toolkit, version 1: no toolkit serves "
	    "the 'compare' API (test)") == NULL)
		fail_msg("cause: %s", cause);
	assert_null(nvrtc_compare);
	free(cause);
	cause = NULL;

	/* A host from before ABI 1.3 has no toolkit at all. */
	h.toolkit = NULL;
	assert_int_equal(kgym_plugin.prepare(&cause), -ENOENT);
	assert_non_null(strstr(cause, "hands out no toolkits"));
	free(cause);

	/* With it, the helpers compile only with the toolkit's kernel. */
	nvrtc_host = saved;
	nvrtc_compare = &rules_api;
}

/*
 * Without the cupti toolkit the backend still works: profiling is
 * "unavailable", naming the toolkit, and timing uses events alone.
 * (fake_host.toolkit serves only "compare".)
 */
static void
test_profile_needs_cupti(void **state)
{
	profile_prepare();
	assert_false(profile_available());
	if (strstr(profile_status(), "unavailable: no 'cupti' toolkit: no toolkit serves the "
	    "'cupti' API") == NULL)
		fail_msg("status: %s", profile_status());
	assert_int_equal(profile_extra_calls(), 0);
	profile_fini();
	assert_non_null(strstr(profile_status(), "off: "));
}

/* ------------------------------------------------------------ helpers.c */

static void
test_helpers_compile(void **state)
{
	static const char *const archs[] = { "sm_90", "sm_80", "sm_75" };
	const char *names[] = { "kg_init", "kg_poison", "kg_compare", "kg_hash", "kg_flush",
	    "kg_scrub" };
	unsigned char *cubin;
	char *cause = NULL;
	size_t size, i, j;

	for (i = 0; i < 3; i++) {
		assert_int_equal(helpers_compile(archs[i], &cubin, &size, &cause), 0);
		assert_true(size > 1000 && memcmp(cubin, "\177ELF", 4) == 0);
		for (j = 0; j < 6; j++)
			assert_non_null(memmem(cubin, size, names[j], strlen(names[j])));
		free(cubin);
	}
	assert_int_equal(helpers_compile("sm_1", &cubin, &size, &cause), -EINVAL);
	assert_non_null(cause);
	free(cause);
	cause = NULL;

	/* No compare toolkit, no kg_compare: no helpers at all. */
	nvrtc_compare = NULL;
	assert_int_equal(helpers_compile("sm_90", &cubin, &size, &cause), -ENOENT);
	assert_non_null(strstr(cause, "no compare toolkit"));
	free(cause);
	nvrtc_compare = &rules_api;
}

/* ------------------------------------- evaluate_job against the fake */

static struct fake_stats baseline;

static int
setup_device(void **state)
{
	char *cause = NULL;
	void *self = dlopen(NULL, RTLD_NOW);

	nvrtc_host = &fake_host;	/* a worker's: timing takes its GPU lock */
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
	return 0;
}

/* A vector addition with N elements; the solution runs `kernel`. */
static json_t *
request(const char *kernel, int n)
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
	    "reference", "source", "ref", "launch", "kernel", "vadd_ref", "grid", "cdiv(N,256)",
	    1, 1, "block", 256, 1, 1, "args", "x", "y", "out", "N",
	    "solution", "source", "sol", "launch", "kernel", kernel, "grid", "cdiv(N,256)", 1, 1,
	    "block", 256, 1, 1, "args", "x", "y", "out", "N",
	    "reference_cubin_b64", b64, "solution_cubin_b64", b64, "seed", "1234567890123",
	    "settings", "max_timing_ms", 60000.0);
	free(b64);
	assert_non_null(r);
	return r;
}

static json_t *
sol_step(json_t *req)
{
	return json_array_get(json_object_get(json_object_get(req, "solution"), "launch"), 0);
}

static void
set_json(json_t *obj, const char *key, const char *text)
{
	json_error_t jerr;
	json_t *v = json_loads(text, JSON_DECODE_ANY, &jerr);

	assert_non_null(v);
	json_object_set_new(obj, key, v);
}

/* Run the job (consumes req); the result must be an object. */
static json_t *
run(json_t *req)
{
	json_t *res = NULL;
	char *cause = NULL;
	long leaks = fake_stats.leaks;
	int error;

	error = evaluate_job(req, &res, &cause);
	if (error < 0)
		fail_msg("evaluate_job: %d %s", error, cause ? cause : "");
	json_decref(req);
	assert_true(json_is_object(res));
	/* Nothing of the job is left on the "device". */
	assert_int_equal(fake_stats.live_allocs, baseline.live_allocs);
	assert_int_equal(fake_stats.live_handles, baseline.live_handles);
	assert_int_equal(fake_stats.modules, baseline.modules);
	/* No candidate ever started with the expected outputs on the device. */
	assert_int_equal(fake_stats.leaks, leaks);
	return res;
}

static const char *
str(const json_t *res, const char *key)
{
	const char *s = json_string_value(json_object_get(res, key));

	return s != NULL ? s : "";
}

static void
expect_verdict(json_t *res, const char *status, const char *code, const char *needle)
{
	if (strcmp(str(res, "status"), status) != 0 || strcmp(str(res, "error_code"), code) != 0 ||
	    strstr(str(res, "error_message"), needle) == NULL) {
		char *dump = json_dumps(res, JSON_INDENT(1));

		fail_msg("expected %s/%s/'%s', got %s", status, code, needle, dump);
	}
	assert_false(json_is_true(json_object_get(res, "correctness")));
}

static void
test_eval_correct(void **state)
{
	long locks = fake_stats.exclusive_locks;
	json_t *res = run(request("vadd", 1000)), *t, *trials;
	double speedup;
	size_t i;

	/* Timed under the worker's exclusive GPU lock, taken once. */
	assert_int_equal(fake_stats.exclusive_locks, locks + 1);

	if (!json_is_true(json_object_get(res, "correctness")))
		fail_msg("%s", json_dumps(res, JSON_INDENT(1)));
	assert_string_equal(str(res, "status"), "completed");
	assert_null(json_object_get(res, "error_code"));
	assert_null(json_object_get(res, "recycle_worker"));
	/* The job's own time in the worker (bench/scaling.py's busy share). */
	assert_true(json_is_real(json_object_get(json_object_get(res, "metadata"), "gpu_job_ms")));
	assert_true(json_real_value(json_object_get(json_object_get(res, "metadata"), "gpu_job_ms")) > 0.0);
	trials = json_object_get(res, "correctness_trials");
	assert_int_equal(json_array_size(trials), 5);
	for (i = 0; i < 5; i++) {
		t = json_array_get(trials, i);
		assert_true(json_is_true(json_object_get(t, "passed")));
		assert_int_equal(json_integer_value(json_object_get(t, "mismatches")), 0);
		assert_true(json_is_string(json_object_get(t, "seed")));
		assert_string_equal(str(json_object_get(t, "init"), "x"), "normal(0, 1)");
		assert_string_equal(str(json_object_get(t, "init"), "y"), "uniform[-1, 1)");
	}
	/* Simulated costs: reference 0.1 ms, candidate 0.05 ms; each event
	 * adds 0.003 ms (fake_cuda.c), measured and taken off. */
	speedup = json_real_value(json_object_get(res, "speedup"));
	assert_true(fabs(json_real_value(json_object_get(json_object_get(res, "timing"),
	    "dispatch_ms")) - 0.003) < 0.0005);
	assert_true(fabs(speedup - 2.0) < 0.02);
	assert_true(fabs(json_real_value(json_object_get(res, "kernel_runtime")) - 0.05) < 0.001);
	t = json_object_get(res, "timing");
	assert_string_equal(str(t, "stop"), "precision");
	assert_true(json_integer_value(json_object_get(json_object_get(t, "kernel"), "trials")) >= 10);
	assert_true(json_integer_value(json_object_get(json_object_get(t, "kernel"),
	    "checked_calls")) >= 1);
	assert_true(json_is_true(json_object_get(json_object_get(t, "kernel"), "l2_flush")));
	assert_string_equal(str(json_object_get(t, "kernel"), "clock_source"), "nominal");
	assert_int_equal(json_integer_value(json_object_get(json_object_get(res, "metadata"),
	    "num_custom_kernels")), 1);
	assert_true(fake_stats.flushes > baseline.flushes);
	assert_true(fake_stats.l2_resets > baseline.l2_resets);
	json_decref(res);
}

static void
test_eval_wrong_element(void **state)
{
	json_t *res = run(request("vadd_off", 1000));

	expect_verdict(res, "completed", "CORRECTNESS_ERROR", "output 'out' is wrong at index 500");
	assert_non_null(strstr(str(res, "error_message"), "1 of 1000 elements differ"));
	assert_null(strstr(str(res, "error_message"), "never written"));
	assert_int_equal(json_array_size(json_object_get(res, "correctness_trials")), 1);
	assert_null(json_object_get(res, "timing"));
	json_decref(res);
}

static void
test_eval_half_written(void **state)
{
	json_t *res = run(request("vadd_half", 1001));

	expect_verdict(res, "completed", "CORRECTNESS_ERROR", "wrong at index 500");
	assert_non_null(strstr(str(res, "error_message"), "got nan (never written"));
	assert_non_null(strstr(str(res, "error_message"), "501 of 1001"));
	json_decref(res);
}

static void
test_eval_mutates_input(void **state)
{
	json_t *res = run(request("vadd_mutate", 100));

	expect_verdict(res, "completed", "REWARD_HACK", "input 'x' was changed");
	assert_string_equal(str(json_object_get(json_object_get(res, "metadata"), "hack"), "kind"),
	    "input_mutation");
	json_decref(res);
}

static void
test_eval_crash(void **state)
{
	json_t *res = run(request("vadd_crash", 100));

	expect_verdict(res, "completed", "RUNTIME_ERROR", "CUDA_ERROR_ILLEGAL_ADDRESS");
	assert_non_null(strstr(str(res, "error_message"), "correctness trial 1 of 5"));
	assert_true(json_is_true(json_object_get(res, "recycle_worker")));
	json_decref(res);
	fake_reset();
}

static void
test_eval_overrun(void **state)
{
	/* 1024 floats: the tensor ends exactly at the guard. */
	json_t *res = run(request("vadd_overrun", 1024));

	expect_verdict(res, "completed", "RUNTIME_ERROR", "CUDA_ERROR_ILLEGAL_ADDRESS");
	assert_true(json_is_true(json_object_get(res, "recycle_worker")));
	json_decref(res);
	fake_reset();
}

static void
test_eval_cheats_when_timed(void **state)
{
	json_t *req = request("vadd_lazy", 100), *res;

	res = run(req);
	expect_verdict(res, "completed", "REWARD_HACK", "every call of the timing phase is "
	    "checked");
	assert_string_equal(str(json_object_get(json_object_get(res, "metadata"), "hack"), "kind"),
	    "timed_output_mismatch");
	/* The expected element is named (the reference ran again for it), and
	 * nothing of it is left on the device (run() scans). */
	if (getenv("KGYM_TEST_VERBOSE") != NULL)
		fprintf(stderr, "%s\n", str(res, "error_message"));
	assert_null(strstr(str(res, "error_message"), "expected 0,"));
	assert_non_null(strstr(str(res, "error_message"), ", got 0"));
	json_decref(res);
}

/* Fail closed: a host without a GPU lock gets no timing, never unlocked. */
static void
test_eval_no_lock_refuses(void **state)
{
	const struct kgym_host *host = nvrtc_host;
	json_t *res = NULL;
	char *cause = NULL;
	int error;

	nvrtc_host = NULL;
	error = evaluate_job(request("vadd", 100), &res, &cause);
	nvrtc_host = host;
	if (error >= 0) {
		assert_true(json_is_object(res));
		if (json_object_get(res, "timing") != NULL || json_object_get(res, "speedup") != NULL)
			fail_msg("timed without a GPU lock: %s", json_dumps(res, JSON_INDENT(1)));
		assert_non_null(strstr(str(res, "error_message"), "never times unlocked"));
	} else {
		assert_non_null(cause);
		assert_non_null(strstr(cause, "never times unlocked"));
	}
	json_decref(res);
	free(cause);
	fake_reset();
}

/* Inputs are checked on every timed call, not only until a trial passed. */
static void
test_eval_mutates_input_late(void **state)
{
	json_t *res = run(request("vadd_mutate_late", 100));

	expect_verdict(res, "completed", "REWARD_HACK", "input 'x' was changed");
	assert_non_null(strstr(str(res, "error_message"), "timed call"));
	assert_string_equal(str(json_object_get(json_object_get(res, "metadata"), "hack"), "kind"),
	    "input_mutation");
	json_decref(res);
}

/* Every timed call is checked: wrong at one late call only, and caught. */
static void
test_eval_wrong_once_caught(void **state)
{
	json_t *res = run(request("vadd_wrong_once", 100));

	expect_verdict(res, "completed", "REWARD_HACK", "every call of the timing phase is "
	    "checked");
	assert_string_equal(str(json_object_get(json_object_get(res, "metadata"), "hack"), "kind"),
	    "timed_output_mismatch");
	json_decref(res);
}

/*
 * Every timed call gets inputs from a new secret seed: outputs replayed
 * from an earlier timed call are wrong.
 */
static void
test_eval_replay_caught(void **state)
{
	json_t *res = run(request("vadd_replay", 100));

	expect_verdict(res, "completed", "REWARD_HACK", "every call of the timing phase is "
	    "checked");
	assert_string_equal(str(json_object_get(json_object_get(res, "metadata"), "hack"), "kind"),
	    "timed_output_mismatch");
	json_decref(res);
}

/*
 * Every call of the timing phase looks the same to the device: the same
 * kernels, copies and events between one candidate launch and the next,
 * and every one of them checked.
 */
static void
test_eval_timed_calls_alike(void **state)
{
	json_t *req = request("vadd", 1000), *res, *kern;
	size_t i;

	set_json(req, "settings", "{\"min_timing_trials\": 20, \"max_timing_trials\": 40, "
	    "\"timing_rel_precision\": 1e-6, \"warmup\": 3}");
	fake_seq_begin();
	res = run(req);
	if (!json_is_true(json_object_get(res, "correctness")))
		fail_msg("%s", json_dumps(res, JSON_INDENT(1)));
	kern = json_object_get(json_object_get(res, "timing"), "kernel");
	assert_int_equal(json_integer_value(json_object_get(kern, "trials")), 40);
	/* 3 warm-ups and 40 timed calls, each checked. */
	assert_int_equal(json_integer_value(json_object_get(kern, "checked_calls")), 43);
	assert_int_equal(fake_nseq, 43);
	/* The first follows the correctness trials; from the second on, alike. */
	for (i = 2; i < fake_nseq; i++)
		if (fake_seq[i] != fake_seq[1])
			fail_msg("candidate call %zu of the timing phase is preceded by other work "
			    "than call 2", i + 1);
	json_decref(res);
}

/*
 * What one call of the timing phase costs the host, counted by the fake
 * driver between one candidate launch and the next: one wait (the round's
 * results read back, which is also when its events are complete) and one
 * small copy to the host (the comparison slots and input hashes), none to
 * the device -- the expected outputs never travel.  A module reload adds
 * its own wait.  (Before this was counted: 5 waits, 3 copies to the host
 * of which one was every output, 1 copy of every output to the device.)
 */
static void
test_eval_timed_call_host_cost(void **state)
{
	json_t *req = request("vadd", 1000), *res, *kern;
	size_t i;

	set_json(req, "settings", "{\"min_timing_trials\": 20, \"max_timing_trials\": 40, "
	    "\"timing_rel_precision\": 1e-6, \"warmup\": 3, \"reset_every\": 7}");
	fake_seq_begin();
	res = run(req);
	if (!json_is_true(json_object_get(res, "correctness")))
		fail_msg("%s", json_dumps(res, JSON_INDENT(1)));
	kern = json_object_get(json_object_get(res, "timing"), "kernel");
	assert_int_equal(json_integer_value(json_object_get(kern, "checked_calls")), 43);
	assert_int_equal(fake_nseq, 43);
	/* The first stretch holds the end of the correctness trials. */
	for (i = 1; i < fake_nseq; i++) {
		const struct fake_host_seq *h = &fake_host_seq[i];

		if (getenv("KGYM_TEST_VERBOSE") != NULL)
			fprintf(stderr, "call %zu: syncs %ld htod %ld dtoh %ld loads %ld\n", i + 1,
			    h->syncs, h->htod, h->dtoh, h->loads);
		if (h->syncs != 1 + (h->loads > 0) || h->htod != 0 || h->dtoh != 1)
			fail_msg("timing-phase call %zu: %ld waits, %ld copies to the device, %ld "
			    "to the host, %ld module loads (expected 1 wait, or 2 with a load; 0; "
			    "1)", i + 1, h->syncs, h->htod, h->dtoh, h->loads);
	}
	json_decref(res);
}

/*
 * A candidate that computes only when it sees the signs of a checked call
 * (an input hash before it) computes in every timed call: all of them
 * have those signs, and all are checked.
 */
static void
test_eval_sneaky_always_checked(void **state)
{
	json_t *res;
	long lazy = fake_stats.lazy_calls;

	res = run(request("vadd_sneaky", 500));
	if (!json_is_true(json_object_get(res, "correctness")))
		fail_msg("%s", json_dumps(res, JSON_INDENT(1)));
	assert_int_equal(fake_stats.lazy_calls, lazy);
	json_decref(res);
}

/*
 * __device__ state: the candidate's module is loaded again after the
 * correctness trials and at random points of timing.  vadd_state keeps a
 * call count there and goes wrong at its 8th call since a load.
 */
static void
test_eval_state_reset(void **state)
{
	json_t *req, *res, *kern;
	long loads;

	/* Reset before every pair: never more than 3 calls (the warm-ups). */
	req = request("vadd_state", 300);
	set_json(req, "settings", "{\"reset_every\": 1, \"max_timing_trials\": 30, "
	    "\"warmup\": 3}");
	loads = fake_stats.module_loads;
	res = run(req);
	if (!json_is_true(json_object_get(res, "correctness")))
		fail_msg("%s", json_dumps(res, JSON_INDENT(1)));
	kern = json_object_get(json_object_get(res, "timing"), "kernel");
	/* One before the warm-ups, one before each timed pair. */
	assert_int_equal(json_integer_value(json_object_get(kern, "state_resets")),
	    1 + json_integer_value(json_object_get(kern, "trials")));
	/* helpers stay; reference and solution once, then the reloads */
	assert_int_equal(fake_stats.module_loads - loads,
	    2 + json_integer_value(json_object_get(kern, "state_resets")));
	json_decref(res);

	/* Resets at random points only: the count runs past 7 in between, and
	 * the checked call that follows catches it. */
	req = request("vadd_state", 300);
	set_json(req, "settings", "{\"reset_every\": 1000, \"max_timing_trials\": 40, "
	    "\"min_timing_trials\": 20, \"timing_rel_precision\": 1e-6, \"warmup\": 3}");
	res = run(req);
	expect_verdict(res, "completed", "REWARD_HACK", "every call of the timing phase is "
	    "checked");
	json_decref(res);

	/* Default settings: at least one reset among the first pairs too. */
	res = run(request("vadd", 300));
	kern = json_object_get(json_object_get(res, "timing"), "kernel");
	assert_true(json_integer_value(json_object_get(kern, "state_resets")) >= 2);
	json_decref(res);
}

/* The same vector addition over several size sets ("sizes": [...]). */
static json_t *
request_sets(const char *kernel, const char *sets)
{
	json_t *req = request(kernel, 1);

	set_json(json_object_get(req, "problem"), "sizes", sets);
	return req;
}

static void
test_eval_size_sets(void **state)
{
	json_t *res, *trials, *t, *meta;
	size_t i;

	/* Trials cycle through the sets; each trial says which it used. */
	res = run(request_sets("vadd", "[{\"N\": 1000}, {\"N\": 1500}, {\"N\": 700}]"));
	if (!json_is_true(json_object_get(res, "correctness")))
		fail_msg("%s", json_dumps(res, JSON_INDENT(1)));
	trials = json_object_get(res, "correctness_trials");
	assert_int_equal(json_array_size(trials), 5);
	for (i = 0; i < 5; i++) {
		static const int n[] = { 1000, 1500, 700 };

		t = json_array_get(trials, i);
		assert_int_equal(json_integer_value(json_object_get(t, "size_set")), i % 3);
		assert_int_equal(json_integer_value(json_object_get(json_object_get(t, "sizes"),
		    "N")), n[i % 3]);
	}
	meta = json_object_get(res, "metadata");
	assert_int_equal(json_integer_value(json_object_get(meta, "size_sets")), 3);
	assert_string_equal(str(meta, "correctness_trials"), "(5 / 5)");
	/* The last trial was on N = 1500; timing (and what follows) on the first set. */
	assert_int_equal(fake_stats.vadd_last_n, 1000);
	assert_true(fabs(json_real_value(json_object_get(res, "speedup")) - 2.0) < 0.02);
	json_decref(res);

	/* More sets than trials: the trials are raised so each set has one. */
	res = run(request_sets("vadd", "[{\"N\": 11}, {\"N\": 12}, {\"N\": 13}, "
	    "{\"N\": 14}, {\"N\": 15}, {\"N\": 16}, {\"N\": 17}]"));
	assert_true(json_is_true(json_object_get(res, "correctness")));
	trials = json_object_get(res, "correctness_trials");
	assert_int_equal(json_array_size(trials), 7);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(json_array_get(trials,
	    6), "sizes"), "N")), 17);
	json_decref(res);

	/* A single size: the trials as before, on set 0. */
	res = run(request("vadd", 1000));
	t = json_array_get(json_object_get(res, "correctness_trials"), 3);
	assert_int_equal(json_integer_value(json_object_get(t, "size_set")), 0);
	assert_null(json_object_get(json_object_get(res, "metadata"), "size_sets"));
	json_decref(res);
}

static void
test_eval_hardcoded_size(void **state)
{
	json_t *res;

	/* One size: a kernel that ignores n and hard-codes 1000 passes. */
	res = run(request("vadd_fixed", 1000));
	if (!json_is_true(json_object_get(res, "correctness")))
		fail_msg("%s", json_dumps(res, JSON_INDENT(1)));
	json_decref(res);

	/* A second, larger set: the rest of its output is never written. */
	res = run(request_sets("vadd_fixed", "[{\"N\": 1000}, {\"N\": 1500}]"));
	expect_verdict(res, "completed", "CORRECTNESS_ERROR", "output 'out' is wrong at index "
	    "1000");
	assert_non_null(strstr(str(res, "error_message"), "never written"));
	assert_non_null(strstr(str(res, "error_message"), "500 of 1500 elements differ"));
	assert_non_null(strstr(str(res, "error_message"), "(correctness trial 2 of 5, size set "
	    "problem.sizes[1]: N=1500)"));
	assert_int_equal(json_array_size(json_object_get(res, "correctness_trials")), 2);
	assert_null(json_object_get(res, "timing"));
	json_decref(res);

	/* A smaller one: it runs past the end of that set's tensors. */
	res = run(request_sets("vadd_fixed", "[{\"N\": 1000}, {\"N\": 600}]"));
	expect_verdict(res, "completed", "RUNTIME_ERROR", "CUDA_ERROR_ILLEGAL_ADDRESS");
	assert_non_null(strstr(str(res, "error_message"), "correctness trial 2 of 5, size set "
	    "problem.sizes[1]: N=600"));
	json_decref(res);
	fake_reset();
}

static void
test_eval_size_set_guards(void **state)
{
	json_t *res;

	/*
	 * One element past the end: within the 256-byte alignment at N = 1000,
	 * into the guard at N = 512 -- only if set 1's tensors are allocated
	 * for their own size, not the largest set's.
	 */
	res = run(request_sets("vadd_overrun", "[{\"N\": 1000}, {\"N\": 512}]"));
	expect_verdict(res, "completed", "RUNTIME_ERROR", "CUDA_ERROR_ILLEGAL_ADDRESS");
	assert_non_null(strstr(str(res, "error_message"), "size set problem.sizes[1]: N=512"));
	json_decref(res);
	fake_reset();

	/* A launch that only one set's plan breaks is refused before anything runs. */
	{
		json_t *req = request_sets("vadd", "[{\"N\": 1000}, {\"N\": 4000}]");
		long launches = fake_stats.candidate_launches;

		set_json(sol_step(req), "block", "[\"N / 2\", 1, 1]");
		res = run(req);
		expect_verdict(res, "failed", "VALIDATION_ERROR", "solution.launch[0].block[0]: "
		    "2000 threads in x; the device allows at most 1024 (size set "
		    "problem.sizes[1]: N=4000)");
		assert_int_equal(fake_stats.candidate_launches, launches);
		json_decref(res);
	}
}

static void
test_eval_missing_kernel(void **state)
{
	json_t *res = run(request("nope", 100));

	expect_verdict(res, "failed", "VALIDATION_ERROR",
	    "solution.launch[0].kernel: the compiled solution has no kernel 'nope'");
	assert_true(json_is_true(json_object_get(res, "compiled")));
	json_decref(res);
}

static void
test_eval_arg_count(void **state)
{
	json_t *req = request("vadd", 100), *res;

	set_json(sol_step(req), "args", "[\"x\", \"y\", \"out\"]");
	res = run(req);
	expect_verdict(res, "failed", "VALIDATION_ERROR",
	    "solution.launch[0].args: kernel 'vadd' takes 4 parameters; the plan passes 3");
	json_decref(res);
}

static void
test_eval_arg_size(void **state)
{
	json_t *req = request("vadd", 100), *res;

	set_json(sol_step(req), "args", "[\"x\", \"y\", \"out\", \"x\"]");
	res = run(req);
	expect_verdict(res, "failed", "VALIDATION_ERROR", "solution.launch[0].args[3]: kernel "
	    "'vadd''s parameter 3 is 4 bytes; a tensor (a device pointer) needs 8");
	json_decref(res);

	req = request("vadd", 100);
	set_json(sol_step(req), "args", "[\"x\", \"y\", \"out\", \"N*100000000\"]");
	res = run(req);
	expect_verdict(res, "failed", "VALIDATION_ERROR", "10000000000 does not fit");
	json_decref(res);

	req = request("vadd", 100);
	set_json(sol_step(req), "args", "[\"x\", \"y\", \"out\", {\"f64\": 1.0}]");
	res = run(req);
	expect_verdict(res, "failed", "VALIDATION_ERROR", "an f64 literal needs 8");
	json_decref(res);
}

static void
test_eval_limits(void **state)
{
	json_t *req = request("vadd", 100), *res;

	set_json(sol_step(req), "block", "[2048, 1, 1]");
	res = run(req);
	expect_verdict(res, "failed", "VALIDATION_ERROR",
	    "solution.launch[0].block[0]: 2048 threads in x; the device allows at most 1024");
	json_decref(res);

	req = request("vadd_regs", 100);
	set_json(sol_step(req), "block", "[512, 1, 1]");
	res = run(req);
	expect_verdict(res, "failed", "VALIDATION_ERROR", "kernel 'vadd_regs' can run at most 256");
	json_decref(res);

	req = request("vadd_static", 100);
	set_json(sol_step(req), "shared_bytes", "200000");
	res = run(req);
	expect_verdict(res, "failed", "VALIDATION_ERROR", "would need 240000 bytes of shared "
	    "memory per block (40000 static + 200000 dynamic); the device allows at most 232448");
	json_decref(res);

	/* Within the opt-in limit: accepted. */
	req = request("vadd", 100);
	set_json(sol_step(req), "shared_bytes", "100000");
	json_object_set_new(json_object_get(req, "settings"), "run_performance", json_false());
	res = run(req);
	assert_true(json_is_true(json_object_get(res, "correctness")));
	assert_null(json_object_get(res, "timing"));
	assert_true(json_real_value(json_object_get(res, "kernel_runtime")) == -1.0);
	json_decref(res);
}

static void
test_eval_literals_and_int64(void **state)
{
	json_t *req = request("scale64", 300), *res;

	set_json(json_array_get(json_object_get(json_object_get(json_object_get(req, "problem"),
	    "reference"), "launch"), 0), "args", "[\"x\", \"out\", {\"f32\": 2.5}, \"N\"]");
	set_json(json_array_get(json_object_get(json_object_get(json_object_get(req, "problem"),
	    "reference"), "launch"), 0), "kernel", "\"scale64\"");
	set_json(sol_step(req), "args", "[\"x\", \"out\", {\"f32\": 2.5}, \"N\"]");
	res = run(req);
	if (!json_is_true(json_object_get(res, "correctness")))
		fail_msg("%s", json_dumps(res, JSON_INDENT(1)));
	/* Both take 0.02 ms. */
	assert_true(fabs(json_real_value(json_object_get(res, "speedup")) - 1.0) < 0.02);
	json_decref(res);

	req = request("scale64", 300);
	set_json(sol_step(req), "args", "[\"x\", \"out\", {\"f32\": 2.5}, \"N\"]");
	res = run(req);	/* the reference adds, the solution scales */
	expect_verdict(res, "completed", "CORRECTNESS_ERROR", "output 'out' is wrong at index 0");
	json_decref(res);
}

static void
test_eval_cached_reference(void **state)
{
	json_t *req = request("vadd", 500), *res, *ref;

	set_json(req, "reference_timing", "{\"median_ms\": 0.2, \"trials\": 50}");
	res = run(req);
	assert_true(json_is_true(json_object_get(res, "correctness")));
	ref = json_object_get(json_object_get(res, "timing"), "reference");
	assert_true(json_is_true(json_object_get(ref, "cached")));
	assert_int_equal(json_integer_value(json_object_get(ref, "trials")), 50);
	assert_true(fabs(json_real_value(json_object_get(res, "speedup")) - 4.0) < 0.04);
	json_decref(res);
}

static void
test_eval_broken_cubin(void **state)
{
	json_t *req = request("vadd", 100), *res;
	char *b64 = compile_b64_encode("BROKEN cubin", 12);

	json_object_set_new(req, "solution_cubin_b64", json_string(b64));
	free(b64);
	res = run(req);
	expect_verdict(res, "failed", "COMPILATION_ERROR", "the compiled solution does not load");
	assert_false(json_is_true(json_object_get(res, "compiled")));
	json_decref(res);
}

static void
test_eval_bad_requests(void **state)
{
	json_t *req = request("vadd", 100), *res = NULL;
	char *cause = NULL;

	json_object_set_new(req, "seed", json_string("12x"));
	assert_int_equal(evaluate_job(req, &res, &cause), -EINVAL);
	assert_non_null(strstr(cause, "seed"));
	free(cause);
	cause = NULL;
	json_object_set_new(req, "seed", json_string("5"));
	json_object_set_new(json_object_get(req, "settings"), "warmup", json_string("3"));
	assert_int_equal(evaluate_job(req, &res, &cause), -EINVAL);
	assert_non_null(strstr(cause, "settings.warmup"));
	free(cause);
	json_decref(req);

	/* A payload error is a verdict, not a job error. */
	req = request("vadd", 100);
	set_json(sol_step(req), "args", "[\"x\", \"y\", \"nope\", \"N\"]");
	res = run(req);
	expect_verdict(res, "failed", "VALIDATION_ERROR", "solution.launch[0].args[2]");
	json_decref(res);
}

/* kernel_simple: int32 in, bool out, expected values given. */
static json_t *
simple_request(const char *cases)
{
	char *b64 = compile_b64_encode("fake cubin", 10);
	json_t *r;

	r = json_pack("{s:s, s:s, s:{s:{s:i}, s:[{s:s, s:s, s:[s]}], s:[{s:s, s:s, s:[s]}]},"
	    " s:{s:s, s:[{s:s, s:[i], s:[i], s:[s,s,s]}]}, s:s, s:s}",
	    "op", "evaluate", "mode", "kernel_simple",
	    "problem", "sizes", "N", 3, "inputs", "name", "x", "dtype", "int32", "shape", "N",
	    "outputs", "name", "out", "dtype", "bool", "shape", "N",
	    "solution", "source", "sol", "launch", "kernel", "positive", "grid", 1, "block", 32,
	    "args", "x", "out", "N", "solution_cubin_b64", b64, "seed", "99");
	free(b64);
	assert_non_null(r);
	set_json(r, "test_cases", cases);
	return r;
}

static void
test_eval_test_cases(void **state)
{
	json_t *res;

	res = run(simple_request("[{\"inputs\": {\"x\": [-1, 0, 5]}, \"outputs\": {\"out\": [0, 0, 1]}},"
	    " {\"inputs\": {\"x\": [7, -7, 1]}, \"outputs\": {\"out\": [1, 0, 1]}}]"));
	if (!json_is_true(json_object_get(res, "correctness")))
		fail_msg("%s", json_dumps(res, JSON_INDENT(1)));
	assert_int_equal(json_array_size(json_object_get(res, "correctness_trials")), 2);
	assert_int_equal(json_integer_value(json_object_get(json_array_get(json_object_get(res,
	    "correctness_trials"), 1), "test_case")), 1);
	assert_null(json_object_get(res, "timing"));
	json_decref(res);

	res = run(simple_request("[{\"inputs\": {\"x\": [-1, 0, 5]}, \"outputs\": {\"out\": [0, 0, 1]}},"
	    " {\"inputs\": {\"x\": [7, -7, 1]}, \"outputs\": {\"out\": [1, 1, 1]}}]"));
	expect_verdict(res, "completed", "CORRECTNESS_ERROR", "wrong at index 1: expected 1, got 0");
	assert_non_null(strstr(str(res, "error_message"), "test case 2 of 2"));
	json_decref(res);

	res = run(simple_request("[{\"inputs\": {\"x\": [-1, 0]}, \"outputs\": {\"out\": [0, 0, 1]}}]"));
	expect_verdict(res, "failed", "VALIDATION_ERROR",
	    "test_cases[0].inputs.x: expected an array of 3 numbers");
	json_decref(res);

	res = run(simple_request("[{\"inputs\": {\"x\": [-1, 0, 1.5]}, \"outputs\": {\"out\": [0, 0, 1]}}]"));
	expect_verdict(res, "failed", "VALIDATION_ERROR", "test_cases[0].inputs.x[2]: not a int32");
	json_decref(res);

	res = run(simple_request("[{\"inputs\": {\"x\": [1, 2, 3], \"z\": [1]}, "
	    "\"outputs\": {\"out\": [1, 1, 1]}}]"));
	expect_verdict(res, "failed", "VALIDATION_ERROR", "names a tensor the problem does not have");
	json_decref(res);
}

static void
test_eval_simple_timing(void **state)
{
	json_t *req, *res, *t;

	/* Test cases: the candidate alone, its timed calls unchecked. */
	req = simple_request("[{\"inputs\": {\"x\": [-1, 0, 5]}, \"outputs\": {\"out\": [0, 0, 1]}}]");
	set_json(req, "settings", "{\"run_performance\": true, \"max_timing_trials\": 3}");
	res = run(req);
	if (!json_is_true(json_object_get(res, "correctness")))
		fail_msg("%s", json_dumps(res, JSON_INDENT(1)));
	t = json_object_get(res, "timing");
	assert_null(json_object_get(t, "reference"));
	/* 3 is below the floor of 10: raised, not refused. */
	assert_int_equal(json_integer_value(json_object_get(json_object_get(t, "kernel"),
	    "trials")), 10);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(t, "kernel"),
	    "checked_calls")), 0);
	assert_true(fabs(json_real_value(json_object_get(res, "kernel_runtime")) - 0.01) < 0.001);
	json_decref(res);

	/* With a reference: checked against untimed reference calls. */
	req = request("vadd", 200);
	json_object_set_new(req, "mode", json_string("kernel_simple"));
	json_object_set_new(json_object_get(req, "settings"), "run_performance", json_true());
	res = run(req);
	assert_true(json_is_true(json_object_get(res, "correctness")));
	t = json_object_get(res, "timing");
	assert_null(json_object_get(t, "reference"));
	assert_true(json_integer_value(json_object_get(json_object_get(t, "kernel"),
	    "checked_calls")) >= 1);
	json_decref(res);
}

/*
 * A plan shorter than the events' own cost (0.002 ms against 0.003): the
 * sample keeps half the events' time (0.0025), not the 0.002 a plain
 * subtraction gives -- an error in the calibration of a few microseconds
 * cannot make a short kernel look free (timing_sample).
 */
static void
test_eval_short_plan_keeps_half(void **state)
{
	json_t *res = run(request("vadd_quick", 200));

	if (!json_is_true(json_object_get(res, "correctness")))
		fail_msg("%s", json_dumps(res, JSON_INDENT(1)));
	assert_true(fabs(json_real_value(json_object_get(res, "kernel_runtime")) - 0.0025) < 0.0001);
	json_decref(res);
}

static void
test_eval_simple_size_sets(void **state)
{
	json_t *req, *res, *t;

	/* Test cases are checked against the first size set's shapes, and run on it. */
	req = simple_request("[{\"inputs\": {\"x\": [-1, 0, 5]}, \"outputs\": {\"out\": [0, 0, 1]}}]");
	set_json(json_object_get(req, "problem"), "sizes", "[{\"N\": 3}, {\"N\": 5}]");
	res = run(req);
	if (!json_is_true(json_object_get(res, "correctness")))
		fail_msg("%s", json_dumps(res, JSON_INDENT(1)));
	assert_int_equal(json_array_size(json_object_get(res, "correctness_trials")), 1);
	t = json_array_get(json_object_get(res, "correctness_trials"), 0);
	assert_int_equal(json_integer_value(json_object_get(t, "size_set")), 0);
	json_decref(res);
}

/* kernel_simple with a reference and a visible test case of vadd (N = 3). */
static json_t *
simple_ref_request(const char *kernel)
{
	json_t *req = request(kernel, 3);

	json_object_set_new(req, "mode", json_string("kernel_simple"));
	set_json(req, "test_cases", "[{\"inputs\": {\"x\": [1, 2, 3], \"y\": [10, 20, 30]}, "
	    "\"outputs\": {\"out\": [11, 22, 33]}}]");
	json_object_set_new(json_object_get(req, "settings"), "run_performance", json_false());
	return req;
}

static void
test_eval_simple_hidden_trials(void **state)
{
	json_t *res, *trials, *meta;
	size_t i;

	/* An honest candidate: the visible case, then 5 hidden random trials. */
	res = run(simple_ref_request("vadd"));
	if (!json_is_true(json_object_get(res, "correctness")))
		fail_msg("%s", json_dumps(res, JSON_INDENT(1)));
	meta = json_object_get(res, "metadata");
	assert_int_equal(json_integer_value(json_object_get(meta, "test_cases")), 1);
	assert_int_equal(json_integer_value(json_object_get(meta, "hidden_trials")), 5);
	assert_string_equal(str(meta, "correctness_trials"), "(6 / 6)");
	trials = json_object_get(res, "correctness_trials");
	assert_int_equal(json_array_size(trials), 6);
	assert_int_equal(json_integer_value(json_object_get(json_array_get(trials, 0),
	    "test_case")), 0);
	for (i = 1; i < 6; i++)
		assert_true(json_is_true(json_object_get(json_array_get(trials, i), "hidden")));
	json_decref(res);

	/* A lookup table of the visible case's outputs: passes it, fails hidden. */
	res = run(simple_ref_request("vadd_table"));
	expect_verdict(res, "completed", "CORRECTNESS_ERROR", "hidden trial 1 of 5");
	trials = json_object_get(res, "correctness_trials");
	assert_true(json_is_true(json_object_get(json_array_get(trials, 0), "passed")));
	json_decref(res);

	/* num_correct_trials raises them; below 5 is not offered. */
	res = simple_ref_request("vadd");
	json_object_set_new(json_object_get(res, "settings"), "num_correct_trials",
	    json_integer(7));
	res = run(res);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(res, "metadata"),
	    "hidden_trials")), 7);
	json_decref(res);
	res = simple_ref_request("vadd");
	json_object_set_new(json_object_get(res, "settings"), "num_correct_trials",
	    json_integer(1));
	res = run(res);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(res, "metadata"),
	    "hidden_trials")), 5);
	json_decref(res);

	/* Test cases alone: the result says that nothing hidden was run. */
	res = run(simple_request("[{\"inputs\": {\"x\": [-1, 0, 5]}, \"outputs\": {\"out\": "
	    "[0, 0, 1]}}]"));
	assert_true(json_is_true(json_object_get(res, "correctness")));
	meta = json_object_get(res, "metadata");
	assert_int_equal(json_integer_value(json_object_get(meta, "hidden_trials")), 0);
	assert_int_equal(json_integer_value(json_object_get(meta, "test_cases")), 1);
	json_decref(res);
}

static void
test_eval_simple_needs_reference(void **state)
{
	json_t *req = simple_request("[]"), *res;

	json_object_del(req, "test_cases");
	res = run(req);
	expect_verdict(res, "failed", "VALIDATION_ERROR", "kernel_simple needs a reference kernel "
	    "or test_cases");
	json_decref(res);
}

/* ---------------------------------------------- cubins by cache key */

/* A cache entry as compile.c writes one: the cubin, then its SHA-256. */
static void
write_cache_entry(const char *dir, const char *key, const char *cubin, size_t len)
{
	unsigned char md[32];
	unsigned int mdlen = 0;
	char path[512];
	FILE *f;

	assert_int_equal(EVP_Digest(cubin, len, md, &mdlen, EVP_sha256(), NULL), 1);
	snprintf(path, sizeof path, "%s/%s.cubin", dir, key);
	assert_non_null(f = fopen(path, "wb"));
	assert_int_equal(fwrite(cubin, 1, len, f), len);
	assert_int_equal(fwrite(md, 1, sizeof md, f), sizeof md);
	assert_int_equal(fclose(f), 0);
}

static json_t *
request_by_key(const char *dir, const char *key)
{
	json_t *req = request("vadd", 1000);

	json_object_del(req, "reference_cubin_b64");
	json_object_del(req, "solution_cubin_b64");
	json_object_set_new(req, "cache_dir", json_string(dir));
	json_object_set_new(req, "reference_cubin_key", json_string(key));
	json_object_set_new(req, "solution_cubin_key", json_string(key));
	return req;
}

/*
 * The compile job's cubins come by their key in the shared compile cache,
 * which the evaluate worker reads itself; a key whose file is gone is a
 * SYSTEM_ERROR verdict naming which (the workflow forgets a reference key
 * it kept), a key that is no key an error of the request.
 */
static void
test_eval_cubin_by_key(void **state)
{
	static const char cubin[] = "\177ELF fake cubin";
	static const char key[] =
	    "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
	char dir[] = "/tmp/kgym-test-cache-XXXXXX", path[512], *cause = NULL;
	json_t *res, *req;

	(void)state;
	assert_non_null(mkdtemp(dir));
	write_cache_entry(dir, key, cubin, sizeof cubin - 1);
	res = run(request_by_key(dir, key));
	if (!json_is_true(json_object_get(res, "correctness")))
		fail_msg("%s", json_dumps(res, JSON_INDENT(1)));
	json_decref(res);

	snprintf(path, sizeof path, "%s/%s.cubin", dir, key);
	assert_int_equal(unlink(path), 0);
	res = run(request_by_key(dir, key));
	assert_string_equal(str(res, "status"), "failed");
	assert_string_equal(str(res, "error_code"), "SYSTEM_ERROR");
	assert_string_equal(json_string_value(json_object_get(json_object_get(res, "metadata"),
	    "cubin_missing")), "reference");
	json_decref(res);

	/* A damaged entry (its digest does not match) is a missing one. */
	write_cache_entry(dir, key, cubin, sizeof cubin - 1);
	assert_non_null(req = request_by_key(dir, key));
	{
		FILE *f = fopen(path, "r+b");

		assert_non_null(f);
		assert_int_equal(fseek(f, 5, SEEK_SET), 0);
		assert_int_equal(fputc('X', f), 'X');
		assert_int_equal(fclose(f), 0);
	}
	res = run(req);
	assert_string_equal(str(res, "error_code"), "SYSTEM_ERROR");
	json_decref(res);
	unlink(path);

	req = request_by_key(dir, "../../etc/passwd");
	assert_int_equal(evaluate_job(req, &res, &cause), -EINVAL);
	assert_non_null(strstr(cause, "not a cache key"));
	free(cause);
	json_decref(req);
	rmdir(dir);
}

/* The worker parses the payload under the limits the workflow accepted it
 * with (request.limits), not spec.h's defaults. */
static void
test_eval_limits_handed_on(void **state)
{
	json_t *req, *res;
	char *cause = NULL;

	(void)state;
	req = request("vadd", 1000);
	json_object_set_new(req, "limits", json_pack("{s:i}", "max_source_bytes", 2));
	res = run(req);
	assert_string_equal(str(res, "error_code"), "VALIDATION_ERROR");
	if (strstr(str(res, "error_message"), "source") == NULL)
		fail_msg("%s", str(res, "error_message"));
	json_decref(res);

	req = request("vadd", 1000);
	json_object_set_new(req, "limits", json_pack("{s:i}", "max_source_bytes", 100000));
	res = run(req);
	assert_true(json_is_true(json_object_get(res, "correctness")));
	json_decref(res);

	req = request("vadd", 1000);
	json_object_set_new(req, "limits", json_pack("{s:s}", "max_tensor_bytes", "big"));
	assert_int_equal(evaluate_job(req, &res, &cause), -EINVAL);
	assert_non_null(strstr(cause, "limits.max_tensor_bytes"));
	free(cause);
	json_decref(req);
}

int
main(void)
{
	const struct CMUnitTest host_tests[] = {
		cmocka_unit_test(test_half_roundtrip),
		cmocka_unit_test(test_half_rounding),
		cmocka_unit_test(test_bf16),
		cmocka_unit_test(test_value_put),
		cmocka_unit_test(test_seeds),
		cmocka_unit_test(test_stats_small),
		cmocka_unit_test(test_stats_ci),
		cmocka_unit_test(test_stats_json),
		cmocka_unit_test(test_helpers_compile),
		cmocka_unit_test(test_prepare_needs_compare),
	};
	const struct CMUnitTest eval_tests[] = {
		cmocka_unit_test(test_profile_needs_cupti),
		cmocka_unit_test(test_eval_correct),
		cmocka_unit_test(test_eval_wrong_element),
		cmocka_unit_test(test_eval_half_written),
		cmocka_unit_test(test_eval_mutates_input),
		cmocka_unit_test(test_eval_crash),
		cmocka_unit_test(test_eval_overrun),
		cmocka_unit_test(test_eval_cheats_when_timed),
		cmocka_unit_test(test_eval_no_lock_refuses),
		cmocka_unit_test(test_eval_mutates_input_late),
		cmocka_unit_test(test_eval_wrong_once_caught),
		cmocka_unit_test(test_eval_replay_caught),
		cmocka_unit_test(test_eval_timed_calls_alike),
		cmocka_unit_test(test_eval_timed_call_host_cost),
		cmocka_unit_test(test_eval_sneaky_always_checked),
		cmocka_unit_test(test_eval_state_reset),
		cmocka_unit_test(test_eval_size_sets),
		cmocka_unit_test(test_eval_hardcoded_size),
		cmocka_unit_test(test_eval_size_set_guards),
		cmocka_unit_test(test_eval_missing_kernel),
		cmocka_unit_test(test_eval_arg_count),
		cmocka_unit_test(test_eval_arg_size),
		cmocka_unit_test(test_eval_limits),
		cmocka_unit_test(test_eval_literals_and_int64),
		cmocka_unit_test(test_eval_cached_reference),
		cmocka_unit_test(test_eval_broken_cubin),
		cmocka_unit_test(test_eval_bad_requests),
		cmocka_unit_test(test_eval_test_cases),
		cmocka_unit_test(test_eval_simple_timing),
		cmocka_unit_test(test_eval_short_plan_keeps_half),
		cmocka_unit_test(test_eval_simple_size_sets),
		cmocka_unit_test(test_eval_simple_needs_reference),
		cmocka_unit_test(test_eval_simple_hidden_trials),
		cmocka_unit_test(test_eval_cubin_by_key),
		cmocka_unit_test(test_eval_limits_handed_on),
	};
	int failed;

	/* What prepare() would find through the worker's host->toolkit. */
	nvrtc_compare = &rules_api;
	failed = cmocka_run_group_tests_name("nvrtc host", host_tests, NULL, NULL);
	failed += cmocka_run_group_tests_name("nvrtc evaluate (fake driver)", eval_tests,
	    setup_device, teardown_device);
	return failed != 0;
}
