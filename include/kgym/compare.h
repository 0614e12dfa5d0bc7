/*
 * kgym/compare.h -- the "compare" toolkit API: is an output right, and how
 * is it told when it is not.
 *
 * The rules every backend's verdict rests on (kgymd-protocol(7), "Native
 * tasks"; kgym-plugin(3), TOOLKITS), in one place:
 *   - floating elements pass when |got - expected| <= atol + rtol * |expected|;
 *   - a NaN expected needs a NaN; an infinite expected needs the same
 *     infinity; NaN or Inf where the expected value is finite fails (and is
 *     counted as non-finite);
 *   - integer and bool elements must be equal;
 *   - default tolerances per dtype: float64 1e-8, float32 1e-4,
 *     float16/bfloat16 1e-2, integers exact.
 * The toolkit gives the rule twice, once to run on the GPU (the CUDA C text
 * of a kernel a backend compiles with NVRTC beside its own) and once on the
 * host (for data already in host memory: a simulation's or renderer's
 * frame, a test), with the same statistics; and it words a failed check
 * (the mismatch report a model reads to fix its code).
 *
 * Get it with host->toolkit(KGYM_COMPARE_API, KGYM_COMPARE_VERSION, &cause)
 * (kgym/toolkit.h).  Ownership: all arguments are borrowed; buffers are the
 * caller's.
 *
 * Versions: 1  kernel_source, compare, value, format_value, report,
 *              default_tolerance.
 */
#ifndef KGYM_COMPARE_H
#define KGYM_COMPARE_H

#include <stddef.h>
#include <stdint.h>

#include "kgym/toolkit.h"

#ifdef __cplusplus
extern "C" {
#endif

#define KGYM_COMPARE_API	"compare"
#define KGYM_COMPARE_VERSION	1
/* The kernel that kernel_source() defines. */
#define KGYM_COMPARE_KERNEL	"kg_compare"

/* Element types, as the native payload names them; the codes are the ABI. */
enum kgym_dtype {
	KGYM_DTYPE_FLOAT64 = 0,
	KGYM_DTYPE_FLOAT32 = 1,
	KGYM_DTYPE_FLOAT16 = 2,
	KGYM_DTYPE_BFLOAT16 = 3,
	KGYM_DTYPE_INT64 = 4,
	KGYM_DTYPE_INT32 = 5,
	KGYM_DTYPE_INT16 = 6,
	KGYM_DTYPE_INT8 = 7,
	KGYM_DTYPE_UINT8 = 8,
	KGYM_DTYPE_BOOL = 9,	/* one byte; compared as the byte it is */
};

/*
 * What comparisons found, accumulated: start from all zeroes.  The kernel
 * writes the same 40 bytes in device memory.  The maxima are kept as the
 * bits of non-negative doubles, which order like the integers (so the
 * device can use atomicMax); memcpy them into a double to read them.
 */
struct kgym_compare_stats {
	uint64_t mismatches;	/* elements that failed the rule */
	uint64_t nonfinite;	/* of which: NaN/Inf got where a finite value was expected */
	uint64_t first_bad_inv;	/* ~(the first failing index); 0: none failed */
	uint64_t max_abs_bits;	/* largest |got - expected| over comparable elements */
	uint64_t max_rel_bits;	/* largest |got - expected| / |expected|, expected != 0 */
};

/* A failed check, as report() words it.  Set struct_size to sizeof. */
struct kgym_compare_report {
	uint32_t struct_size;
	const char *output;		/* the output's name */
	uint64_t index;			/* its first bad element, flat (row-major) */
	const int64_t *dims;		/* its shape: ndim sizes (coordinates when ndim > 1) */
	size_t ndim;
	uint64_t numel;			/* its element count */
	const char *expected;		/* format_value() of the expected element */
	const char *got;		/* and of the element found there */
	int never_written;		/* got is the poison put there before the call */
	uint64_t mismatches;		/* elements that differ, over all outputs */
	double atol, rtol;		/* the output's tolerances */
	double max_abs, max_rel;	/* over all outputs */
	/*
	 * An input the call changed, or NULL.  With no mismatch the report is
	 * about that input alone; with one, it says so at the end.
	 */
	const char *changed_input;
};

struct kgym_compare_api {
	struct kgym_toolkit_api head;	/* KGYM_COMPARE_VERSION, sizeof */

	/*
	 * CUDA C source, with no #include, that defines
	 *   extern "C" __global__ void kg_compare(const void *got,
	 *       const void *expected, unsigned long long n, int dtype,
	 *       double atol, double rtol, struct kgym_compare_stats *acc);
	 * which adds the comparison of n elements of `dtype` to *acc (zeroed
	 * by the caller before the first launch).  Any grid; blockDim.x must
	 * be a multiple of 32 (warp shuffles).  Its other names start with
	 * kgc_, so it can be compiled in one program with a backend's own
	 * kernels.  Static.
	 */
	const char *(*kernel_source)(void);
	/* The same rule on the host, added to *acc. */
	void (*compare)(enum kgym_dtype dtype, const void *got, const void *expected,
	    uint64_t n, double atol, double rtol, struct kgym_compare_stats *acc);
	/* One element as a double (half and bfloat16 widened exactly). */
	double (*value)(enum kgym_dtype dtype, const void *elem);
	/* One element as text: enough digits to tell neighbours apart. */
	void (*format_value)(enum kgym_dtype dtype, const void *elem, char *buf, size_t len);
	/* The mismatch report, NUL-terminated and cut to len. */
	void (*report)(const struct kgym_compare_report *r, char *buf, size_t len);
	/* The default tolerances of a dtype (0, 0 for integers: exact). */
	void (*default_tolerance)(enum kgym_dtype dtype, double *ret_atol, double *ret_rtol);
};

#ifdef __cplusplus
}
#endif

#endif /* KGYM_COMPARE_H */
