/*
 * nvrtc_internal.h -- functions shared between the files of the nvrtc
 * backend plugin (plugins/nvrtc).  One section per file; each section says
 * its ownership rule.  spec.h and expr.h (no CUDA) are the payload's model.
 */
#ifndef KGYM_NVRTC_INTERNAL_H
#define KGYM_NVRTC_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "spec.h"

/* ==== compile.c: NVRTC compile of one source to a cubin, with a cache ====
 *
 * Needs no GPU (runs in a CPU worker).  Ownership: compile_source() fills a
 * caller's struct compile_output whose members it owns until
 * compile_output_clear(); strings through ret_cause are malloc'd.
 */

/* Where the CUDA headers are when the request does not say. */
#define COMPILE_DEFAULT_INCLUDE_DIR	"/usr/local/cuda/include"
/* NVRTC logs are trimmed to this many bytes (the head is kept). */
#define COMPILE_MAX_LOG			((size_t)64 << 10)

/* What to compile.  Borrowed by compile_source(). */
struct compile_input {
	const char *name;		/* for NVRTC's messages ("solution"); NULL: "kernel" */
	const char *source;		/* NUL-terminated CUDA C */
	const char *const *options;	/* the program's own options, allowlisted by the caller */
	size_t noptions;
	const char *arch;		/* "sm_90": a cubin for exactly that architecture */
	const char *include_dir;	/* CUDA headers; NULL: COMPILE_DEFAULT_INCLUDE_DIR */
	const char *cache_dir;		/* cubin cache; NULL: no cache */
	const char *scratch_dir;	/* the job's own directory: NVRTC may read and write
					 * it (NULL: none) */
	bool force;			/* skip a cache hit (force_refresh); still refill it */
	bool unconfined;		/* NVRTC may open any file the worker can
					 * ([plugin.nvrtc] compile_sandbox = no); else
					 * only include_dir and scratch_dir (confine.c) */
};

struct compile_output {
	bool ok;			/* false: the source did not compile, see log */
	unsigned char *cubin;		/* ok: the ELF image for cuModuleLoadData */
	size_t cubin_size;
	char *log;			/* NVRTC's log ("" when none; NULL on a cache hit) */
	double compile_ms;		/* wall time, cache lookup included */
	bool cache_hit;
	char cache_key[65];		/* hex: the cubin is in cache_dir under it
					 * (a hit, or written); "" when not */
};

/*
 * Compile `in` (or find it in in->cache_dir) into *ret_out.  Unless
 * in->unconfined, NVRTC runs in a thread that can open nothing but
 * include_dir and scratch_dir (confine.c); a confinement that cannot be
 * made fails the compile (-EOPNOTSUPP without Landlock).  The log is
 * filtered (compile_log_filter) before it is returned.  0 when a
 * verdict was reached, whether ok or not: a source that does not compile is
 * ret_out->ok == false with NVRTC's log, not an error.  -EINVAL (a bad arch
 * or include dir: NVRTC refused the options), -ENOMEM, -EIO (NVRTC failed
 * for another reason) with *ret_cause.  A cache that cannot be read or
 * written is not an error: the compile happens and the cause is lost.
 */
int	compile_source(const struct compile_input *in, struct compile_output *ret_out,
	    char **ret_cause);

/* Free the members of *out and zero it; a zeroed struct is a no-op. */
void	compile_output_clear(struct compile_output *out);

/*
 * NVRTC's log as a client may see it: only the diagnostics located in the
 * program `name` itself (its own lines, quoted); a run of diagnostics
 * located in any other file becomes one line saying how many were left
 * out (and from which line of `name` they were reached), so no line of
 * another file is quoted; "at line N of FILE" in a kept diagnostic names
 * no other file; lines of no known form are dropped.  Invalid UTF-8 bytes
 * become '?', and past COMPILE_MAX_LOG the tail is cut with a marker.
 * malloc'd, or NULL when out of memory.
 */
char	*compile_log_filter(const char *log, size_t len, const char *name);

/* Compile jobs' default confinement ([plugin.nvrtc] compile_sandbox). */
void	compile_set_unconfined(bool unconfined);

/*
 * Compile a trivial kernel for `arch` (no cache), so that NVRTC has loaded
 * its builtins library before the sandbox is installed: call from
 * prepare().  0, or -errno with *ret_cause when NVRTC does not work.
 */
int	compile_warm_up(const char *arch, char **ret_cause);

/*
 * The "compile" job of the nvrtc backend (request and result as the
 * workflows make and read them, plugins/common/native_workflow.c:
 * {"op":"compile", "arch", "cache_dir"?, "include_dir"?,
 * "units":[{name, source, options}]} -> {"status":"completed",
 * "units":[{name, ok, cubin_key | cubin_b64, log, compile_ms, cache_hit,
 * kernels}]}).  A compiled unit's cubin travels by its cache key when it
 * is in the shared cache (which GPU workers may read,
 * compile_cache_load()), else by value in base64 (no cache, or it could
 * not be written).
 * A unit that does not compile is ok:false with its log, the job still
 * succeeds.  Options are checked against spec_option_allowed() again here:
 * a request is the workflow's, but the compile worker does not rely on it.
 * 0 or -EINVAL (malformed request) / -ENOMEM / -EIO with *ret_cause.
 */
int	compile_job(const json_t *request, json_t **ret_result, char **ret_cause);

/*
 * The cubin stored in cache_dir under `key` (64 hex digits, as compile
 * jobs return it), checked against the digest stored with it: a malloc'd
 * copy in *ret_cubin.  -ENOENT (absent or damaged), -EINVAL (not a key),
 * -ENOMEM, with *ret_cause.
 */
int	compile_cache_load(const char *cache_dir, const char *key, unsigned char **ret_cubin,
	    size_t *ret_size, char **ret_cause);

/* The NVRTC version as "13.0" in a static buffer. */
const char *compile_nvrtc_version(void);

/* Base64 (RFC 4648, no line breaks): NULL when out of memory; free(). */
char	*compile_b64_encode(const void *data, size_t len);
/* Decode base64 into a malloc'd buffer: 0, -EINVAL (not base64), -ENOMEM. */
int	compile_b64_decode(const char *b64, unsigned char **ret_data, size_t *ret_len);

/* A malloc'd formatted message (a cause for the host), or NULL. */
char	*cause_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ==== end of compile.c ==== */

/* ==== confine.c: the compile thread's own Landlock domain ====
 *
 * The rules are the sandbox library's (sandbox_landlock_thread(),
 * include/kgym/sandbox.h); confine.c owns the thread.  Ownership: the
 * policy's strings are borrowed; *ret_cause is malloc'd.
 */
struct confine_policy {
	const char *const *read_dirs;	/* NULL-terminated; may be NULL */
	const char *const *rw_dirs;	/* NULL-terminated; may be NULL */
};

/*
 * Run fn(arg) in a new thread that can open nothing but what `p` lists
 * (reading the read_dirs, reading and writing the rw_dirs), and wait for
 * it; *ret_fn gets what fn returned.  0, or -errno with *ret_cause when
 * the thread could not be made or confined -- then fn did not run.
 */
int	confine_run(const struct confine_policy *p, int (*fn)(void *), void *arg, int *ret_fn,
	    char **ret_cause);

/* ==== end of confine.c ==== */

/* ==== nvrtc.c: the plugin struct; what the other files need of the host ====
 *
 * The host table handed to init(); NULL before.  Borrowed for the plugin's
 * life.
 */
#include <kgym/compare.h>
#include <kgym/plugin.h>

extern const struct kgym_host *nvrtc_host;
extern const struct kgym_plugin_handle *nvrtc_self;
/*
 * The "compare" toolkit's API (kgym/compare.h), found in prepare(): the
 * output rule the helper kernels compile in, the element printing and
 * the mismatch report.  NULL before prepare(), or when the toolkit is
 * missing, in which case prepare() fails and no job runs.
 */
extern const struct kgym_compare_api *nvrtc_compare;

/* Log through the host (a no-op before init). */
void	nvrtc_log(enum kgym_log_level level, const char *fmt, ...)
	    __attribute__((format(printf, 2, 3)));

/* *ret_cause = a malloc'd printf-style message; returns `error` (a -errno). */
int	nvrtc_fail(char **ret_cause, int error, const char *fmt, ...)
	    __attribute__((format(printf, 3, 4)));

/* ==== end of nvrtc.c ==== */

/* ==== values.c: host-side element values, seeds (no CUDA) ====
 *
 * Converting JSON numbers to and from tensor elements (test cases, the
 * values named in a mismatch message) and deriving the secret per-trial
 * seeds.  Nothing is allocated.
 */

/* Float to IEEE binary16 and to bfloat16, round to nearest even. */
uint16_t value_float_to_half(float f);
uint16_t value_float_to_bf16(float f);

/*
 * The element at `elem` (spec_dtype_size(dtype) bytes) as a double, half
 * and bfloat16 widened exactly: the compare toolkit's value(), which
 * nvrtc_compare must be set for.
 */
double	value_get(enum spec_dtype dtype, const void *elem);

/*
 * Store `v` as one element of `dtype` at `elem`.  Integer dtypes (and bool)
 * take only integral values within the dtype's range (bool: 0 or 1);
 * floating dtypes take any finite or infinite value (NaN too) and round.
 * 0, or -ERANGE / -EINVAL (not integral) without writing.
 */
int	value_put(enum spec_dtype dtype, double v, void *elem);

/* splitmix64's finaliser: a bijection that mixes all 64 bits. */
uint64_t value_mix64(uint64_t x);
/* A seed derived from `seed` for (tag, index); distinct tags never collide
 * in practice.  Used for trials, inputs, poison, hash salts, sampling. */
uint64_t value_seed(uint64_t seed, uint32_t tag, uint64_t index);

/* Seed tags. */
enum value_tag {
	VALUE_TAG_TRIAL = 1,
	VALUE_TAG_INPUT,
	VALUE_TAG_POISON,
	VALUE_TAG_HASH,
	VALUE_TAG_TIMING,
	VALUE_TAG_SAMPLE,
	VALUE_TAG_FLUSH,
	VALUE_TAG_RESET,
};

/* ==== end of values.c ==== */

/* ==== stats.c: timing statistics (no CUDA) ====
 *
 * Ownership: the caller's arrays are borrowed; stats_summarise() sorts a
 * copy.
 */

struct stats_summary {
	size_t n;
	double median, mean, std, min, max;
	/* 95% confidence interval of the median (order statistics). */
	double ci_lo, ci_hi;
	/* max(median - ci_lo, ci_hi - median) / median; +inf when unknown. */
	double ci_rel;
};

/*
 * Summarise n >= 1 samples.  The interval is the distribution-free one
 * from the order statistics (binomial(n, 1/2), normal approximation with
 * continuity-free ranks), widened to [min, max] when n is too small for
 * 95%.  0, or -EINVAL for n == 0 or a non-finite sample, -ENOMEM.
 */
int	stats_summarise(const double *x, size_t n, struct stats_summary *ret);

/* The summary as kgymd-protocol(7)'s timing object (median_ms, ... trials). */
json_t	*stats_json(const struct stats_summary *s);

/* ==== end of stats.c ==== */

/* ==== helpers.c: the trusted helper kernels' source and compile (no GPU) ====
 *
 * Input generation, poison, comparison, hashing, L2 flush and shared
 * memory scrub, compiled with NVRTC for the worker's GPU in prepare(),
 * before the sandbox.  Needs NVRTC only, so it is tested without a GPU.
 * The kernels take the dtype as an int equal to enum spec_dtype.
 */

/* The CUDA C source (static). */
const char *helpers_source(void);

/*
 * Compile helpers_source(), and the compare toolkit's kg_compare after it
 * (nvrtc_compare->kernel_source), for `arch` ("sm_90") into a malloc'd
 * cubin.  0, or -EIO (NVRTC failed; its log in *ret_cause), -EINVAL (NVRTC
 * does not know the arch), -ENOENT (no compare toolkit), -ENOMEM.
 */
int	helpers_compile(const char *arch, unsigned char **ret_cubin, size_t *ret_size,
	    char **ret_cause);

/* ==== end of helpers.c ==== */

/* ==== device.c: the worker's GPU, guarded allocations, helper launches ====
 *
 * libcuda is dlopen()ed, not linked: the plugin must load in CPU workers
 * and on machines with no driver (compile jobs).  The GPU worker has loaded
 * it and made the primary context current before prepare().  Everything
 * here runs on the one stream device_prepare() creates (nvdev.stream).  Ownership:
 * struct device_buf is the caller's; device_buf_free() undoes
 * device_buf_alloc() and accepts a zeroed struct.
 */
#include <cuda.h>

/*
 * The driver functions we call, resolved by the names <cuda.h> maps them to
 * (cuMemAlloc -> cuMemAlloc_v2), exactly as linking would bind them.
 */
#define DEVICE_CUDA_FUNCTIONS(X)					\
	X(cuGetErrorName) X(cuGetErrorString) X(cuDriverGetVersion)	\
	X(cuCtxGetCurrent) X(cuCtxGetDevice) X(cuCtxSynchronize)	\
	X(cuCtxResetPersistingL2Cache)					\
	X(cuDeviceGetAttribute) X(cuDeviceGetName) X(cuDeviceGetPCIBusId) \
	X(cuDeviceTotalMem)						\
	X(cuStreamCreate) X(cuStreamDestroy) X(cuStreamSynchronize)	\
	X(cuEventCreate) X(cuEventDestroy) X(cuEventRecord)		\
	X(cuEventSynchronize) X(cuEventElapsedTime)			\
	X(cuModuleLoadData) X(cuModuleUnload) X(cuModuleGetFunction)	\
	X(cuFuncGetParamInfo) X(cuFuncGetAttribute) X(cuFuncSetAttribute) \
	X(cuLaunchKernel)						\
	X(cuMemAlloc) X(cuMemFree) X(cuMemGetInfo)			\
	X(cuMemcpyHtoDAsync) X(cuMemcpyDtoHAsync) X(cuMemsetD8Async)	\
	X(cuMemGetAllocationGranularity) X(cuMemAddressReserve)	\
	X(cuMemAddressFree) X(cuMemCreate) X(cuMemRelease) X(cuMemMap)	\
	X(cuMemUnmap) X(cuMemSetAccess)

struct device_cuda {
#define DEVICE_CUDA_MEMBER(f)	__typeof__(f) *f;
	DEVICE_CUDA_FUNCTIONS(DEVICE_CUDA_MEMBER)
#undef DEVICE_CUDA_MEMBER
};

/* Resolved driver entry points; valid when nvdev.ready. */
extern struct device_cuda nvcu;

/* Timing events: a start and an end per program. */
enum { DEVICE_EV_REF_START, DEVICE_EV_REF_END, DEVICE_EV_SOL_START, DEVICE_EV_SOL_END,
	DEVICE_NEVENTS };

struct device {
	bool ready;		/* a GPU worker: a context was current at prepare() */
	char *unready;		/* why not, for evaluate jobs (malloc'd) */
	CUdevice dev;
	CUcontext ctx;
	CUstream stream;	/* ours; every launch goes here */
	CUevent events[DEVICE_NEVENTS];
	char name[256];
	char pci_bus_id[32];
	char arch[16];		/* "sm_90" */
	int cc_major, cc_minor;
	int driver_version;	/* 13000 */
	int sm_count;
	int clock_khz;		/* nominal */
	int max_threads_per_block;
	int max_block[3], max_grid[3];
	int max_shared_per_block;	/* without opt-in */
	int max_shared_optin;
	int l2_bytes;
	size_t total_mem;
	bool vmm;		/* guarded allocations */
	char *vmm_why_not;	/* when !vmm (malloc'd) */
	size_t granularity;
	CUmodule helpers;
	CUfunction k_init, k_poison, k_compare, k_hash, k_flush, k_scrub, k_empty;
	double helpers_compile_ms;
	void *nvml_dev;		/* NULL: no SM clock sampling */
};

extern struct device nvdev;

/*
 * In the worker, before the sandbox.  In a CPU worker (libcuda not loaded)
 * or a GPU worker without a context, nvdev.ready stays false and 0 is
 * returned: compile jobs do not need the GPU.  `guard` false turns guarded
 * allocations off (config); `nvml` false turns SM clock sampling off.
 * -errno with *ret_cause when the GPU is there but unusable.
 */
int	device_prepare(bool guard, bool nvml, char **ret_cause);
/* The same with the driver's dlopen() handle given (tests pass a fake). */
int	device_attach(void *lib, bool guard, bool nvml, char **ret_cause);
void	device_fini(void);

/* "CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered" */
void	device_error_text(CUresult rc, char *buf, size_t len);
/* The error leaves the context unusable: the worker must be replaced. */
bool	device_error_sticky(CUresult rc);
/*
 * Convert a failed driver call at its call site: *ret_cause = "<what>:
 * CUDA_ERROR_...: text", returns -EIO (or -ENOMEM for out of memory,
 * -EINVAL for invalid values, -ENOENT for not found).
 */
int	device_fail(CUresult rc, char **ret_cause, const char *fmt, ...)
	    __attribute__((format(printf, 3, 4)));
int	device_errno(CUresult rc);

/*
 * One tensor's memory.  With the virtual memory API: a reservation of
 * `mapped` + one granule, only the first `mapped` bytes backed and
 * accessible, the tensor placed at the end of the backed part (256-byte
 * aligned), so a write past its end faults (CUDA_ERROR_ILLEGAL_ADDRESS)
 * instead of landing in a neighbour.  The whole backed part is zeroed.
 */
struct device_buf {
	CUdeviceptr ptr;	/* the tensor: 256-byte aligned */
	size_t bytes;
	CUdeviceptr base;	/* the reservation (or cuMemAlloc's pointer) */
	size_t mapped;		/* backed bytes from base */
	size_t reserved;	/* reserved bytes from base; 0: cuMemAlloc */
	CUmemGenericAllocationHandle handle;
};

/* 0, or -ENOMEM (out of device memory) / -EIO with *ret_cause. */
int	device_buf_alloc(size_t bytes, struct device_buf *ret_buf, char **ret_cause);
void	device_buf_free(struct device_buf *buf);

/* Stream-ordered work on nvdev.stream; each 0 or -errno with *ret_cause. */
int	device_fill(const struct device_buf *b, enum spec_dtype dtype, uint64_t numel,
	    const struct spec_init *init, uint64_t seed, char **ret_cause);
int	device_poison(const struct device_buf *b, enum spec_dtype dtype, uint64_t numel,
	    uint64_t seed, char **ret_cause);
int	device_zero(CUdeviceptr p, size_t bytes, char **ret_cause);
/* Compare got against expected into the struct kgym_compare_stats at `slot`. */
int	device_compare(const struct device_buf *got, const struct device_buf *expected,
	    enum spec_dtype dtype, uint64_t numel, double atol, double rtol, CUdeviceptr slot,
	    char **ret_cause);
/* Add a keyed hash of b's bytes to the uint64_t at `slot` (zero it first). */
int	device_hash(const struct device_buf *b, uint64_t salt, CUdeviceptr slot,
	    char **ret_cause);
/* Write every word of `flush` (2x L2) and drop persisting L2 lines. */
int	device_flush_l2(const struct device_buf *flush, uint32_t salt, char **ret_cause);
/* Zero every SM's shared memory: nothing of one program's blocks is left
 * for the next program to read. */
int	device_scrub_shared(char **ret_cause);
int	device_empty_launch(char **ret_cause);
int	device_upload(CUdeviceptr dst, const void *src, size_t bytes, char **ret_cause);
/* Blocking: waits for the stream first. */
int	device_download(void *dst, CUdeviceptr src, size_t bytes, char **ret_cause);
/*
 * Wait for the stream.  A failure is the first error of anything queued,
 * candidate kernels included: *ret_rc gets the CUresult for the caller to
 * classify (may be NULL).
 */
int	device_sync(CUresult *ret_rc, char **ret_cause);

/* The SM clock now, in MHz, from NVML: 0, or -ENOTSUP. */
int	device_sm_clock_mhz(unsigned int *ret_mhz);

/* The device's description for result.metadata. */
json_t	*device_json(void);

/* ==== end of device.c ==== */

/* ==== evaluate.c: the "evaluate" job, and its state (call.c, verdict.c,
 * bind.c, timing.c) ====
 *
 * evaluate_job() returns 0 and a result object (kgymd-protocol(7)) for every verdict
 * (validation, runtime and correctness failures included); -errno with
 * *ret_cause only for a malformed request or a failure of the worker itself.
 * struct evaluate lives for one job and owns everything it points to
 * except `request` and what device.c owns.
 */
int	evaluate_job(const json_t *request, json_t **ret_result, char **ret_cause);

/* One program (the reference or the solution) bound to the device. */
union evaluate_val {
	CUdeviceptr p;
	int32_t i32;
	int64_t i64;
	float f32;
	double f64;
};

struct evaluate_prog {
	const char *what;		/* "reference", "solution" */
	const char *path;		/* "problem.reference", "solution" (messages) */
	const struct spec_program *prog;
	const struct spec_plan *plan;	/* the current size set's (call_plan()) */
	const unsigned char *cubin;	/* borrowed for the job: bind_reload() */
	CUmodule mod;
	CUfunction *fn;			/* per step */
	unsigned int reloads;		/* bind_reload()s in this job */
	size_t **param_sizes;		/* per step, per argument: the kernel's parameter */
	union evaluate_val **vals;	/* per step, per argument */
	void ***params;			/* per step: pointers into vals, for cuLaunchKernel */
	struct device_buf *scratch;	/* plan->nscratch, the current size set's */
	int ev_start, ev_end;		/* DEVICE_EV_* */
	json_t *kernels;		/* per step: name, registers, shared memory */
};

struct evaluate_settings {
	unsigned int num_trials;	/* correctness trials, >= 5 */
	bool run_performance;
	double rel_precision;		/* stop when the median's CI is within this */
	unsigned int min_timing_trials, max_timing_trials;
	double max_timing_ms;
	unsigned int warmup;
	unsigned int reset_every;	/* the candidate's module is reloaded before
					 * one timed pair in this many, at secret
					 * random points (and before timing) */
};

/* The outcome of comparing the outputs (and inputs) after a call. */
struct evaluate_check {
	bool ok;
	uint64_t mismatches;		/* all outputs */
	double max_abs, max_rel;	/* all outputs */
	size_t bad_output;		/* the first output with a mismatch, when any */
	uint64_t first_bad;		/* its first bad element */
	bool never_written;		/* that element still holds the poison */
	char expected[64], got[64];	/* that element, printed */
	bool input_changed;
	size_t changed_input;
};

struct evaluate {
	const json_t *request;
	bool simple;			/* mode kernel_simple */
	uint64_t seed;			/* secret, from the parent */
	struct evaluate_settings set;
	const json_t *reference_timing;	/* cached, or NULL */
	struct spec_limits limits;	/* the workflow's, handed on (0: spec.h's) */
	struct spec *spec;
	/*
	 * Size sets (spec.h): sevs[k] is set k evaluated; sev, the programs'
	 * plans and the tensor buffers are those of the current set size_set
	 * (call_use_set()).  Correctness trial t uses set t % nsets,
	 * test cases and timing the first.
	 */
	struct spec_eval **sevs;
	size_t nsets;
	size_t size_set;
	bool set_ready;			/* the buffers exist and are bound for size_set */
	struct spec_eval *sev;
	struct evaluate_prog ref, sol;
	bool has_ref;			/* the reference runs: random trials, checked
					 * timed calls (kernel_simple may have test
					 * cases beside it, or instead of it) */
	struct device_buf *in, *out, *expect;	/* the current size set's tensors */
	unsigned char **ref_host;	/* per output: the expected values */
	struct device_buf slots;	/* kgym_compare_stats per output, then a hash per input */
	uint64_t *in_hash;		/* per input: before the candidate's call */
	struct evaluate_prog *running;	/* whose code may still be on the GPU */
	unsigned int calls;		/* calls prepared so far */
	uint64_t call_seed;		/* the latest call's inputs (and hash salts) */
	size_t call_init;		/* ... and their init number */
	uint64_t poison_seed;		/* the latest call's poison */
	unsigned char **case_in;	/* test cases: this call's inputs, else NULL */
	unsigned char **case_out;	/* ... and its expected outputs (else ref_host) */
	bool hidden_trial;		/* a random trial of a task with test cases */
	size_t ncases;			/* visible test cases (kernel_simple) */
	unsigned int random_trials;	/* random trials against the reference */
	/* The verdict, once reached: nothing more runs. */
	const char *code;		/* error_code */
	char *message;
	bool failed;			/* status "failed" rather than "completed" */
	bool recycle;			/* a sticky CUDA error: replace the worker */
	json_t *hack;			/* metadata.hack */
	const char *cubin_missing;	/* "reference", "solution": its cache key
					 * named no file (metadata.cubin_missing) */
	json_t *trials;			/* correctness_trials */
	unsigned int trials_passed;
	unsigned int timed_checks;	/* timing-phase candidate calls checked (all) */
	struct detect *det;		/* [detect] detect.c's state for this job, or NULL */
};

/* ==== bind.c: a program's cubin against its plan and the device ====
 *
 * Everything that only the device can check, before anything runs: the
 * kernels exist, their parameters match the plan's arguments in number and
 * size (cuFuncGetParamInfo), grid, block and shared memory are within the
 * device's and the kernel's limits.  A problem is a VALIDATION_ERROR
 * verdict on ev naming the field.  bind_release() frees what bind_program()
 * made and accepts a zeroed program.
 */
/* Load the cubin, find the kernels, and check every size set's plan. */
int	bind_program(struct evaluate *ev, struct evaluate_prog *p, const unsigned char *cubin,
	    char **ret_cause);
/*
 * Point the arguments at the current size set: integer values from
 * p->plan, tensor arguments at the buffers (after they are allocated).
 */
void	bind_tensors(struct evaluate *ev, struct evaluate_prog *p);
/*
 * Load p's cubin again and point its steps at the new module's kernels
 * (with the same dynamic shared memory opt-in), then unload the old one:
 * every __device__ variable of p is back to its initial value, so nothing
 * a call left there reaches a later call.  0, or -errno with *ret_cause
 * (a CUDA failure; the old module is kept).
 */
int	bind_reload(struct evaluate *ev, struct evaluate_prog *p, char **ret_cause);
/*
 * Point p's output arguments at `outs` (one buffer per output of the
 * current size set): the timing phase has the reference write into
 * ev->expect, and puts it back on ev->out after.
 */
void	bind_outputs(struct evaluate *ev, struct evaluate_prog *p, const struct device_buf *outs);
void	bind_release(struct evaluate_prog *p);

/* ==== end of bind.c ==== */

/* ==== call.c: the call layer (buffers of a size set, one call) ====
 *
 * Ownership: the buffers are ev's (freed by call_free_set()); nothing
 * returned is the caller's.
 */

/* Program p's plan for size set k. */
const struct spec_plan *call_plan(const struct evaluate *ev, const struct evaluate_prog *p,
	    size_t k);
/*
 * For messages about size set k: " (size set problem.sizes[1]: N=1048573)",
 * or "" when the problem has a single set (its messages are unchanged).
 */
void	call_set_note(const struct evaluate *ev, size_t k, char *buf, size_t len);
/*
 * Make size set k current: the previous set's tensors freed, k's allocated
 * (each in its own guarded buffer, so the guard sits right after the
 * tensor's real size) and bound.  0 (out of device memory is a verdict on
 * ev), or -errno with *ret_cause.
 */
int	call_use_set(struct evaluate *ev, size_t k, char **ret_cause);
/* What does not depend on the size set: comparison slots, hashes,
 * pointers.  0, or -errno with *ret_cause. */
int	call_alloc(struct evaluate *ev, char **ret_cause);
/* Free the current size set's buffers (also what a failed
 * call_use_set() made); a job with none is a no-op. */
void	call_free_set(struct evaluate *ev);
/*
 * Get ready for one call (of either program) on inputs from `seed`: inputs generated
 * (init number `init_index`), outputs poisoned, every scratch buffer zeroed,
 * shared memory scrubbed; with `hash`, the inputs' hashes taken (blocking).
 */
int	call_prepare(struct evaluate *ev, uint64_t seed, size_t init_index, bool hash,
	    char **ret_cause);
/*
 * After the candidate's call: the latest call's inputs regenerated (same
 * seed and init), ev->expect poisoned, scratch zeroed, shared memory
 * scrubbed -- the reference's call, writing into ev->expect, comes next.
 * Queued, no wait.
 */
int	call_prepare_reference(struct evaluate *ev, char **ret_cause);
/* Queue a keyed hash of each input (the latest call's salts) into the
 * uint64_t at slots + 8 * i (zeroed first). */
int	call_hash_inputs(struct evaluate *ev, CUdeviceptr slots, char **ret_cause);
/* Queue p's launch plan on the stream (sets ev->running). */
int	call_launch(struct evaluate *ev, struct evaluate_prog *p, char **ret_cause);
/* Copy the outputs (the reference's, just computed) to ev->ref_host. */
int	call_save_reference(struct evaluate *ev, char **ret_cause);

/* ==== end of call.c ==== */

/* ==== verdict.c: the verdict layer (checks, verdicts, the result) ====
 *
 * Ownership: a verdict's message is ev's; verdict_result() returns a new
 * reference (NULL when out of memory).
 */

/* Record the verdict (the first one wins); printf-style message. */
void	verdict_record(struct evaluate *ev, bool failed, const char *code, const char *fmt, ...)
	    __attribute__((format(printf, 4, 5)));
/*
 * A CUDA-level failure (`cause`, consumed) while ev->running's code may
 * have been on the GPU: the verdict names who failed, and a sticky error
 * marks the worker for recycling.
 */
void	verdict_cuda_failure(struct evaluate *ev, const char *during, char *cause);
/* Compare the outputs with ev->ref_host and the inputs with ev->in_hash;
 * leaves no expected value on the device. */
int	verdict_check(struct evaluate *ev, struct evaluate_check *ret, char **ret_cause);
/*
 * The check from comparison slots and input hashes already on the host:
 * cmp per output, hash (after the call) against hash_before, per input.
 * For a mismatch the wrong element is read from ev->out, its expected
 * value from `expected` on the device (NULL: ev->ref_host or the test
 * case).  0, or -errno with *ret_cause (a CUDA failure).
 */
int	verdict_check_read(struct evaluate *ev, const struct kgym_compare_stats *cmp,
	    const uint64_t *hash, const uint64_t *hash_before, const struct device_buf *expected,
	    struct evaluate_check *ret, char **ret_cause);
/* "output 'out' is wrong at index ..." for a failed check. */
void	verdict_check_message(struct evaluate *ev, const struct evaluate_check *c,
	    char *buf, size_t len);
/* A failed check becomes the verdict: REWARD_HACK for an input changed
 * with right outputs, else CORRECTNESS_ERROR; `when` names the call. */
void	verdict_check_failed(struct evaluate *ev, const struct evaluate_check *c,
	    const char *when);
/* Append correctness trial t's row (its seed, init, size set, outcome) to
 * ev->trials. */
void	verdict_trial_json(struct evaluate *ev, size_t t, size_t init, uint64_t seed,
	    const struct evaluate_check *c);
/* The job's result object from its verdict, trials and `timing` (merged
 * in, may be NULL). */
json_t	*verdict_result(struct evaluate *ev, json_t *timing);

/* ==== end of verdict.c ==== */

/* ==== timing.c: the timed calls ==== */

/*
 * Time the reference and the candidate (kgymd-protocol(7), RESULTS), adding "timing",
 * kernel_runtime, reference_runtime and speedup to `result` -- or recording
 * a verdict when a timed call fails or its outputs are wrong.  0, or -errno
 * with *ret_cause when the host cannot give the exclusive GPU lock.
 */
int	timing_run(struct evaluate *ev, json_t *result, char **ret_cause);

/* ==== end of timing.c ==== */

/* ==== profdata.c: attributing and adding up kernel activity (no CUDA) ====
 *
 * What CUPTI reports (profile.c translates its records) turned into the
 * job's per-call accounting.  Attribution is by identity, never by name:
 * each launch's correlation id is tied, when we make the launch, to the
 * CUfunction we passed, and each CUfunction to its module (ours, the
 * reference's, the solution's); a kernel record is then known by its
 * correlation id.  A kernel record no launch of ours explains is "unknown"
 * and is compared with the calls' time windows.  Ownership: struct
 * profdata owns everything in it; names in records are borrowed for the
 * call that hands them over.  profdata_calls() lends its array until the
 * next call that adds a call (profdata_call_begin) or profdata_free().
 */

/* Whose kernel: by the module of the CUfunction that was launched. */
enum profile_owner {
	PROFILE_OURS,		/* kgymd's helper kernels (kg_*) */
	PROFILE_REFERENCE,	/* the problem's reference module */
	PROFILE_SOLUTION,	/* the candidate's module */
	PROFILE_UNKNOWN,	/* launched by no cuLaunchKernel of ours */
};

/* What a measured call was for (set by timing.c before the call). */
enum profile_purpose {
	PROFILE_PURPOSE_OTHER,		/* warm-up, the extra checked call */
	PROFILE_PURPOSE_TIMING,		/* the timing loop (counted once marked timed) */
	PROFILE_PURPOSE_PROFILE,	/* profiled after timing (profile_during_timing = no) */
	PROFILE_PURPOSE_OVERHEAD,	/* CUPTI's cost: the same call with and without it */
};

/*
 * One call of one program (the whole launch plan between the timing
 * events), as the detectors see it.  Times of the program's kernels are
 * CUPTI's (GPU timestamps on CUPTI's clock, ns).  The window of a call is
 * first_start_ns .. last_end_ns of the program's kernels on our stream.
 */
struct profile_call_summary {
	enum profile_owner program;	/* PROFILE_REFERENCE or PROFILE_SOLUTION */
	enum profile_purpose purpose;
	bool profiled;			/* CUPTI was collecting during the call */
	bool timed;			/* its events time is in the timing series */
	bool complete;			/* every launch of the plan has its record */
	bool counted;			/* in result.profile and gpu_time_ms */
	double events_ms;		/* CUDA events around the plan; NAN: none */
	double host_ms;			/* host clock from queuing the start event (the
					 * L2 flush queued before may still run; a timed
					 * candidate call's NVML clock query is inside) to
					 * the end event's synchronisation */
	double kernel_us;		/* sum of the program's kernel durations */
	double span_us;			/* first start .. last end of the program's kernels */
	unsigned int launches;		/* the program's launches in the call */
	unsigned int kernels;		/* their kernel records */
	/* For the detectors (kgymd-protocol(7), "Reward hacks": hidden work): */
	unsigned int foreign_stream_kernels;	/* a kernel on another stream or context
						 * overlapping the window (or one of the
						 * program's own not on our stream) */
	unsigned int after_end_kernels;	/* one that started in the call and ended
					 * after the window, i.e. after the end event */
	unsigned int unattributed_kernels;	/* on our stream, in the window, not ours */
	unsigned int copies_during;	/* memcpy/memset activity overlapping the window */
	uint64_t first_start_ns, last_end_ns;	/* the window (0: no record) */
	uint64_t host_begin_ns, host_end_ns;	/* CUPTI's clock, on the host */
};

/* A kernel record as profile.c hands it over. */
struct profdata_kernel {
	uint32_t correlation, context, stream;
	uint64_t start, end;		/* ns; both 0: CUPTI could not time it */
	int32_t grid[3], block[3];
	int32_t static_shared, dynamic_shared;
	uint32_t registers;
	const char *name;		/* borrowed; NULL: unknown */
};

/* A memcpy or memset record. */
struct profdata_copy {
	bool memset;
	uint32_t context, stream;
	uint64_t start, end, bytes;
};

struct profdata;

/* Our context and stream as CUPTI numbers them.  NULL: out of memory. */
struct profdata *profdata_new(uint32_t context, uint32_t stream);
void	profdata_free(struct profdata *pd);
/* fn (a CUfunction) belongs to owner's module.  0 or -ENOMEM. */
int	profdata_add_function(struct profdata *pd, const void *fn, enum profile_owner owner);
/* fn is same_as from a later load of its module: the same kernel, counted
 * and named as same_as (nothing when same_as is unknown).  0 or -ENOMEM. */
int	profdata_add_alias(struct profdata *pd, const void *fn, const void *same_as);
/*
 * A call of `program` begins (CUPTI collecting or not); calls that ended
 * before and have all their records are settled first.  0 or -ENOMEM.
 */
int	profdata_call_begin(struct profdata *pd, enum profile_owner program,
	    enum profile_purpose purpose, bool profiled, uint64_t host_ns);
/* The call in progress ended: its events time and host wall time. */
void	profdata_call_end(struct profdata *pd, double events_ms, double host_ms,
	    uint64_t host_ns);
/* The times of the latest ended call of `program`, known later than its
 * end (the round's results read back): events, host wall time, its end on
 * the host's CUPTI clock. */
void	profdata_call_times(struct profdata *pd, enum profile_owner program, double events_ms,
	    double host_ms, uint64_t host_ns);
/* The latest ended call of `program` went into the timing series. */
void	profdata_mark_timed(struct profdata *pd, enum profile_owner program);
/* A cuLaunchKernel of fn (CUPTI's API callback); failed: it returned an error. */
int	profdata_launch(struct profdata *pd, uint32_t correlation, const void *fn);
void	profdata_launch_failed(struct profdata *pd, uint32_t correlation);
/* Records, in any order, whenever CUPTI delivers them.  0 or -ENOMEM. */
int	profdata_kernel(struct profdata *pd, const struct profdata_kernel *k);
int	profdata_copy(struct profdata *pd, const struct profdata_copy *c);
void	profdata_dropped(struct profdata *pd, uint64_t n);
/* Has the latest call a record for each of its program's launches? */
bool	profdata_call_complete(const struct profdata *pd);
/* ... and each of the latest n calls? */
bool	profdata_calls_complete(const struct profdata *pd, size_t n);
/* Settle every ended call; `final`: those still missing records too. */
void	profdata_settle(struct profdata *pd, bool final);
/* Every call so far (settled or not); *ret_n of them. */
const struct profile_call_summary *profdata_calls(const struct profdata *pd, size_t *ret_n);
/*
 * Add what the settled calls show to a result (kgymd-protocol(7)): "profile",
 * timing.{kernel,reference}.gpu_time_ms (when result has "timing"), and
 * metadata's KernelGYM keys, events_vs_cupti, cupti_overhead and "cupti"
 * (the detectors' counts).  0 or -ENOMEM.
 */
int	profdata_result(const struct profdata *pd, json_t *result);
struct detect_profile;
/* detect.c's view (struct detect_profile) of the settled calls: 0, or
 * -ENODATA when no timed (or profiling) call of the solution was counted. */
int	profdata_detect(const struct profdata *pd, struct detect_profile *ret);

/* ==== end of profdata.c ==== */

/* ==== profile.c: CUPTI in the GPU worker ====
 *
 * CUPTI is the cupti toolkit's (kgym/cupti.h), started in prepare(),
 * before the sandbox, with a sink that feeds profdata; a worker without
 * the toolkit or libcupti (or where it fails its self-test) reports
 * metadata.profiling = "unavailable: <why>" and times with events alone.
 * Every function here is a no-op when profiling is not available, so the
 * hooks in timing.c, evaluate.c and verdict.c need no conditions.  Ownership: the
 * profile of the current job lives until the next profile_job_reset();
 * profile_calls() lends it.
 *
 * [plugin.nvrtc] keys:
 *   profile               = yes|no  CUPTI at all (default yes)
 *   profile_during_timing = yes|no  collect during the timed calls (default
 *                           yes), or time without CUPTI and profile
 *                           profile_calls more calls after timing
 *   profile_calls         = N       calls after timing (default 10): with
 *                           and without CUPTI for metadata.cupti_overhead,
 *                           and the profiled calls when not during timing
 *   cupti_library         = PATH    (default libcupti.so.<CUDA major>)
 */

/* In prepare(), after device_prepare(), when nvdev.ready. */
void	profile_prepare(void);
void	profile_fini(void);
/* metadata.profiling: "cupti", "unavailable: ...", "off: ...". */
const char *profile_status(void);
bool	profile_available(void);
bool	profile_during_timing(void);
/* How many extra calls timing.c makes after timing (0: none). */
unsigned int profile_extra_calls(void);

/* A new evaluate job: forget the previous one's profile. */
void	profile_job_reset(void);
/* Timing begins: register the job's functions by module; collect. */
void	profile_job_begin(const struct evaluate *ev);
/* A program's module was loaded again (bind_reload): its new functions
 * (p->fn) stand for the old ones, step by step. */
void	profile_reloaded(const struct evaluate_prog *p, const CUfunction *old_fn);
/* Timing is over: everything flushed and settled, collection stopped. */
void	profile_job_end(void);
/* Around each call of timing.c (the purpose holds until changed). */
void	profile_set_purpose(enum profile_purpose purpose);
void	profile_call_begin(enum profile_owner program);
/* The call's plan and end event are queued: launches from here are not
 * its own.  Its times come later, with profile_call_done(). */
void	profile_call_queued(void);
/* The latest queued call of `program` is complete: its events time, and
 * its host time from profile_call_begin until now less `less_ms` (GPU
 * work of the round queued after it that the host waited for too). */
void	profile_call_done(enum profile_owner program, double events_ms, double less_ms);
/* After the round's profile_call_done()s: CUPTI's records flushed until
 * the latest ncalls calls have all theirs. */
void	profile_round_flush(size_t ncalls);
void	profile_mark_timed(enum profile_owner program);
/* Collection on or off between calls (CUPTI's cost); a failure turns
 * profiling off for the job and is logged. */
void	profile_collect(bool on);
/* The job's calls, after profile_job_end(); NULL and 0 when none. */
const struct profile_call_summary *profile_calls(size_t *ret_n);
/* profdata_detect() of the job, after profile_job_end(): for
 * detect_timing(); -ENODATA when nothing was profiled. */
int	profile_detect_summary(struct detect_profile *ret);
/* metadata.profiling and, when there is a profile, profdata_result(). */
void	profile_result(json_t *result);

/* ==== end of profile.c ==== */

/* ==== detect.c: reward-hack and problem detectors ====
 *
 * Checks beyond "the outputs match": a reported time below what writing
 * the outputs needs (roofline), kernel accounting from CUPTI (decoys, work
 * outside the timed stream or after the end event, events vs CUPTI vs the
 * host's clock), and the problem's own health (degenerate outputs, a
 * non-deterministic reference), plus a repeat of the candidate's first
 * trial.  Hack verdicts go through verdict_record() ("REWARD_HACK",
 * ev->hack = {kind, detail}); problem flags and detector statuses go into
 * result.metadata (detect_result()).  Ownership: detect_begin() makes
 * ev->det, detect_end() frees it (NULL is a no-op); the rest borrow.
 */
struct detect;

/* Thresholds, from [plugin.nvrtc] (detect_settings_load()). */
struct detect_settings {
	bool problem_checks;	/* problem_checks: degenerate outputs, reference repeat */
	bool candidate_repeat;	/* candidate_repeat: the first trial run twice */
	bool roofline;		/* roofline */
	double roofline_gbps;	/* roofline_bandwidth_gbps: 0 = nominal/measured */
	double roofline_safety;	/* roofline_safety: floor = safety * bytes / bandwidth */
	double decoy_min_coverage;	/* decoy_min_coverage: custom share of kernel time */
	double cross_rel;	/* timing_cross_tolerance: CUPTI may exceed events by this */
	double cross_abs_ms;	/* timing_cross_slack_ms: ... plus this */
	double wall_factor;	/* wall_clock_factor: wall > events * f + slack is noted */
	double wall_abs_ms;	/* wall_clock_slack_ms */
};

void	detect_settings_default(struct detect_settings *s);
/* The defaults overridden by the [plugin.nvrtc] keys named above. */
void	detect_settings_load(struct detect_settings *s);

/*
 * What the CUPTI layer saw of the candidate's timed calls, filled by
 * profdata_detect() (profile_detect_summary()).  NULL or calls == 0:
 * nothing (no CUPTI), and the detectors that need it say they were skipped.
 */
struct detect_profile {
	size_t calls;			/* timed candidate calls profiled */
	double kernel_ms_median;	/* per call: summed durations of its kernels */
	double custom_ms, total_ms;	/* all calls: the solution's own kernels, all kernels */
	unsigned int custom_kernels;	/* distinct kernels of the solution's module that exist */
	uint64_t foreign_stream_kernels;	/* kernels on a stream not ours, during a call */
	uint64_t after_end_kernels;	/* kernels that ended after the call's end event */
	double wall_ms_median;		/* host wall clock per call; 0: unknown */
};

/* Per job: 0, or -ENOMEM with *ret_cause. */
int	detect_begin(struct evaluate *ev, char **ret_cause);
void	detect_end(struct evaluate *ev);
/*
 * After the reference's call of correctness trial `trial` (inputs from
 * `seed`), its outputs on the device and in ev->ref_host: degenerate-output
 * tracking, and on the first trial a second reference call on the same
 * inputs.  CUDA failures are verdicts on ev; -errno only for the worker.
 */
int	detect_reference_trial(struct evaluate *ev, size_t trial, uint64_t seed, char **ret_cause);
/* After the candidate passed trial `trial`: a second call on the same inputs. */
int	detect_candidate_trial(struct evaluate *ev, size_t trial, uint64_t seed, char **ret_cause);
/*
 * After timing_run() put "timing" and kernel_runtime into `timed`: the
 * roofline and, with `prof`, the CUPTI detectors.  A hack is a verdict.
 */
int	detect_timing(struct evaluate *ev, const json_t *timed, const struct detect_profile *prof,
	    char **ret_cause);
/* Problem flags, detector statuses, decoy_kernel into the result. */
void	detect_result(struct evaluate *ev, json_t *result);

/* The pieces, pure (tested without a device). */
/* DRAM time the outputs need beyond what the L2 can hold, in ms; 0 when none. */
double	detect_roofline_floor_ms(uint64_t out_bytes, uint64_t l2_bytes, double gbps, double safety);
/* Peak DRAM bandwidth from the memory clock (kHz, double data rate) and bus width. */
double	detect_nominal_gbps(int mem_clock_khz, int bus_bits);
/* Every element within tolerance of one value (early exit); numel >= 2. */
bool	detect_nearly_constant(enum spec_dtype dtype, const void *data, uint64_t numel,
	    double atol, double rtol);
/*
 * The CUPTI detectors: the hack kind ("hidden_work", "timing_mismatch",
 * "decoy") or NULL, with `detail`; each detector's status into `statuses`
 * (may be NULL); *ret_wall_note when the host clock is far above events.
 */
const char *detect_judge_profile(const struct detect_settings *s, double events_ms,
	    const struct detect_profile *p, json_t *statuses, bool *ret_wall_note, char *detail,
	    size_t len);

/* ==== end of detect.c ==== */

#endif /* KGYM_NVRTC_INTERNAL_H */
