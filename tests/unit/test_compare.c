/*
 * test_compare.c -- unit tests of the compare toolkit's rules
 * (plugins/compare/rules.c, kgym/compare.h), on the host: tolerances, NaN
 * and Inf, integers exact, statistics accumulated over calls, elements
 * printed, the mismatch report word for word, and the default tolerances
 * against the native payload's (spec.c), which must not drift apart.
 *
 * The kernel half (kernel.c) is compiled with NVRTC by test_nvrtc_eval
 * (test_helpers_compile), and the fake driver runs this host rule in its
 * place, so the nvrtc backend's verdict tests go through it too.
 */
#include "config.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "rules.h"
#include "spec.h"

static const struct kgym_compare_api *cmp = &rules_api;

static double
bits_to_double(uint64_t bits)
{
	double d;

	memcpy(&d, &bits, sizeof d);
	return d;
}

static void
test_head(void **state)
{
	assert_int_equal(cmp->head.version, KGYM_COMPARE_VERSION);
	assert_int_equal(cmp->head.struct_size, sizeof(struct kgym_compare_api));
	assert_true(KGYM_TOOLKIT_HAS(cmp, default_tolerance));
	assert_int_equal(sizeof(struct kgym_compare_stats), 40);
}

static void
test_tolerance(void **state)
{
	float want[4] = { 1.0f, 100.0f, -2.0f, 0.0f };
	float got[4] = { 1.00005f, 100.02f, -2.0f, 2e-4f };
	struct kgym_compare_stats s = { 0 };

	/* atol 1e-4, rtol 1e-4: 1 +- 2e-4 and 100 +- 1.01e-2 pass; 0 +- 1e-4 does not. */
	cmp->compare(KGYM_DTYPE_FLOAT32, got, want, 4, 1e-4, 1e-4, &s);
	assert_int_equal(s.mismatches, 2);
	assert_int_equal(s.nonfinite, 0);
	assert_int_equal(~s.first_bad_inv, 1);
	assert_true(fabs(bits_to_double(s.max_abs_bits) - 0.02) < 1e-5);
	assert_true(fabs(bits_to_double(s.max_rel_bits) - 2e-4) < 1e-6);

	/* Looser: all pass, and the statistics are still there. */
	memset(&s, 0, sizeof s);
	cmp->compare(KGYM_DTYPE_FLOAT32, got, want, 4, 1e-3, 1e-3, &s);
	assert_int_equal(s.mismatches, 0);
	assert_int_equal(s.first_bad_inv, 0);
	assert_true(bits_to_double(s.max_abs_bits) > 0.019);
}

static void
test_nan_inf(void **state)
{
	double want[7] = { NAN, NAN, INFINITY, INFINITY, 1.0, 1.0, -INFINITY };
	double got[7] = { NAN, 1.0, INFINITY, -INFINITY, NAN, INFINITY, -INFINITY };
	struct kgym_compare_stats s = { 0 };

	cmp->compare(KGYM_DTYPE_FLOAT64, got, want, 7, 1e9, 1e9, &s);
	/* NaN needs NaN, Inf the same Inf; NaN/Inf for a finite value fails. */
	assert_int_equal(s.mismatches, 4);
	assert_int_equal(s.nonfinite, 2);
	assert_int_equal(~s.first_bad_inv, 1);
	/* Non-finite elements do not enter the error statistics. */
	assert_true(bits_to_double(s.max_abs_bits) == 0.0);
}

static void
test_integers_exact(void **state)
{
	int32_t wi[3] = { 5, -7, 1 << 30 }, gi[3] = { 5, -6, 1 << 30 };
	uint8_t wb[3] = { 1, 0, 1 }, gb[3] = { 1, 0, 2 };
	int64_t wl[1] = { INT64_C(9007199254740993) }, gl[1] = { INT64_C(9007199254740992) };
	struct kgym_compare_stats s = { 0 };

	/* No tolerance saves an integer. */
	cmp->compare(KGYM_DTYPE_INT32, gi, wi, 3, 10.0, 10.0, &s);
	assert_int_equal(s.mismatches, 1);
	assert_true(bits_to_double(s.max_abs_bits) == 1.0);
	memset(&s, 0, sizeof s);
	/* bool: the byte as it is, 2 is not true. */
	cmp->compare(KGYM_DTYPE_BOOL, gb, wb, 3, 0, 0, &s);
	assert_int_equal(s.mismatches, 1);
	assert_int_equal(~s.first_bad_inv, 2);
	memset(&s, 0, sizeof s);
	/* int64 past 2^53: told apart although equal as doubles. */
	cmp->compare(KGYM_DTYPE_INT64, gl, wl, 1, 0, 0, &s);
	assert_int_equal(s.mismatches, 1);
}

static void
test_half_bf16(void **state)
{
	uint16_t h[3] = { 0x3800, 0x7c00, 0x0001 }, bf[2] = { 0x3f80, 0x7fc0 };
	uint16_t gh[3] = { 0x3800, 0x7c00, 0x0000 };
	struct kgym_compare_stats s = { 0 };

	assert_true(cmp->value(KGYM_DTYPE_FLOAT16, &h[0]) == 0.5);
	assert_true(isinf(cmp->value(KGYM_DTYPE_FLOAT16, &h[1])));
	assert_true(cmp->value(KGYM_DTYPE_FLOAT16, &h[2]) == ldexp(1.0, -24));
	assert_true(cmp->value(KGYM_DTYPE_BFLOAT16, &bf[0]) == 1.0);
	assert_true(isnan(cmp->value(KGYM_DTYPE_BFLOAT16, &bf[1])));
	cmp->compare(KGYM_DTYPE_FLOAT16, gh, h, 3, 0, 0, &s);
	assert_int_equal(s.mismatches, 1);
	assert_int_equal(~s.first_bad_inv, 2);
}

/* Chunks of one tensor compared in turn add up; the first bad is the smallest. */
static void
test_accumulates(void **state)
{
	float want[2] = { 1.0f, 2.0f }, got_a[2] = { 1.0f, 9.0f }, got_b[2] = { 0.0f, 2.0f };
	struct kgym_compare_stats s = { 0 };

	cmp->compare(KGYM_DTYPE_FLOAT32, got_a, want, 2, 0, 0, &s);
	assert_int_equal(~s.first_bad_inv, 1);
	cmp->compare(KGYM_DTYPE_FLOAT32, got_b, want, 2, 0, 0, &s);
	assert_int_equal(s.mismatches, 2);
	assert_int_equal(~s.first_bad_inv, 0);
	assert_true(bits_to_double(s.max_abs_bits) == 7.0);
	assert_true(bits_to_double(s.max_rel_bits) == 3.5);
}

static void
test_format_value(void **state)
{
	float f = 0.1f;
	double d = 0.1;
	int64_t l = -5;
	uint8_t b = 1;
	uint16_t h = 0x7e00;
	char s[64];

	cmp->format_value(KGYM_DTYPE_FLOAT32, &f, s, sizeof s);
	assert_string_equal(s, "0.100000001");
	cmp->format_value(KGYM_DTYPE_FLOAT64, &d, s, sizeof s);
	assert_string_equal(s, "0.10000000000000001");
	cmp->format_value(KGYM_DTYPE_INT64, &l, s, sizeof s);
	assert_string_equal(s, "-5");
	cmp->format_value(KGYM_DTYPE_BOOL, &b, s, sizeof s);
	assert_string_equal(s, "1");
	cmp->format_value(KGYM_DTYPE_FLOAT16, &h, s, sizeof s);
	assert_string_equal(s, "nan");
}

/* The words a model reads: kept byte for byte from the nvrtc backend's. */
static void
test_report(void **state)
{
	const int64_t dims[3] = { 2, 3, 4 };
	struct kgym_compare_report r = {
		.struct_size = sizeof r,
		.output = "out",
		.index = 23,
		.dims = dims,
		.ndim = 3,
		.numel = 24,
		.expected = "1.5",
		.got = "nan",
		.never_written = 1,
		.mismatches = 2,
		.atol = 1e-4,
		.rtol = 1e-4,
		.max_abs = 0.5,
		.max_rel = 0.25,
	};
	char buf[1024];

	cmp->report(&r, buf, sizeof buf);
	assert_string_equal(buf, "output 'out' is wrong at index 23 [1, 2, 3]: expected 1.5, "
	    "got nan (never written: the poison kgymd put there before the call); 2 of 24 "
	    "elements differ (atol 0.0001, rtol 0.0001; max abs error 0.5, max rel error "
	    "0.25)");

	/* One dimension: no coordinates; an input changed as well. */
	r.ndim = 1;
	r.index = 3;
	r.never_written = 0;
	r.changed_input = "x";
	cmp->report(&r, buf, sizeof buf);
	assert_string_equal(buf, "output 'out' is wrong at index 3: expected 1.5, got nan; "
	    "2 of 24 elements differ (atol 0.0001, rtol 0.0001; max abs error 0.5, max rel "
	    "error 0.25); an input was changed too");

	/* Only the input: the report is about it alone. */
	r.mismatches = 0;
	cmp->report(&r, buf, sizeof buf);
	assert_string_equal(buf, "input 'x' was changed by the solution; inputs must be left "
	    "as they are");

	/* Cut to the buffer, always terminated; a report it cannot read is said so. */
	cmp->report(&r, buf, 6);
	assert_string_equal(buf, "input");
	r.struct_size = 4;
	cmp->report(&r, buf, sizeof buf);
	assert_non_null(strstr(buf, "cannot read"));
}

/* One rule for defaults: the toolkit's and the payload parser's agree. */
static void
test_default_tolerance(void **state)
{
	double a1, r1, a2, r2;
	int dt;

	for (dt = 0; dt < SPEC_NDTYPES; dt++) {
		cmp->default_tolerance((enum kgym_dtype)dt, &a1, &r1);
		spec_default_tolerance((enum spec_dtype)dt, &a2, &r2);
		assert_true(a1 == a2 && r1 == r2);
	}
	cmp->default_tolerance(KGYM_DTYPE_FLOAT32, &a1, &r1);
	assert_true(a1 == 1e-4 && r1 == 1e-4);
}

static void
test_kernel_source(void **state)
{
	const char *src = cmp->kernel_source();

	assert_non_null(strstr(src, "extern \"C\" __global__ void " KGYM_COMPARE_KERNEL "("));
	/* Compiles wherever NVRTC does: no header. */
	assert_null(strstr(src, "#include"));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_head),
		cmocka_unit_test(test_tolerance),
		cmocka_unit_test(test_nan_inf),
		cmocka_unit_test(test_integers_exact),
		cmocka_unit_test(test_half_bf16),
		cmocka_unit_test(test_accumulates),
		cmocka_unit_test(test_format_value),
		cmocka_unit_test(test_report),
		cmocka_unit_test(test_default_tolerance),
		cmocka_unit_test(test_kernel_source),
	};

	return cmocka_run_group_tests_name("compare toolkit", tests, NULL, NULL);
}
