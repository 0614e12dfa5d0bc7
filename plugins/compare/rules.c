/*
 * rules.c -- the compare toolkit's host half: the output rule on host
 * memory, elements as numbers and text, and the mismatch report.
 *
 * The rule is written twice, here and in kernel.c (which runs it on the
 * GPU), and the two must agree element for element, statistics included:
 * a backend may judge on the device and print on the host, and a task
 * judged on the host (a simulation's frame) must pass or fail as it would
 * on the device.  tests/unit/test_compare.c holds them to it through the
 * fake driver, which runs this file's compare() for the kernel.
 *
 * half and bfloat16 are widened here in plain C; every half and bfloat16
 * value is exact as a float, so no rounding is involved.
 */
#include "config.h"

#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "rules.h"

/* Bytes of one element. */
static size_t
rules_dtype_size(enum kgym_dtype dtype)
{
	switch (dtype) {
	case KGYM_DTYPE_FLOAT64:
	case KGYM_DTYPE_INT64:
		return 8;
	case KGYM_DTYPE_FLOAT32:
	case KGYM_DTYPE_INT32:
		return 4;
	case KGYM_DTYPE_FLOAT16:
	case KGYM_DTYPE_BFLOAT16:
	case KGYM_DTYPE_INT16:
		return 2;
	case KGYM_DTYPE_INT8:
	case KGYM_DTYPE_UINT8:
	case KGYM_DTYPE_BOOL:
		return 1;
	}
	return 1;
}

static bool
rules_dtype_is_float(enum kgym_dtype dtype)
{
	return dtype <= KGYM_DTYPE_BFLOAT16;
}

static float
rules_half_to_float(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
	uint32_t bits;
	float f;

	if (exp == 0x1f) {
		bits = sign | 0x7f800000u | (man << 13);
	} else if (exp == 0) {
		/* Zero or subnormal: man * 2^-24 is exact in a float. */
		f = ldexpf((float)man, -24);
		return sign != 0 ? -f : f;
	} else {
		bits = sign | ((exp + 112) << 23) | (man << 13);
	}
	memcpy(&f, &bits, sizeof f);
	return f;
}

static float
rules_bf16_to_float(uint16_t b)
{
	uint32_t bits = (uint32_t)b << 16;
	float f;

	memcpy(&f, &bits, sizeof f);
	return f;
}

static double
rules_value(enum kgym_dtype dtype, const void *elem)
{
	union {
		double f64;
		float f32;
		uint16_t u16;
		int64_t i64;
		int32_t i32;
		int16_t i16;
		int8_t i8;
		uint8_t u8;
	} u;

	memcpy(&u, elem, rules_dtype_size(dtype));
	switch (dtype) {
	case KGYM_DTYPE_FLOAT64:
		return u.f64;
	case KGYM_DTYPE_FLOAT32:
		return u.f32;
	case KGYM_DTYPE_FLOAT16:
		return rules_half_to_float(u.u16);
	case KGYM_DTYPE_BFLOAT16:
		return rules_bf16_to_float(u.u16);
	case KGYM_DTYPE_INT64:
		return (double)u.i64;
	case KGYM_DTYPE_INT32:
		return u.i32;
	case KGYM_DTYPE_INT16:
		return u.i16;
	case KGYM_DTYPE_INT8:
		return u.i8;
	case KGYM_DTYPE_UINT8:
	case KGYM_DTYPE_BOOL:
		return u.u8;
	}
	return NAN;
}

static void
rules_format_value(enum kgym_dtype dtype, const void *elem, char *buf, size_t len)
{
	int64_t i;

	if (dtype == KGYM_DTYPE_INT64) {
		/* Exact: a double would round above 2^53. */
		memcpy(&i, elem, sizeof i);
		snprintf(buf, len, "%lld", (long long)i);
	} else if (rules_dtype_is_float(dtype)) {
		/* %.9g: enough digits to tell float32 neighbours apart. */
		snprintf(buf, len, dtype == KGYM_DTYPE_FLOAT64 ? "%.17g" : "%.9g",
		    rules_value(dtype, elem));
	} else {
		snprintf(buf, len, "%.0f", rules_value(dtype, elem));
	}
}

/* A maximum kept as the bits of a non-negative double (kgym/compare.h). */
static void
rules_max_bits(uint64_t *bits, double v)
{
	uint64_t b;

	memcpy(&b, &v, sizeof b);
	if (b > *bits)
		*bits = b;
}

static void
rules_compare(enum kgym_dtype dtype, const void *got, const void *expected, uint64_t n,
    double atol, double rtol, struct kgym_compare_stats *acc)
{
	size_t es = rules_dtype_size(dtype);
	double mabs = 0.0, mrel = 0.0, g, e, d;
	const unsigned char *gp = got, *ep = expected;
	uint64_t i;
	bool ok;

	for (i = 0; i < n; i++) {
		g = rules_value(dtype, gp + i * es);
		e = rules_value(dtype, ep + i * es);
		if (!rules_dtype_is_float(dtype)) {
			/* The bytes, as the kernel compares the integers (bool as is). */
			ok = memcmp(gp + i * es, ep + i * es, es) == 0;
			d = fabs(g - e);
			mabs = fmax(mabs, d);
			if (e != 0)
				mrel = fmax(mrel, d / fabs(e));
		} else if (isnan(e)) {
			ok = isnan(g);
		} else if (isinf(e)) {
			ok = g == e;
		} else if (!isfinite(g)) {
			ok = false;
			acc->nonfinite++;
		} else {
			d = fabs(g - e);
			ok = d <= atol + rtol * fabs(e);
			mabs = fmax(mabs, d);
			if (e != 0.0)
				mrel = fmax(mrel, d / fabs(e));
		}
		if (!ok) {
			acc->mismatches++;
			if (~i > acc->first_bad_inv)
				acc->first_bad_inv = ~i;
		}
	}
	rules_max_bits(&acc->max_abs_bits, mabs);
	rules_max_bits(&acc->max_rel_bits, mrel);
}

static void
rules_report(const struct kgym_compare_report *r, char *buf, size_t len)
{
	char coords[256] = "";
	uint64_t idx[16], rest;
	size_t d, n = 0;

	if (len == 0)
		return;
	if (r->struct_size < sizeof *r) {
		snprintf(buf, len, "(a mismatch report the compare toolkit cannot read)");
		return;
	}
	if (r->mismatches == 0 && r->changed_input != NULL) {
		snprintf(buf, len, "input '%s' was changed by the solution; inputs must be left "
		    "as they are", r->changed_input);
		return;
	}
	if (r->ndim > 1 && r->ndim <= sizeof idx / sizeof idx[0] && r->dims != NULL) {
		/* Row-major coordinates, as the model thinks of the tensor. */
		rest = r->index;
		for (d = r->ndim; d-- > 0;) {
			idx[d] = r->dims[d] > 0 ? rest % (uint64_t)r->dims[d] : 0;
			rest = r->dims[d] > 0 ? rest / (uint64_t)r->dims[d] : 0;
		}
		n += (size_t)snprintf(coords, sizeof coords, " [");
		for (d = 0; d < r->ndim && n < sizeof coords; d++)
			n += (size_t)snprintf(coords + n, sizeof coords - n, "%s%" PRIu64,
			    d ? ", " : "", idx[d]);
		if (n < sizeof coords)
			snprintf(coords + n, sizeof coords - n, "]");
	}
	snprintf(buf, len, "output '%s' is wrong at index %" PRIu64 "%s: expected %s, got %s%s; "
	    "%" PRIu64 " of %" PRIu64 " elements differ (atol %g, rtol %g; max abs error %g, "
	    "max rel error %g)%s", r->output, r->index, coords, r->expected, r->got,
	    r->never_written ? " (never written: the poison kgymd put there before the call)" :
	    "", r->mismatches, r->numel, r->atol, r->rtol, r->max_abs, r->max_rel,
	    r->changed_input != NULL ? "; an input was changed too" : "");
}

static void
rules_default_tolerance(enum kgym_dtype dtype, double *ret_atol, double *ret_rtol)
{
	double t;

	switch (dtype) {
	case KGYM_DTYPE_FLOAT64:
		t = 1e-8;
		break;
	case KGYM_DTYPE_FLOAT32:
		t = 1e-4;
		break;
	case KGYM_DTYPE_FLOAT16:
	case KGYM_DTYPE_BFLOAT16:
		t = 1e-2;
		break;
	default:
		t = 0;
		break;
	}
	*ret_atol = t;
	*ret_rtol = t;
}

const struct kgym_compare_api rules_api = {
	.head = {
		.version = KGYM_COMPARE_VERSION,
		.struct_size = sizeof(struct kgym_compare_api),
	},
	.kernel_source = kernel_source,
	.compare = rules_compare,
	.value = rules_value,
	.format_value = rules_format_value,
	.report = rules_report,
	.default_tolerance = rules_default_tolerance,
};
