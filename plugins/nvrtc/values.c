/*
 * values.c -- tensor elements on the host, and the secret seeds.
 *
 * The nvrtc backend keeps tensor data on the GPU; the host sees elements
 * only where a person or a task does: kernel_simple's test cases (JSON
 * numbers to elements and back) and the detectors' samples (the "expected
 * 1.5, got nan" of a mismatch is the compare toolkit's).  Numbers become
 * half and bfloat16 here, in plain C, rounding to nearest even like the
 * GPU's cvt.rn; elements are read back by the compare toolkit's value(),
 * the one decoder the mismatch report uses too.  Seeds for trials,
 * inputs, poison and sampling all derive from the one secret seed of the
 * request through value_seed(), so a run is reproducible from that seed
 * and nothing else.
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "nvrtc_internal.h"

uint16_t
value_float_to_half(float f)
{
	uint32_t x, ax, e, m, rem, h;
	uint16_t sign;
	float a;

	memcpy(&x, &f, sizeof x);
	sign = (uint16_t)((x >> 16) & 0x8000u);
	ax = x & 0x7fffffffu;
	if (ax > 0x7f800000u)
		return sign | 0x7e00u;			/* NaN */
	if (ax >= 0x477ff000u)
		return sign | 0x7c00u;			/* >= 65520 rounds to inf */
	if (ax < 0x38800000u) {
		/* Below 2^-14: a multiple of 2^-24, rounded to nearest even
		 * (the default rounding mode); 1024 is the smallest normal. */
		memcpy(&a, &ax, sizeof a);
		return sign | (uint16_t)nearbyint((double)a * 16777216.0);
	}
	e = (ax >> 23) - 112;
	m = ax & 0x7fffffu;
	h = (e << 10) | (m >> 13);
	rem = m & 0x1fffu;
	if (rem > 0x1000u || (rem == 0x1000u && (h & 1u)))
		h++;					/* may carry into the exponent: right */
	return sign | (uint16_t)h;
}

uint16_t
value_float_to_bf16(float f)
{
	uint32_t x;

	memcpy(&x, &f, sizeof x);
	if ((x & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((x >> 16) | 0x40u);	/* NaN stays NaN */
	x += 0x7fffu + ((x >> 16) & 1u);
	return (uint16_t)(x >> 16);
}

/*
 * Through the compare toolkit (prepare() fails without it), so that a
 * detector's sample and the mismatch report read an element alike; our
 * dtype codes are its codes (helpers.c asserts it).
 */
double
value_get(enum spec_dtype dtype, const void *elem)
{
	return nvrtc_compare->value((enum kgym_dtype)dtype, elem);
}

/* The integer range of an integer dtype. */
static void
value_int_range(enum spec_dtype dtype, double *ret_lo, double *ret_hi)
{
	switch (dtype) {
	case SPEC_INT64:
		/* 2^63 itself is out: the comparison below is against doubles. */
		*ret_lo = -9223372036854775808.0;
		*ret_hi = 9223372036854774784.0;	/* the largest double < 2^63 */
		return;
	case SPEC_INT32:
		*ret_lo = INT32_MIN;
		*ret_hi = INT32_MAX;
		return;
	case SPEC_INT16:
		*ret_lo = INT16_MIN;
		*ret_hi = INT16_MAX;
		return;
	case SPEC_INT8:
		*ret_lo = INT8_MIN;
		*ret_hi = INT8_MAX;
		return;
	case SPEC_UINT8:
		*ret_lo = 0;
		*ret_hi = UINT8_MAX;
		return;
	default:
		*ret_lo = 0;
		*ret_hi = 1;
		return;
	}
}

int
value_put(enum spec_dtype dtype, double v, void *elem)
{
	double lo, hi;
	int64_t i;
	float f;
	uint16_t u16;
	int32_t i32;
	int16_t i16;
	int8_t i8;
	uint8_t u8;

	switch (dtype) {
	case SPEC_FLOAT64:
		memcpy(elem, &v, sizeof v);
		return 0;
	case SPEC_FLOAT32:
		f = (float)v;
		memcpy(elem, &f, sizeof f);
		return 0;
	case SPEC_FLOAT16:
	case SPEC_BFLOAT16:
		/* Through float: double rounding is a risk only for values
		 * that sit exactly between two floats, none of which a test
		 * case written in decimal is likely to hit. */
		u16 = dtype == SPEC_FLOAT16 ? value_float_to_half((float)v) :
		    value_float_to_bf16((float)v);
		memcpy(elem, &u16, sizeof u16);
		return 0;
	default:
		break;
	}
	if (!isfinite(v) || v != trunc(v))
		return -EINVAL;
	value_int_range(dtype, &lo, &hi);
	if (v < lo || v > hi)
		return -ERANGE;
	i = (int64_t)v;
	switch (dtype) {
	case SPEC_INT64:
		memcpy(elem, &i, sizeof i);
		break;
	case SPEC_INT32:
		i32 = (int32_t)i;
		memcpy(elem, &i32, sizeof i32);
		break;
	case SPEC_INT16:
		i16 = (int16_t)i;
		memcpy(elem, &i16, sizeof i16);
		break;
	case SPEC_INT8:
		i8 = (int8_t)i;
		memcpy(elem, &i8, sizeof i8);
		break;
	default:
		u8 = (uint8_t)i;
		memcpy(elem, &u8, sizeof u8);
		break;
	}
	return 0;
}

uint64_t
value_mix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

uint64_t
value_seed(uint64_t seed, uint32_t tag, uint64_t index)
{
	/* Two rounds: the tag and the index cannot cancel each other. */
	return value_mix64(value_mix64(seed ^ ((uint64_t)tag << 56) ^ UINT64_C(0x6b67796d64736565)) +
	    (index + 1) * UINT64_C(0x9e3779b97f4a7c15));
}
