/*
 * helpers.c -- kgymd's own device code: the trusted helper kernels.
 *
 * Everything the nvrtc backend does on the GPU besides running the
 * candidate and the reference goes through these kernels, which the worker
 * compiles with NVRTC for its GPU in prepare() (before the sandbox) and
 * loads once (device.c):
 *
 *   kg_init     a tensor's values from a seed: a counter-based generator
 *               (splitmix64 over the element index), so regenerating with
 *               the same seed gives the same inputs bit for bit, and no
 *               host memory or cuRAND state is involved;
 *   kg_poison   NaNs with random payloads for floating outputs, random
 *               bits for integer ones, 2..255 for bool: an element the
 *               candidate does not write cannot match;
 *   kg_compare  the output rule, which is not ours but the compare
 *               toolkit's (kgym/compare.h): its text is compiled in after
 *               ours, so every backend judges by the same rule;
 *   kg_hash     a keyed 64-bit hash of a buffer (inputs must not change);
 *   kg_flush    writes a buffer twice the L2's size (cold cache per call);
 *   kg_scrub    zeroes every SM's shared memory between programs.
 *
 * The source uses no header, so it compiles wherever NVRTC does; half and
 * bfloat16 conversions are a PTX instruction and bit arithmetic.  The dtype
 * and init codes are those of enum spec_dtype and enum spec_init_kind
 * (checked below at compile time).
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nvrtc.h>

#include "nvrtc_internal.h"

_Static_assert(SPEC_FLOAT64 == 0 && SPEC_FLOAT32 == 1 && SPEC_FLOAT16 == 2 &&
    SPEC_BFLOAT16 == 3 && SPEC_INT64 == 4 && SPEC_INT32 == 5 && SPEC_INT16 == 6 &&
    SPEC_INT8 == 7 && SPEC_UINT8 == 8 && SPEC_BOOL == 9, "kg_* dtype codes");
_Static_assert(SPEC_INIT_NORMAL == 0 && SPEC_INIT_UNIFORM == 1 && SPEC_INIT_RANDINT == 2,
    "kg_init kind codes");
_Static_assert(sizeof(struct kgym_compare_stats) == 40, "kg_compare's slot layout");
/* The compare toolkit takes our dtype codes as they are. */
#define HELPERS_SAME_DTYPE(t)	((int)SPEC_##t == (int)KGYM_DTYPE_##t)
_Static_assert(HELPERS_SAME_DTYPE(FLOAT64) && HELPERS_SAME_DTYPE(FLOAT32) &&
    HELPERS_SAME_DTYPE(FLOAT16) && HELPERS_SAME_DTYPE(BFLOAT16) &&
    HELPERS_SAME_DTYPE(INT64) && HELPERS_SAME_DTYPE(INT32) &&
    HELPERS_SAME_DTYPE(INT16) && HELPERS_SAME_DTYPE(INT8) &&
    HELPERS_SAME_DTYPE(UINT8) && HELPERS_SAME_DTYPE(BOOL), "kgym_dtype codes");

static const char helpers_src[] =
"typedef unsigned long long u64;\n"
"typedef long long i64;\n"
"typedef unsigned int u32;\n"
"typedef unsigned short u16;\n"
"enum { F64, F32, F16, BF16, I64, I32, I16, I8, U8, BOOL };\n"
"\n"
"__device__ __forceinline__ u64 kg_mix(u64 z)\n"
"{\n"
"	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;\n"
"	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;\n"
"	return z ^ (z >> 31);\n"
"}\n"
"/* Word c of the splitmix64 stream keyed by key. */\n"
"__device__ __forceinline__ u64 kg_word(u64 key, u64 c)\n"
"{\n"
"	return kg_mix(key + (c + 1) * 0x9e3779b97f4a7c15ULL);\n"
"}\n"
"__device__ __forceinline__ u64 kg_tid() { return blockIdx.x * (u64)blockDim.x + threadIdx.x; }\n"
"__device__ __forceinline__ u64 kg_stride() { return (u64)gridDim.x * blockDim.x; }\n"
"\n"
"__device__ __forceinline__ u16 kg_f2h(float f)\n"
"{\n"
"	u16 h;\n"
"	asm(\"cvt.rn.f16.f32 %0, %1;\" : \"=h\"(h) : \"f\"(f));\n"
"	return h;\n"
"}\n"
"__device__ __forceinline__ u16 kg_f2bf(float f)\n"
"{\n"
"	u32 x = __float_as_uint(f);\n"
"	if ((x & 0x7fffffffu) > 0x7f800000u)\n"
"		return (u16)((x >> 16) | 0x40u);\n"
"	x += 0x7fffu + ((x >> 16) & 1u);\n"
"	return (u16)(x >> 16);\n"
"}\n"
"\n"
"__device__ __forceinline__ void kg_store_f(void *p, u64 i, int dt, double v)\n"
"{\n"
"	switch (dt) {\n"
"	case F64: ((double *)p)[i] = v; break;\n"
"	case F32: ((float *)p)[i] = (float)v; break;\n"
"	case F16: ((u16 *)p)[i] = kg_f2h((float)v); break;\n"
"	case BF16: ((u16 *)p)[i] = kg_f2bf((float)v); break;\n"
"	}\n"
"}\n"
"__device__ __forceinline__ void kg_store_i(void *p, u64 i, int dt, i64 v)\n"
"{\n"
"	switch (dt) {\n"
"	case I64: ((i64 *)p)[i] = v; break;\n"
"	case I32: ((int *)p)[i] = (int)v; break;\n"
"	case I16: ((short *)p)[i] = (short)v; break;\n"
"	case I8: ((signed char *)p)[i] = (signed char)v; break;\n"
"	case U8: ((unsigned char *)p)[i] = (unsigned char)v; break;\n"
"	case BOOL: ((unsigned char *)p)[i] = v != 0; break;\n"
"	default: kg_store_f(p, i, dt, (double)v); break;\n"
"	}\n"
"}\n"
"\n"
"/* kind 0 normal(a, b), 1 uniform[a, b), 2 randint[a, b). */\n"
"extern \"C\" __global__ void kg_init(void *p, u64 n, int dt, int kind, double a, double b,\n"
"    u64 seed)\n"
"{\n"
"	u64 key = kg_mix(seed ^ 0x696e697469616c73ULL), i;\n"
"\n"
"	for (i = kg_tid(); i < n; i += kg_stride()) {\n"
"		u64 r1 = kg_word(key, 2 * i), r2 = kg_word(key, 2 * i + 1);\n"
"\n"
"		if (kind == 2) {\n"
"			i64 lo = (i64)a;\n"
"			u64 span = (u64)((i64)b - lo);\n"
"\n"
"			kg_store_i(p, i, dt, span == 0 ? lo : lo + (i64)(r1 % span));\n"
"		} else if (dt == F64) {\n"
"			double u1 = (double)((r1 >> 11) + 1) * 1.1102230246251565e-16;\n"
"			double u2 = (double)(r2 >> 11) * 1.1102230246251565e-16;\n"
"\n"
"			((double *)p)[i] = kind == 0 ?\n"
"			    a + b * sqrt(-2.0 * log(u1)) * cospi(2.0 * u2) :\n"
"			    a + (b - a) * (u1 - 1.1102230246251565e-16);\n"
"		} else {\n"
"			float u1 = (float)((r1 >> 40) + 1) * 5.9604644775390625e-8f;\n"
"			float u2 = (float)(r2 >> 40) * 5.9604644775390625e-8f;\n"
"			float v = kind == 0 ?\n"
"			    (float)a + (float)b * sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2) :\n"
"			    (float)a + ((float)b - (float)a) * (u1 - 5.9604644775390625e-8f);\n"
"\n"
"			kg_store_f(p, i, dt, v);\n"
"		}\n"
"	}\n"
"}\n"
"\n"
"extern \"C\" __global__ void kg_poison(void *p, u64 n, int dt, u64 seed)\n"
"{\n"
"	u64 key = kg_mix(seed ^ 0x706f69736f6e6564ULL), i;\n"
"\n"
"	for (i = kg_tid(); i < n; i += kg_stride()) {\n"
"		u64 r = kg_word(key, i);\n"
"\n"
"		switch (dt) {\n"
"		case F64: ((u64 *)p)[i] = 0x7ff8000000000000ULL | (r & 0x8007ffffffffffffULL); break;\n"
"		case F32: ((u32 *)p)[i] = 0x7fc00000u | ((u32)r & 0x803fffffu); break;\n"
"		case F16: ((u16 *)p)[i] = (u16)(0x7e00u | ((u32)r & 0x81ffu)); break;\n"
"		case BF16: ((u16 *)p)[i] = (u16)(0x7fc0u | ((u32)r & 0x803fu)); break;\n"
"		case I64: ((u64 *)p)[i] = r; break;\n"
"		case I32: ((u32 *)p)[i] = (u32)r; break;\n"
"		case I16: ((u16 *)p)[i] = (u16)r; break;\n"
"		case I8: case U8: ((unsigned char *)p)[i] = (unsigned char)r; break;\n"
"		default: ((unsigned char *)p)[i] = (unsigned char)(2 + r % 254); break;\n"
"		}\n"
"	}\n"
"}\n"
"\n"
"__device__ __forceinline__ u64 kg_warp_sum(u64 v)\n"
"{\n"
"	for (int o = 16; o > 0; o >>= 1)\n"
"		v += __shfl_down_sync(0xffffffffu, v, o);\n"
"	return v;\n"
"}\n"
"\n"
"/* Sum over the 8-byte words of a keyed bijection of (word, index); the\n"
"   tail (nbytes % 8) is one more word.  Pointers are 256-byte aligned. */\n"
"extern \"C\" __global__ void kg_hash(const void *p, u64 nbytes, u64 salt, u64 *out)\n"
"{\n"
"	const u64 *w = (const u64 *)p;\n"
"	u64 nw = nbytes / 8, h = 0, i;\n"
"\n"
"	for (i = kg_tid(); i < nw; i += kg_stride())\n"
"		h += kg_mix(w[i] ^ kg_word(salt, i));\n"
"	if (kg_tid() == 0 && nbytes % 8 != 0) {\n"
"		const unsigned char *b = (const unsigned char *)p;\n"
"		u64 t = 0;\n"
"\n"
"		for (i = nw * 8; i < nbytes; i++)\n"
"			t = (t << 8) | b[i];\n"
"		h += kg_mix(t ^ kg_word(salt, nw) ^ (nbytes % 8));\n"
"	}\n"
"	h = kg_warp_sum(h);\n"
"	if ((threadIdx.x & 31) == 0 && h != 0)\n"
"		atomicAdd(out, h);\n"
"}\n"
"\n"
"extern \"C\" __global__ void kg_flush(u32 *p, u64 n, u32 v)\n"
"{\n"
"	for (u64 i = kg_tid(); i < n; i += kg_stride())\n"
"		p[i] = v + (u32)i;\n"
"}\n"
"\n"
"/* Launched with all the shared memory a block may have, two blocks per SM:\n"
"   every SM runs at least one (each fills an SM's shared memory). */\n"
"extern \"C\" __global__ void kg_scrub(u32 nwords)\n"
"{\n"
"	extern __shared__ u32 kg_smem[];\n"
"\n"
"	for (u32 i = threadIdx.x; i < nwords; i += blockDim.x)\n"
"		((volatile u32 *)kg_smem)[i] = 0;\n"
"}\n"
"\n"
"/* Nothing: what a launch costs between two events (timing.c). */\n"
"extern \"C\" __global__ void kg_empty(void)\n"
"{\n"
"}\n";

const char *
helpers_source(void)
{
	return helpers_src;
}

static int
helpers_nvrtc_fail(nvrtcResult rc, nvrtcProgram prog, const char *what, char **ret_cause)
{
	char *log = NULL;
	size_t len = 0;
	int error;

	if (prog != NULL && nvrtcGetProgramLogSize(prog, &len) == NVRTC_SUCCESS && len > 1 &&
	    (log = malloc(len)) != NULL && nvrtcGetProgramLog(prog, log) != NVRTC_SUCCESS) {
		free(log);
		log = NULL;
	}
	error = rc == NVRTC_ERROR_OUT_OF_MEMORY ? -ENOMEM :
	    rc == NVRTC_ERROR_INVALID_OPTION ? -EINVAL : -EIO;
	if (asprintf(ret_cause, "trusted helper kernels: %s: %s%s%s", what,
	    nvrtcGetErrorString(rc), log != NULL ? "\n" : "", log != NULL ? log : "") < 0)
		*ret_cause = NULL;
	free(log);
	return error;
}

int
helpers_compile(const char *arch, unsigned char **ret_cubin, size_t *ret_size,
    char **ret_cause)
{
	char archopt[64];
	const char *opts[] = { archopt, "--std=c++17" };
	nvrtcProgram prog = NULL;
	unsigned char *cubin;
	nvrtcResult rc;
	char *src;
	size_t size;
	int error;

	if (nvrtc_compare == NULL) {
		if (asprintf(ret_cause, "trusted helper kernels: no compare toolkit, so no "
		    "%s", KGYM_COMPARE_KERNEL) < 0)
			*ret_cause = NULL;
		return -ENOENT;
	}
	/* One program, one module: the toolkit's names cannot clash with ours (kgc_). */
	if (asprintf(&src, "%s\n%s", helpers_src, nvrtc_compare->kernel_source()) < 0) {
		*ret_cause = strdup("out of memory for the helpers' source");
		return -ENOMEM;
	}
	snprintf(archopt, sizeof archopt, "--gpu-architecture=%s", arch);
	rc = nvrtcCreateProgram(&prog, src, "kgymd_helpers.cu", 0, NULL, NULL);
	free(src);	/* NVRTC keeps its own copy */
	if (rc != NVRTC_SUCCESS)
		return helpers_nvrtc_fail(rc, NULL, "nvrtcCreateProgram", ret_cause);
	if ((rc = nvrtcCompileProgram(prog, 2, opts)) != NVRTC_SUCCESS) {
		error = helpers_nvrtc_fail(rc, prog, archopt, ret_cause);
		goto destroy_prog;
	}
	if ((rc = nvrtcGetCUBINSize(prog, &size)) != NVRTC_SUCCESS) {
		error = helpers_nvrtc_fail(rc, prog, "nvrtcGetCUBINSize", ret_cause);
		goto destroy_prog;
	}
	if ((cubin = malloc(size)) == NULL) {
		error = -ENOMEM;
		*ret_cause = strdup("out of memory for the helpers' cubin");
		goto destroy_prog;
	}
	if ((rc = nvrtcGetCUBIN(prog, (char *)cubin)) != NVRTC_SUCCESS) {
		free(cubin);
		error = helpers_nvrtc_fail(rc, prog, "nvrtcGetCUBIN", ret_cause);
		goto destroy_prog;
	}
	*ret_cubin = cubin;
	*ret_size = size;
	error = 0;
destroy_prog:
	nvrtcDestroyProgram(&prog);
	return error;
}
