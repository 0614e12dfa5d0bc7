/*
 * fake_cuda.c -- a CUDA driver made of host memory, for the nvrtc backend's
 * unit tests on machines without a GPU (test_nvrtc_eval.c).
 *
 * It defines the driver functions the backend resolves with dlsym (the
 * test executable is linked with -rdynamic and hands dlopen(NULL) to
 * device_attach()).  "Device" pointers are host pointers; the virtual
 * memory calls are mmap/mprotect, so the guard after a tensor is a real
 * PROT_NONE page.  Kernels are C functions looked up by name: the trusted
 * helpers (ports of helpers.c's CUDA, same arithmetic; kg_compare is the
 * compare toolkit's own host rule, rules.c) and a few
 * candidates that are right, wrong, partial, mutating, crashing or
 * cheating (one hard-codes the problem size).  Time is simulated: each
 * candidate launch advances a clock by its cost with 0.2% noise, so timing
 * statistics converge predictably.
 * Everything runs synchronously on the calling thread.
 */
#include "config.h"

#include <sys/mman.h>

#include <math.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvrtc_internal.h"
#include "fake_cuda.h"
#include "rules.h"

struct CUctx_st { int unused; };
/*
 * A loaded module: its own functions (so a launch of a function of an
 * unloaded module fails, as on a GPU) and its own "__device__" state,
 * which a fresh load starts at zero.
 */
struct fake_func;
struct CUmod_st {
	bool live;
	long calls;			/* a __device__ counter kernels may keep */
	struct fake_func *funcs;	/* one per fake_kernels[] entry */
};
struct CUstream_st { int unused; };
struct CUevent_st { double t; };

typedef uint64_t u64;
typedef int64_t i64;

/* What each event adds to an elapsed time (cuEventRecord). */
#define FAKE_EVENT_MS	0.003

struct fake_kernel {
	const char *name;
	size_t nparams;
	size_t sizes[8];
	double cost_ms;
	int max_threads;
	int static_shared;
	void (*run)(void **args, const unsigned int grid[3], const unsigned int block[3]);
};

static struct CUctx_st fake_ctx;
/* The module of the kernel running now (kernels read its state). */
static struct CUmod_st *fake_cur_mod;
static double fake_clock;
static uint64_t fake_rng = 0x1234567;
static CUresult fake_sticky;

struct fake_stats fake_stats;

/*
 * What the device could see between one candidate launch and the next:
 * every launch (by kernel), copy and memset (by size), event record,
 * folded into a hash; each candidate launch made once timing has begun
 * (the first cuEventRecord after fake_seq_begin()) stores it.  Module loads
 * are left out: reloading at random points is the point.
 */
static uint64_t fake_seq_hash;
static bool fake_seq_on, fake_seq_timing;
uint64_t fake_seq[FAKE_MAX_SEQ];
size_t fake_nseq;
struct fake_host_seq fake_host_seq[FAKE_MAX_SEQ];
/* The host's side of the stretch in progress. */
static struct fake_host_seq fake_host_now;

static void
fake_token(const char *what, uint64_t n)
{
	size_t i;

	for (i = 0; what[i] != '\0'; i++)
		fake_seq_hash = value_mix64(fake_seq_hash ^ (unsigned char)what[i]);
	fake_seq_hash = value_mix64(fake_seq_hash ^ n);
}

void
fake_seq_begin(void)
{
	fake_seq_on = true;
	fake_seq_timing = false;
	fake_nseq = 0;
	fake_seq_hash = 0;
	memset(&fake_host_now, 0, sizeof fake_host_now);
}

/*
 * Leak detection: the reference's outputs (a 64-byte signature of each
 * call's) must not be anywhere in "device" memory when a candidate kernel
 * starts.  Every mapped region is scanned for every signature, through a
 * hash of the signatures' first 8 bytes.
 */
#define FAKE_SIG		64
#define FAKE_MAX_SIGS		4096
#define FAKE_MAX_REGIONS	512
static struct {
	uintptr_t p;
	size_t n;
} fake_regions[FAKE_MAX_REGIONS];
static unsigned char fake_sigs[FAKE_MAX_SIGS][FAKE_SIG];
static int fake_sig_slot[2 * FAKE_MAX_SIGS];	/* index + 1; 0 empty */
static size_t fake_nsigs;

static void
fake_region(uintptr_t p, size_t n, bool add)
{
	size_t i;

	for (i = 0; i < FAKE_MAX_REGIONS; i++) {
		if (add && fake_regions[i].p == 0) {
			fake_regions[i].p = p;
			fake_regions[i].n = n;
			return;
		}
		if (!add && fake_regions[i].p == p) {
			fake_regions[i].p = 0;
			return;
		}
	}
}

static size_t
fake_sig_hash(const unsigned char *b)
{
	uint64_t k;

	memcpy(&k, b, 8);
	return (size_t)(value_mix64(k) % (2 * FAKE_MAX_SIGS));
}

static void
fake_sign(const void *out, size_t bytes)
{
	size_t h;

	if (bytes < FAKE_SIG || fake_nsigs == FAKE_MAX_SIGS)
		return;
	memcpy(fake_sigs[fake_nsigs], out, FAKE_SIG);
	for (h = fake_sig_hash(out); fake_sig_slot[h] != 0; h = (h + 1) % (2 * FAKE_MAX_SIGS))
		;
	fake_sig_slot[h] = (int)++fake_nsigs;
}

static void
fake_scan(void)
{
	const unsigned char *b;
	size_t r, off, h;

	for (r = 0; r < FAKE_MAX_REGIONS; r++) {
		if (fake_regions[r].p == 0 || fake_regions[r].n < FAKE_SIG)
			continue;
		b = (const unsigned char *)fake_regions[r].p;
		for (off = 0; off + FAKE_SIG <= fake_regions[r].n; off += 4)
			for (h = fake_sig_hash(b + off); fake_sig_slot[h] != 0;
			    h = (h + 1) % (2 * FAKE_MAX_SIGS))
				if (memcmp(fake_sigs[fake_sig_slot[h] - 1], b + off, FAKE_SIG) == 0)
					fake_stats.leaks++;
	}
}

/* ------------------------------------------------ helper kernels (C) */

static u64
kg_word(u64 key, u64 c)
{
	return value_mix64(key + (c + 1) * UINT64_C(0x9e3779b97f4a7c15));
}

static void
kg_store_f(void *p, u64 i, int dt, double v)
{
	switch (dt) {
	case SPEC_FLOAT64: ((double *)p)[i] = v; break;
	case SPEC_FLOAT32: ((float *)p)[i] = (float)v; break;
	case SPEC_FLOAT16: ((uint16_t *)p)[i] = value_float_to_half((float)v); break;
	case SPEC_BFLOAT16: ((uint16_t *)p)[i] = value_float_to_bf16((float)v); break;
	}
}

static void
kg_store_i(void *p, u64 i, int dt, i64 v)
{
	switch (dt) {
	case SPEC_INT64: ((int64_t *)p)[i] = v; break;
	case SPEC_INT32: ((int32_t *)p)[i] = (int32_t)v; break;
	case SPEC_INT16: ((int16_t *)p)[i] = (int16_t)v; break;
	case SPEC_INT8: ((int8_t *)p)[i] = (int8_t)v; break;
	case SPEC_UINT8: ((uint8_t *)p)[i] = (uint8_t)v; break;
	case SPEC_BOOL: ((uint8_t *)p)[i] = v != 0; break;
	default: kg_store_f(p, i, dt, (double)v); break;
	}
}

static void
kg_init(void **a, const unsigned int *g, const unsigned int *b)
{
	void *p = *(void **)a[0];
	u64 n = *(u64 *)a[1], seed = *(u64 *)a[6], i;
	int dt = *(int *)a[2], kind = *(int *)a[3];
	double lo = *(double *)a[4], hi = *(double *)a[5];
	u64 key = value_mix64(seed ^ UINT64_C(0x696e697469616c73));

	fake_stats.inits++;
	for (i = 0; i < n; i++) {
		u64 r1 = kg_word(key, 2 * i), r2 = kg_word(key, 2 * i + 1);

		if (kind == 2) {
			i64 l = (i64)lo;
			u64 span = (u64)((i64)hi - l);

			kg_store_i(p, i, dt, span == 0 ? l : l + (i64)(r1 % span));
		} else {
			double u1 = (double)((r1 >> 11) + 1) * 0x1.0p-53;
			double u2 = (double)(r2 >> 11) * 0x1.0p-53;

			kg_store_f(p, i, dt, kind == 0 ?
			    lo + hi * sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2) :
			    lo + (hi - lo) * (u1 - 0x1.0p-53));
		}
	}
}

static void
kg_poison(void **a, const unsigned int *g, const unsigned int *b)
{
	void *p = *(void **)a[0];
	u64 n = *(u64 *)a[1], seed = *(u64 *)a[3], i;
	int dt = *(int *)a[2];
	u64 key = value_mix64(seed ^ UINT64_C(0x706f69736f6e6564));

	fake_stats.poisons++;
	for (i = 0; i < n; i++) {
		u64 r = kg_word(key, i);

		switch (dt) {
		case SPEC_FLOAT64:
			((u64 *)p)[i] = UINT64_C(0x7ff8000000000000) |
			    (r & UINT64_C(0x8007ffffffffffff));
			break;
		case SPEC_FLOAT32:
			((uint32_t *)p)[i] = 0x7fc00000u | ((uint32_t)r & 0x803fffffu);
			break;
		case SPEC_FLOAT16:
			((uint16_t *)p)[i] = (uint16_t)(0x7e00u | ((uint32_t)r & 0x81ffu));
			break;
		case SPEC_BFLOAT16:
			((uint16_t *)p)[i] = (uint16_t)(0x7fc0u | ((uint32_t)r & 0x803fu));
			break;
		case SPEC_INT64: ((u64 *)p)[i] = r; break;
		case SPEC_INT32: ((uint32_t *)p)[i] = (uint32_t)r; break;
		case SPEC_INT16: ((uint16_t *)p)[i] = (uint16_t)r; break;
		case SPEC_INT8: case SPEC_UINT8: ((uint8_t *)p)[i] = (uint8_t)r; break;
		default: ((uint8_t *)p)[i] = (uint8_t)(2 + r % 254); break;
		}
	}
}

/* The compare toolkit's host rule, which must match its kernel (rules.c). */
static void
kg_compare(void **a, const unsigned int *g, const unsigned int *b)
{
	const void *got = *(void **)a[0], *exp = *(void **)a[1];
	u64 n = *(u64 *)a[2];
	int dt = *(int *)a[3];
	double atol = *(double *)a[4], rtol = *(double *)a[5];
	struct kgym_compare_stats *res = *(struct kgym_compare_stats **)a[6];

	fake_stats.compares++;
	rules_api.compare((enum kgym_dtype)dt, got, exp, n, atol, rtol, res);
}

static void
kg_hash(void **a, const unsigned int *g, const unsigned int *b)
{
	const unsigned char *p = *(void **)a[0];
	u64 nbytes = *(u64 *)a[1], salt = *(u64 *)a[2], *out = *(u64 **)a[3];
	u64 nw = nbytes / 8, h = 0, i, w, t = 0;

	fake_stats.hashes++;
	for (i = 0; i < nw; i++) {
		memcpy(&w, p + i * 8, 8);
		h += value_mix64(w ^ kg_word(salt, i));
	}
	if (nbytes % 8 != 0) {
		for (i = nw * 8; i < nbytes; i++)
			t = (t << 8) | p[i];
		h += value_mix64(t ^ kg_word(salt, nw) ^ (nbytes % 8));
	}
	*out += h;
}

static void
kg_flush(void **a, const unsigned int *g, const unsigned int *b)
{
	uint32_t *p = *(uint32_t **)a[0], v = *(uint32_t *)a[2];
	u64 n = *(u64 *)a[1], i;

	fake_stats.flushes++;
	for (i = 0; i < n; i++)
		p[i] = v + (uint32_t)i;
}

static void
kg_scrub(void **a, const unsigned int *g, const unsigned int *b)
{
	fake_stats.scrubs++;
}

static void
kg_empty(void **a, const unsigned int *g, const unsigned int *b)
{
}

/* --------------------------------------------- candidate kernels (C) */

#define VADD_ARGS						\
	const float *x = *(const float **)a[0];			\
	const float *y = *(const float **)a[1];			\
	float *o = *(float **)a[2];				\
	int n = *(int *)a[3], i

static void
vadd(void **a, const unsigned int *g, const unsigned int *b)
{
	VADD_ARGS;

	fake_stats.vadd_last_n = n;
	for (i = 0; i < n; i++)
		o[i] = x[i] + y[i];
}

/* The reference: as vadd, and its outputs are remembered for fake_scan(). */
static void
vadd_ref(void **a, const unsigned int *g, const unsigned int *b)
{
	float *o = *(float **)a[2];
	int n = *(int *)a[3];

	vadd(a, g, b);
	fake_sign(o, (size_t)n * sizeof *o);
}

static void
vadd_off(void **a, const unsigned int *g, const unsigned int *b)
{
	VADD_ARGS;

	for (i = 0; i < n; i++)
		o[i] = x[i] + y[i] + (i == n / 2 ? 0.5f : 0.0f);
}

static void
vadd_half(void **a, const unsigned int *g, const unsigned int *b)
{
	VADD_ARGS;

	for (i = 0; i < n / 2; i++)
		o[i] = x[i] + y[i];
}

static void
vadd_mutate(void **a, const unsigned int *g, const unsigned int *b)
{
	VADD_ARGS;

	for (i = 0; i < n; i++)
		o[i] = x[i] + y[i];
	((float *)x)[0] = 7.0f;
}

/* Right, but input x changed at its 20th call only (a timed call). */
static void
vadd_mutate_late(void **a, const unsigned int *g, const unsigned int *b)
{
	static int calls;
	VADD_ARGS;

	for (i = 0; i < n; i++)
		o[i] = x[i] + y[i];
	if (++calls == 20)
		((float *)x)[0] = 7.0f;
}

/* Right but at its 20th call only (a timed call), where it writes zeros. */
static void
vadd_wrong_once(void **a, const unsigned int *g, const unsigned int *b)
{
	static int calls;
	VADD_ARGS;

	calls++;
	for (i = 0; i < n; i++)
		o[i] = calls == 20 ? 0.0f : x[i] + y[i];
}

/*
 * Right until its 11th call; from its 12th on (timed calls) it writes the
 * outputs of its 11th again: a cache that pays only where timed calls see
 * the same inputs.
 */
static void
vadd_replay(void **a, const unsigned int *g, const unsigned int *b)
{
	static int calls;
	static float *saved;
	static size_t saved_n;
	VADD_ARGS;

	calls++;
	if (calls >= 12 && saved != NULL && saved_n == (size_t)n) {
		memcpy(o, saved, (size_t)n * sizeof *o);
		return;
	}
	for (i = 0; i < n; i++)
		o[i] = x[i] + y[i];
	if (calls == 11 && (saved = malloc((size_t)n * sizeof *o)) != NULL) {
		memcpy(saved, o, (size_t)n * sizeof *o);
		saved_n = (size_t)n;
	}
}

/* Right, then one element past the end of the output. */
static void
vadd_overrun(void **a, const unsigned int *g, const unsigned int *b)
{
	VADD_ARGS;

	for (i = 0; i < n; i++)
		o[i] = x[i] + y[i];
	o[n] = 1.0f;
}

/*
 * Ignores its size argument and hard-codes N = FAKE_FIXED_N: right at that
 * size; at a larger one the rest is never written, at a smaller one it
 * runs into the guard pages.
 */
#define FAKE_FIXED_N	1000

static void
vadd_fixed(void **a, const unsigned int *g, const unsigned int *b)
{
	VADD_ARGS;

	(void)n;
	for (i = 0; i < FAKE_FIXED_N; i++)
		o[i] = x[i] + y[i];
}

static void
vadd_crash(void **a, const unsigned int *g, const unsigned int *b)
{
	fake_sticky = CUDA_ERROR_ILLEGAL_ADDRESS;
}

/* Right while it is being watched, or so it thinks: wrong after 12 calls. */
static void
vadd_lazy(void **a, const unsigned int *g, const unsigned int *b)
{
	static int calls;
	VADD_ARGS;

	if (++calls > 12) {
		for (i = 0; i < n; i++)
			o[i] = 0.0f;
		return;
	}
	for (i = 0; i < n; i++)
		o[i] = x[i] + y[i];
}

/*
 * A lookup table of the visible test case's outputs (x = 1 2 3, y = 10 20
 * 30 gives 11 22 33), whatever the inputs: right on the visible case only.
 */
static void
vadd_table(void **a, const unsigned int *g, const unsigned int *b)
{
	static const float table[] = { 11.0f, 22.0f, 33.0f };
	VADD_ARGS;

	(void)x;
	(void)y;
	for (i = 0; i < n; i++)
		o[i] = table[i % 3];
}

/*
 * Keeps a call count in its module's "__device__" state: right for its
 * first 7 calls after a load (5 correctness trials and the repeat fit),
 * wrong after -- unless its module is loaded again.
 */
static void
vadd_state(void **a, const unsigned int *g, const unsigned int *b)
{
	VADD_ARGS;

	if (++fake_cur_mod->calls > 7) {
		for (i = 0; i < n; i++)
			o[i] = 0.0f;
		return;
	}
	for (i = 0; i < n; i++)
		o[i] = x[i] + y[i];
}

/*
 * Tells checked calls from others the way device code could on a GPU:
 * by the work before it.  Right when an input hash was taken since its
 * last call (kgymd's sign, once, of a call to be checked), else lazy.
 */
static long sneaky_seen_hashes;

static void
vadd_sneaky(void **a, const unsigned int *g, const unsigned int *b)
{
	VADD_ARGS;

	if (fake_stats.hashes == sneaky_seen_hashes) {
		fake_stats.lazy_calls++;
		for (i = 0; i < n; i++)
			o[i] = 0.0f;
		return;
	}
	sneaky_seen_hashes = fake_stats.hashes;
	for (i = 0; i < n; i++)
		o[i] = x[i] + y[i];
}

/* o = x * alpha, n as a 64-bit parameter. */
static void
scale64(void **a, const unsigned int *g, const unsigned int *b)
{
	const float *x = *(const float **)a[0];
	float *o = *(float **)a[1], alpha = *(float *)a[2];
	int64_t n = *(int64_t *)a[3], i;

	for (i = 0; i < n; i++)
		o[i] = x[i] * alpha;
}

/* out[i] = (x[i] > 0) for int32 x into bool out; n rows x 3 cols. */
static void
positive(void **a, const unsigned int *g, const unsigned int *b)
{
	const int32_t *x = *(const int32_t **)a[0];
	uint8_t *o = *(uint8_t **)a[1];
	int n = *(int *)a[2], i;

	for (i = 0; i < n; i++)
		o[i] = x[i] > 0;
}

/*
 * For detect.c's tests (test_nvrtc_detect.c): a reference that is not
 * reproducible, candidates wrong (or only not bit-identical) on every other
 * call, and a reference whose outputs do not depend on its inputs.  Each
 * counts its own calls: a test uses each at most once.
 */
static void
vadd_jitter(void **a, const unsigned int *g, const unsigned int *b)
{
	static int calls;
	VADD_ARGS;

	calls++;
	for (i = 0; i < n; i++)
		o[i] = x[i] + y[i] + (calls % 2 == 0 ? 0.01f : 0.0f);
}

static void
vadd_flaky(void **a, const unsigned int *g, const unsigned int *b)
{
	static int calls;
	VADD_ARGS;

	calls++;
	for (i = 0; i < n; i++)
		o[i] = x[i] + y[i];
	if (calls % 2 == 0)
		o[n - 1] += 1.0f;
}

static void
vadd_ulp(void **a, const unsigned int *g, const unsigned int *b)
{
	static int calls;
	VADD_ARGS;

	calls++;
	for (i = 0; i < n; i++)
		o[i] = x[i] + y[i];
	if (calls % 2 == 0)
		o[0] = nextafterf(o[0], INFINITY);
}

static void
iota4(void **a, const unsigned int *g, const unsigned int *b)
{
	float *o = *(float **)a[2];
	int n = *(int *)a[3], i;

	for (i = 0; i < n; i++)
		o[i] = (float)i;
}

#define P4	4, { 8, 8, 8, 4 }
static const struct fake_kernel fake_kernels[] = {
	{ "kg_init", 7, { 8, 8, 4, 4, 8, 8, 8 }, 0, 1024, 0, kg_init },
	{ "kg_poison", 4, { 8, 8, 4, 8 }, 0, 1024, 0, kg_poison },
	{ "kg_compare", 7, { 8, 8, 8, 4, 8, 8, 8 }, 0, 1024, 0, kg_compare },
	{ "kg_hash", 4, { 8, 8, 8, 8 }, 0, 1024, 0, kg_hash },
	{ "kg_flush", 3, { 8, 8, 4 }, 0, 1024, 0, kg_flush },
	{ "kg_scrub", 1, { 4 }, 0, 1024, 0, kg_scrub },
	{ "kg_empty", 0, { 0 }, 0, 1024, 0, kg_empty },
	{ "vadd_ref", P4, 0.100, 1024, 0, vadd_ref },
	{ "vadd", P4, 0.050, 1024, 0, vadd },
	{ "vadd_quick", P4, 0.002, 1024, 0, vadd },	/* shorter than the events' cost */
	{ "vadd_off", P4, 0.050, 1024, 0, vadd_off },
	{ "vadd_half", P4, 0.050, 1024, 0, vadd_half },
	{ "vadd_mutate", P4, 0.050, 1024, 0, vadd_mutate },
	{ "vadd_crash", P4, 0.050, 1024, 0, vadd_crash },
	{ "vadd_overrun", P4, 0.050, 1024, 0, vadd_overrun },
	{ "vadd_lazy", P4, 0.050, 1024, 0, vadd_lazy },
	{ "vadd_mutate_late", P4, 0.050, 1024, 0, vadd_mutate_late },
	{ "vadd_wrong_once", P4, 0.050, 1024, 0, vadd_wrong_once },
	{ "vadd_replay", P4, 0.050, 1024, 0, vadd_replay },
	{ "vadd_fixed", P4, 0.050, 1024, 0, vadd_fixed },
	{ "vadd_table", P4, 0.050, 1024, 0, vadd_table },
	{ "vadd_state", P4, 0.050, 1024, 0, vadd_state },
	{ "vadd_sneaky", P4, 0.050, 1024, 0, vadd_sneaky },
	{ "vadd_regs", P4, 0.050, 256, 0, vadd },	/* registers allow 256 threads */
	{ "vadd_static", P4, 0.050, 1024, 40000, vadd },
	{ "scale64", 4, { 8, 8, 4, 8 }, 0.020, 1024, 0, scale64 },
	{ "positive", 3, { 8, 8, 4 }, 0.010, 1024, 0, positive },
	/* detect.c's tests */
	{ "vadd_jitter", P4, 0.100, 1024, 0, vadd_jitter },
	{ "vadd_flaky", P4, 0.050, 1024, 0, vadd_flaky },
	{ "vadd_ulp", P4, 0.050, 1024, 0, vadd_ulp },
	{ "iota4", P4, 0.100, 1024, 0, iota4 },
};

#define FAKE_NKERNELS	(sizeof fake_kernels / sizeof fake_kernels[0])

struct fake_func {
	const struct fake_kernel *k;
	struct CUmod_st *mod;
};

static const struct fake_kernel *
fake_kernel(CUfunction f)
{
	return ((const struct fake_func *)(const void *)f)->k;
}

/* ------------------------------------------------------------ driver */

#define STICKY()	do { if (fake_sticky != CUDA_SUCCESS) return fake_sticky; } while (0)

void
fake_reset(void)
{
	fake_sticky = CUDA_SUCCESS;
}

CUresult CUDAAPI
cuGetErrorName(CUresult error, const char **pStr)
{
	*pStr = error == CUDA_ERROR_ILLEGAL_ADDRESS ? "CUDA_ERROR_ILLEGAL_ADDRESS" :
	    error == CUDA_ERROR_INVALID_HANDLE ? "CUDA_ERROR_INVALID_HANDLE" :
	    error == CUDA_ERROR_NOT_FOUND ? "CUDA_ERROR_NOT_FOUND" :
	    error == CUDA_ERROR_INVALID_VALUE ? "CUDA_ERROR_INVALID_VALUE" : "CUDA_ERROR_FAKE";
	return CUDA_SUCCESS;
}

CUresult CUDAAPI
cuGetErrorString(CUresult error, const char **pStr)
{
	*pStr = error == CUDA_ERROR_ILLEGAL_ADDRESS ?
	    "an illegal memory access was encountered" : "fake error";
	return CUDA_SUCCESS;
}

CUresult CUDAAPI
cuDriverGetVersion(int *v)
{
	*v = CUDA_VERSION;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI
cuCtxGetCurrent(CUcontext *pctx)
{
	*pctx = &fake_ctx;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI
cuCtxGetDevice(CUdevice *device)
{
	*device = 0;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI
cuCtxSynchronize(void)
{
	fake_stats.syncs++;
	fake_host_now.syncs++;
	STICKY();
	return CUDA_SUCCESS;
}

CUresult CUDAAPI
cuCtxResetPersistingL2Cache(void)
{
	STICKY();
	fake_stats.l2_resets++;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI
cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev)
{
	switch (attrib) {
	case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *pi = 9; break;
	case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *pi = 0; break;
	case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *pi = 4; break;
	case CU_DEVICE_ATTRIBUTE_CLOCK_RATE: *pi = 1980000; break;
	case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *pi = 1024; break;
	case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X: *pi = 1024; break;
	case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y: *pi = 1024; break;
	case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z: *pi = 64; break;
	case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X: *pi = 2147483647; break;
	case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y: *pi = 65535; break;
	case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z: *pi = 65535; break;
	case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: *pi = 49152; break;
	case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: *pi = 232448; break;
	case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE: *pi = 1 << 16; break;	/* small: fast flushes */
	case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED: *pi = 1; break;
	default: return CUDA_ERROR_INVALID_VALUE;
	}
	return CUDA_SUCCESS;
}

CUresult CUDAAPI
cuDeviceGetName(char *name, int len, CUdevice dev)
{
	snprintf(name, (size_t)len, "Fake H100");
	return CUDA_SUCCESS;
}

CUresult CUDAAPI
cuDeviceGetPCIBusId(char *id, int len, CUdevice dev)
{
	snprintf(id, (size_t)len, "0000:00:00.0");
	return CUDA_SUCCESS;
}

CUresult CUDAAPI
cuDeviceTotalMem(size_t *bytes, CUdevice dev)
{
	*bytes = (size_t)80 << 30;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI
cuStreamCreate(CUstream *s, unsigned int flags)
{
	*s = calloc(1, sizeof **s);
	return CUDA_SUCCESS;
}

CUresult CUDAAPI
cuStreamDestroy(CUstream s)
{
	free(s);
	return CUDA_SUCCESS;
}

CUresult CUDAAPI
cuStreamSynchronize(CUstream s)
{
	fake_stats.syncs++;
	fake_host_now.syncs++;
	STICKY();
	return CUDA_SUCCESS;
}

CUresult CUDAAPI
cuEventCreate(CUevent *e, unsigned int flags)
{
	*e = calloc(1, sizeof **e);
	return CUDA_SUCCESS;
}

CUresult CUDAAPI
cuEventDestroy(CUevent e)
{
	free(e);
	return CUDA_SUCCESS;
}

CUresult CUDAAPI
cuEventRecord(CUevent e, CUstream s)
{
	STICKY();
	fake_seq_timing = fake_seq_on;
	fake_token("event", 0);
	/* What a real event costs beside the plan (the GPU's dispatch): in
	 * every elapsed time, measured by kg_empty and taken off (timing.c). */
	fake_clock += FAKE_EVENT_MS;
	e->t = fake_clock;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI
cuEventSynchronize(CUevent e)
{
	fake_stats.syncs++;
	fake_host_now.syncs++;
	STICKY();
	return CUDA_SUCCESS;
}

CUresult CUDAAPI
cuEventElapsedTime(float *ms, CUevent start, CUevent end)
{
	STICKY();
	*ms = (float)(end->t - start->t);
	return CUDA_SUCCESS;
}

CUresult CUDAAPI
cuModuleLoadData(CUmodule *m, const void *image)
{
	/* A cubin whose text says so does not load (tests of that path). */
	if (strncmp(image, "BROKEN", 6) == 0)
		return CUDA_ERROR_INVALID_IMAGE;
	if ((*m = calloc(1, sizeof **m)) == NULL ||
	    ((*m)->funcs = calloc(FAKE_NKERNELS, sizeof *(*m)->funcs)) == NULL)
		return CUDA_ERROR_OUT_OF_MEMORY;
	(*m)->live = true;
	fake_host_now.loads++;
	fake_stats.modules++;
	fake_stats.module_loads++;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI
cuModuleUnload(CUmodule m)
{
	/* Kept (not freed), so a later launch of its functions is seen. */
	m->live = false;
	fake_stats.modules--;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI
cuModuleGetFunction(CUfunction *f, CUmodule m, const char *name)
{
	size_t i;

	if (!m->live)
		return CUDA_ERROR_INVALID_HANDLE;
	for (i = 0; i < FAKE_NKERNELS; i++) {
		if (strcmp(fake_kernels[i].name, name) == 0) {
			m->funcs[i].k = &fake_kernels[i];
			m->funcs[i].mod = m;
			*f = (CUfunction)(void *)&m->funcs[i];
			return CUDA_SUCCESS;
		}
	}
	return CUDA_ERROR_NOT_FOUND;
}

CUresult CUDAAPI
cuFuncGetParamInfo(CUfunction f, size_t index, size_t *offset, size_t *size)
{
	const struct fake_kernel *k = fake_kernel(f);

	if (index >= k->nparams)
		return CUDA_ERROR_INVALID_VALUE;
	*offset = 0;
	*size = k->sizes[index];
	return CUDA_SUCCESS;
}

CUresult CUDAAPI
cuFuncGetAttribute(int *pi, CUfunction_attribute attrib, CUfunction f)
{
	const struct fake_kernel *k = fake_kernel(f);

	switch (attrib) {
	case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *pi = k->max_threads; break;
	case CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES: *pi = k->static_shared; break;
	case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES: *pi = 49152 - k->static_shared; break;
	case CU_FUNC_ATTRIBUTE_NUM_REGS: *pi = 32; break;
	default: return CUDA_ERROR_INVALID_VALUE;
	}
	return CUDA_SUCCESS;
}

CUresult CUDAAPI
cuFuncSetAttribute(CUfunction f, CUfunction_attribute attrib, int value)
{
	return CUDA_SUCCESS;
}

/* Gaussian noise for simulated kernel times. */
static double
fake_gauss(void)
{
	double u1, u2;

	fake_rng = value_mix64(fake_rng);
	u1 = (double)((fake_rng >> 11) + 1) * 0x1.0p-53;
	fake_rng = value_mix64(fake_rng);
	u2 = (double)(fake_rng >> 11) * 0x1.0p-53;
	return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

/* A kernel touching a guard page faults like a GPU: a sticky error. */
static sigjmp_buf fake_fault_jmp;

static void
fake_on_segv(int sig)
{
	siglongjmp(fake_fault_jmp, 1);
}

CUresult CUDAAPI
cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
    unsigned int bx, unsigned int by, unsigned int bz, unsigned int shared, CUstream s,
    void **params, void **extra)
{
	const struct fake_kernel *k = fake_kernel(f);
	unsigned int grid[3] = { gx, gy, gz }, block[3] = { bx, by, bz };

	STICKY();
	if (!((const struct fake_func *)(const void *)f)->mod->live)
		return CUDA_ERROR_INVALID_HANDLE;	/* its module was unloaded */
	if (fake_seq_on) {
		if (k->cost_ms > 0.0 && k->run != vadd_ref) {
			if (fake_seq_timing && fake_nseq < FAKE_MAX_SEQ) {
				fake_host_seq[fake_nseq] = fake_host_now;
				fake_seq[fake_nseq++] = fake_seq_hash;
			}
			fake_seq_hash = 0;
			memset(&fake_host_now, 0, sizeof fake_host_now);
		}
		fake_token(k->name, (uint64_t)gx * 65536 + bx);
	}
	fake_cur_mod = ((const struct fake_func *)(const void *)f)->mod;
	if (gx == 0 || gy == 0 || gz == 0 || bx * by * bz == 0 ||
	    bx * by * bz > (unsigned int)k->max_threads)
		return CUDA_ERROR_INVALID_VALUE;
	if (k->cost_ms > 0.0 && k->run != vadd_ref)
		fake_scan();		/* candidate code is about to run */
	{
		struct sigaction sa, old;

		memset(&sa, 0, sizeof sa);
		sa.sa_handler = fake_on_segv;
		sigaction(SIGSEGV, &sa, &old);
		if (sigsetjmp(fake_fault_jmp, 1) == 0)
			k->run(params, grid, block);
		else
			fake_sticky = CUDA_ERROR_ILLEGAL_ADDRESS;
		sigaction(SIGSEGV, &old, NULL);
	}
	if (k->cost_ms > 0.0) {
		fake_clock += k->cost_ms * (1.0 + 0.002 * fake_gauss());
		fake_stats.candidate_launches++;
	} else if (k->run != kg_empty) {	/* nothing: the events' cost alone */
		fake_clock += 0.001;
	}
	return CUDA_SUCCESS;
}

CUresult CUDAAPI
cuMemAlloc(CUdeviceptr *p, size_t bytes)
{
	void *m = calloc(1, bytes);

	if (m == NULL)
		return CUDA_ERROR_OUT_OF_MEMORY;
	*p = (CUdeviceptr)(uintptr_t)m;
	fake_stats.live_allocs++;
	fake_region((uintptr_t)m, bytes, true);
	return CUDA_SUCCESS;
}

CUresult CUDAAPI
cuMemFree(CUdeviceptr p)
{
	fake_region((uintptr_t)p, 0, false);
	free((void *)(uintptr_t)p);
	fake_stats.live_allocs--;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI
cuMemGetInfo(size_t *free_bytes, size_t *total)
{
	*free_bytes = *total = (size_t)80 << 30;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI
cuMemcpyHtoDAsync(CUdeviceptr dst, const void *src, size_t n, CUstream s)
{
	fake_stats.htod++;
	fake_host_now.htod++;
	STICKY();
	fake_token("htod", n);
	memcpy((void *)(uintptr_t)dst, src, n);
	return CUDA_SUCCESS;
}

CUresult CUDAAPI
cuMemcpyDtoHAsync(void *dst, CUdeviceptr src, size_t n, CUstream s)
{
	fake_stats.dtoh++;
	fake_host_now.dtoh++;
	STICKY();
	fake_token("dtoh", n);
	memcpy(dst, (const void *)(uintptr_t)src, n);
	return CUDA_SUCCESS;
}

CUresult CUDAAPI
cuMemsetD8Async(CUdeviceptr dst, unsigned char v, size_t n, CUstream s)
{
	STICKY();
	fake_token("memset", n);
	memset((void *)(uintptr_t)dst, v, n);
	return CUDA_SUCCESS;
}

#define FAKE_GRANULE	((size_t)64 << 10)

CUresult CUDAAPI
cuMemGetAllocationGranularity(size_t *g, const CUmemAllocationProp *prop,
    CUmemAllocationGranularity_flags option)
{
	*g = FAKE_GRANULE;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI
cuMemAddressReserve(CUdeviceptr *p, size_t size, size_t align, CUdeviceptr addr,
    unsigned long long flags)
{
	void *m = mmap(NULL, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

	if (m == MAP_FAILED)
		return CUDA_ERROR_OUT_OF_MEMORY;
	*p = (CUdeviceptr)(uintptr_t)m;
	fake_stats.live_allocs++;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI
cuMemAddressFree(CUdeviceptr p, size_t size)
{
	munmap((void *)(uintptr_t)p, size);
	fake_stats.live_allocs--;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI
cuMemCreate(CUmemGenericAllocationHandle *h, size_t size, const CUmemAllocationProp *prop,
    unsigned long long flags)
{
	if (size % FAKE_GRANULE != 0)
		return CUDA_ERROR_INVALID_VALUE;
	*h = (CUmemGenericAllocationHandle)size;
	fake_stats.live_handles++;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI
cuMemRelease(CUmemGenericAllocationHandle h)
{
	fake_stats.live_handles--;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI
cuMemMap(CUdeviceptr p, size_t size, size_t offset, CUmemGenericAllocationHandle h,
    unsigned long long flags)
{
	if (size != (size_t)h || mprotect((void *)(uintptr_t)p, size, PROT_READ | PROT_WRITE) < 0)
		return CUDA_ERROR_INVALID_VALUE;
	fake_region((uintptr_t)p, size, true);
	return CUDA_SUCCESS;
}

CUresult CUDAAPI
cuMemUnmap(CUdeviceptr p, size_t size)
{
	fake_region((uintptr_t)p, 0, false);
	madvise((void *)(uintptr_t)p, size, MADV_DONTNEED);
	mprotect((void *)(uintptr_t)p, size, PROT_NONE);
	return CUDA_SUCCESS;
}

CUresult CUDAAPI
cuMemSetAccess(CUdeviceptr p, size_t size, const CUmemAccessDesc *desc, size_t count)
{
	return CUDA_SUCCESS;
}

/* ------------------------------------- the worker's GPU lock */

static int
fake_gpu_lock_host(enum kgym_gpu_lock mode)
{
	return fake_gpu_lock((int)mode);
}

int
fake_gpu_lock(int mode)
{
	if (mode == KGYM_GPU_EXCLUSIVE)
		fake_stats.exclusive_locks++;
	return 0;
}

/* The one toolkit a test process has: the compare rules, linked in. */
const struct kgym_toolkit_api *
fake_toolkit(const char *name, uint32_t min_version, char **ret_cause)
{
	if (strcmp(name, KGYM_COMPARE_API) == 0 && rules_api.head.version >= min_version)
		return &rules_api.head;
	if (ret_cause != NULL && asprintf(ret_cause, "no toolkit serves the '%s' API", name) < 0)
		*ret_cause = NULL;
	return NULL;
}

struct kgym_host fake_host = {
	.abi_major = KGYM_PLUGIN_ABI_MAJOR,
	.abi_minor = KGYM_PLUGIN_ABI_MINOR,
	.struct_size = sizeof(struct kgym_host),
	.gpu_lock = fake_gpu_lock_host,
	.toolkit = fake_toolkit,
};
