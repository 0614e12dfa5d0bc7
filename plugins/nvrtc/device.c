/*
 * nvdev.c -- the nvrtc backend's hold on the worker's GPU.
 *
 * kgymd-worker initialises CUDA, retains the primary context and makes it
 * current before it loads backends (gpuinfo.c).  device_prepare(), called
 * from the plugin's prepare() while the sandbox is not yet in place, finds
 * that context, reads the device's limits, creates the one stream and the
 * timing events every job uses, and compiles and loads kgymd's own helper
 * kernels (helpers.c).  After that, inside the sandbox, jobs only allocate,
 * launch, copy and synchronise.
 *
 * libcuda is dlopen()ed rather than linked: the same plugin serves compile
 * jobs in CPU workers and on machines without a driver, where linking
 * libcuda.so.1 would keep the plugin from loading at all.  A CPU worker
 * never loads libcuda (RTLD_NOLOAD tells us which worker we are in).
 *
 * Every tensor gets its own allocation (device_buf_alloc).  Where the
 * virtual memory API is supported, the allocation is a reservation one
 * granule (2 MiB) larger than what is backed, the tensor placed flush
 * against the unbacked guard: a kernel writing past the end of a tensor
 * faults with CUDA_ERROR_ILLEGAL_ADDRESS instead of silently changing its
 * neighbour, or the expected outputs.
 *
 * CUDA errors are converted where they happen into -errno plus a message
 * naming the call and the CUDA error (device_fail).
 */
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nvrtc_internal.h"

#define DEVICE_STR2(x)	#x
#define DEVICE_STR(x)	DEVICE_STR2(x)

/* Threads per block of the helper kernels; blocks per SM at most. */
#define DEVICE_BLOCK		256
#define DEVICE_BLOCKS_PER_SM	8
/* Tensors start 256-byte aligned, as cudaMalloc promises. */
#define DEVICE_ALIGN		256

struct device_cuda nvcu;
struct device nvdev;

/* NVML, for the SM clock; our own prototypes: no nvml.h is needed. */
#define DEVICE_NVML_CLOCK_SM	1
static int (*nvml_get_clock)(void *dev, int type, unsigned int *mhz);

static uint64_t
device_cdiv(uint64_t a, uint64_t b)
{
	return a / b + (a % b != 0);
}

static double
device_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* ------------------------------------------------------------ errors */

void
device_error_text(CUresult rc, char *buf, size_t len)
{
	const char *name = NULL, *text = NULL;

	if (nvcu.cuGetErrorName == NULL || nvcu.cuGetErrorName(rc, &name) != CUDA_SUCCESS)
		name = NULL;
	if (nvcu.cuGetErrorString == NULL || nvcu.cuGetErrorString(rc, &text) != CUDA_SUCCESS)
		text = NULL;
	if (name != NULL && text != NULL)
		snprintf(buf, len, "%s: %s", name, text);
	else
		snprintf(buf, len, "CUDA error %d", (int)rc);
}

bool
device_error_sticky(CUresult rc)
{
	switch (rc) {
	case CUDA_ERROR_ILLEGAL_ADDRESS:
	case CUDA_ERROR_LAUNCH_TIMEOUT:
	case CUDA_ERROR_CONTEXT_IS_DESTROYED:
	case CUDA_ERROR_ASSERT:
	case CUDA_ERROR_HARDWARE_STACK_ERROR:
	case CUDA_ERROR_ILLEGAL_INSTRUCTION:
	case CUDA_ERROR_MISALIGNED_ADDRESS:
	case CUDA_ERROR_INVALID_ADDRESS_SPACE:
	case CUDA_ERROR_INVALID_PC:
	case CUDA_ERROR_LAUNCH_FAILED:
	case CUDA_ERROR_TENSOR_MEMORY_LEAK:
	case CUDA_ERROR_ECC_UNCORRECTABLE:
	case CUDA_ERROR_NVLINK_UNCORRECTABLE:
	case CUDA_ERROR_CONTAINED:
	case CUDA_ERROR_UNKNOWN:
		return true;
	default:
		return false;
	}
}

int
device_errno(CUresult rc)
{
	switch (rc) {
	case CUDA_SUCCESS:
		return 0;
	case CUDA_ERROR_OUT_OF_MEMORY:
		return -ENOMEM;
	case CUDA_ERROR_INVALID_VALUE:
		return -EINVAL;
	case CUDA_ERROR_NOT_FOUND:
		return -ENOENT;
	case CUDA_ERROR_NOT_SUPPORTED:
		return -EOPNOTSUPP;
	default:
		return -EIO;
	}
}

int
device_fail(CUresult rc, char **ret_cause, const char *fmt, ...)
{
	char what[512], err[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof what, fmt, ap);
	va_end(ap);
	device_error_text(rc, err, sizeof err);
	if (ret_cause != NULL && asprintf(ret_cause, "%s: %s", what, err) < 0)
		*ret_cause = NULL;
	return device_errno(rc);
}

/* ----------------------------------------------------------- prepare */

static int
device_load_symbols(void *lib, char **ret_cause)
{
#define DEVICE_LOAD(f)							\
	if ((nvcu.f = (__typeof__(nvcu.f))dlsym(lib, DEVICE_STR(f))) == NULL)	\
		return nvrtc_fail(ret_cause, -ENOSYS, "the CUDA driver has no %s "	\
		    "(older than the CUDA %d headers kgymd was built with?)",	\
		    DEVICE_STR(f), CUDA_VERSION);
	DEVICE_CUDA_FUNCTIONS(DEVICE_LOAD)
#undef DEVICE_LOAD
	return 0;
}

static int
device_attr(CUdevice_attribute attr, int *ret, char **ret_cause)
{
	CUresult rc;

	if ((rc = nvcu.cuDeviceGetAttribute(ret, attr, nvdev.dev)) != CUDA_SUCCESS)
		return device_fail(rc, ret_cause, "cuDeviceGetAttribute(%d)", (int)attr);
	return 0;
}

static int
device_read_limits(char **ret_cause)
{
	static const struct {
		CUdevice_attribute attr;
		size_t off;
	} attrs[] = {
#define A(a, m) { a, offsetof(struct device, m) }
		A(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, cc_major),
		A(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, cc_minor),
		A(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, sm_count),
		A(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, max_threads_per_block),
		A(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X, max_block[0]),
		A(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y, max_block[1]),
		A(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z, max_block[2]),
		A(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X, max_grid[0]),
		A(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y, max_grid[1]),
		A(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z, max_grid[2]),
		A(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, max_shared_per_block),
		A(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, max_shared_optin),
		A(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, l2_bytes),
#undef A
	};
	size_t i;
	int error;

	for (i = 0; i < sizeof attrs / sizeof attrs[0]; i++)
		if ((error = device_attr(attrs[i].attr,
		    (int *)(void *)((char *)&nvdev + attrs[i].off), ret_cause)) < 0)
			return error;
	/* Informational only, and deprecated since CUDA 13: 0 when refused. */
	if (nvcu.cuDeviceGetAttribute(&nvdev.clock_khz, CU_DEVICE_ATTRIBUTE_CLOCK_RATE,
	    nvdev.dev) != CUDA_SUCCESS)
		nvdev.clock_khz = 0;
	snprintf(nvdev.arch, sizeof nvdev.arch, "sm_%d%d", nvdev.cc_major, nvdev.cc_minor);
	return 0;
}

static void
device_setup_vmm(bool guard)
{
	CUmemAllocationProp prop;
	char err[256];
	CUresult rc;
	int supported = 0;

	if (!guard) {
		nvdev.vmm_why_not = strdup("guarded allocations are off ([plugin.nvrtc] guard = no)");
		return;
	}
	if (nvcu.cuDeviceGetAttribute(&supported,
	    CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, nvdev.dev) != CUDA_SUCCESS ||
	    !supported) {
		nvdev.vmm_why_not = strdup("the device does not support the virtual memory API");
		return;
	}
	memset(&prop, 0, sizeof prop);
	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	prop.location.id = nvdev.dev;
	if ((rc = nvcu.cuMemGetAllocationGranularity(&nvdev.granularity, &prop,
	    CU_MEM_ALLOC_GRANULARITY_MINIMUM)) != CUDA_SUCCESS || nvdev.granularity == 0) {
		device_error_text(rc, err, sizeof err);
		if (asprintf(&nvdev.vmm_why_not, "cuMemGetAllocationGranularity: %s", err) < 0)
			nvdev.vmm_why_not = NULL;
		return;
	}
	nvdev.vmm = true;
}

/*
 * NVML is opened before the sandbox (nvmlInit opens device nodes); reading
 * a clock later is an ioctl on a descriptor it already has.  Optional:
 * without it the result reports the nominal clock.
 */
static void
device_setup_nvml(void)
{
	int (*init)(void);
	int (*by_bus)(const char *, void **);
	void *lib, *dev = NULL;

	if ((lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL)) == NULL) {
		nvrtc_log(KGYM_LOG_INFO, "no NVML (%s): the SM clock is not sampled", dlerror());
		return;
	}
	init = (__typeof__(init))dlsym(lib, "nvmlInit_v2");
	by_bus = (__typeof__(by_bus))dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2");
	nvml_get_clock = (__typeof__(nvml_get_clock))dlsym(lib, "nvmlDeviceGetClockInfo");
	if (init == NULL || by_bus == NULL || nvml_get_clock == NULL || init() != 0 ||
	    by_bus(nvdev.pci_bus_id, &dev) != 0 || dev == NULL) {
		nvrtc_log(KGYM_LOG_WARN, "NVML does not know %s: the SM clock is not sampled",
		    nvdev.pci_bus_id);
		nvml_get_clock = NULL;
		return;
	}
	nvdev.nvml_dev = dev;
}

static int
device_load_helpers(char **ret_cause)
{
	static const struct {
		const char *name;
		size_t off;
	} fns[] = {
#define F(n, m) { n, offsetof(struct device, m) }
		F("kg_init", k_init), F("kg_poison", k_poison), F("kg_compare", k_compare),
		F("kg_hash", k_hash), F("kg_flush", k_flush), F("kg_scrub", k_scrub),
		F("kg_empty", k_empty),
#undef F
	};
	unsigned char *cubin = NULL;
	double t0 = device_now_ms();
	size_t size, i;
	CUresult rc;
	int error;

	if ((error = helpers_compile(nvdev.arch, &cubin, &size, ret_cause)) < 0)
		return error;
	rc = nvcu.cuModuleLoadData(&nvdev.helpers, cubin);
	free(cubin);
	if (rc != CUDA_SUCCESS)
		return device_fail(rc, ret_cause, "loading the helper kernels");
	for (i = 0; i < sizeof fns / sizeof fns[0]; i++)
		if ((rc = nvcu.cuModuleGetFunction((CUfunction *)(void *)((char *)&nvdev +
		    fns[i].off), nvdev.helpers, fns[i].name)) != CUDA_SUCCESS)
			return device_fail(rc, ret_cause, "helper kernel %s", fns[i].name);
	/* kg_scrub fills a block's whole shared memory, beyond the default 48K. */
	if ((rc = nvcu.cuFuncSetAttribute(nvdev.k_scrub,
	    CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, nvdev.max_shared_optin)) !=
	    CUDA_SUCCESS)
		return device_fail(rc, ret_cause, "kg_scrub: %d bytes of shared memory",
		    nvdev.max_shared_optin);
	nvdev.helpers_compile_ms = device_now_ms() - t0;
	return 0;
}

int
device_prepare(bool guard, bool nvml, char **ret_cause)
{
	void *lib;

	if ((lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD)) == NULL) {
		/* A CPU worker (or a GPU worker whose driver did not load). */
		nvdev.unready = strdup("this worker has no GPU (libcuda is not loaded)");
		return 0;
	}
	return device_attach(lib, guard, nvml, ret_cause);
}

int
device_attach(void *lib, bool guard, bool nvml, char **ret_cause)
{
	CUresult rc;
	size_t i;
	int error;

	if ((error = device_load_symbols(lib, ret_cause)) < 0)
		return error;
	if ((rc = nvcu.cuCtxGetCurrent(&nvdev.ctx)) != CUDA_SUCCESS || nvdev.ctx == NULL) {
		nvdev.unready = strdup("no current CUDA context in this worker "
		    "(its GPU initialisation failed: see the worker's log)");
		return 0;
	}
	if ((rc = nvcu.cuCtxGetDevice(&nvdev.dev)) != CUDA_SUCCESS)
		return device_fail(rc, ret_cause, "cuCtxGetDevice");
	if ((rc = nvcu.cuDeviceGetName(nvdev.name, sizeof nvdev.name, nvdev.dev)) !=
	    CUDA_SUCCESS)
		return device_fail(rc, ret_cause, "cuDeviceGetName");
	if ((rc = nvcu.cuDeviceGetPCIBusId(nvdev.pci_bus_id, sizeof nvdev.pci_bus_id,
	    nvdev.dev)) != CUDA_SUCCESS)
		return device_fail(rc, ret_cause, "cuDeviceGetPCIBusId");
	if ((rc = nvcu.cuDeviceTotalMem(&nvdev.total_mem, nvdev.dev)) != CUDA_SUCCESS)
		return device_fail(rc, ret_cause, "cuDeviceTotalMem");
	if ((rc = nvcu.cuDriverGetVersion(&nvdev.driver_version)) != CUDA_SUCCESS)
		return device_fail(rc, ret_cause, "cuDriverGetVersion");
	if ((error = device_read_limits(ret_cause)) < 0)
		return error;
	/* Non-blocking: nothing on the legacy stream orders itself with ours. */
	if ((rc = nvcu.cuStreamCreate(&nvdev.stream, CU_STREAM_NON_BLOCKING)) != CUDA_SUCCESS)
		return device_fail(rc, ret_cause, "cuStreamCreate");
	for (i = 0; i < DEVICE_NEVENTS; i++)
		if ((rc = nvcu.cuEventCreate(&nvdev.events[i], CU_EVENT_DEFAULT)) != CUDA_SUCCESS)
			return device_fail(rc, ret_cause, "cuEventCreate");
	if ((error = device_load_helpers(ret_cause)) < 0)
		return error;
	device_setup_vmm(guard);
	if (nvml)
		device_setup_nvml();
	nvdev.ready = true;
	nvrtc_log(KGYM_LOG_INFO, "%s (%s, %d SMs, L2 %d KiB): helpers compiled in %.0f ms; "
	    "guarded allocations: %s", nvdev.name, nvdev.arch, nvdev.sm_count,
	    nvdev.l2_bytes >> 10, nvdev.helpers_compile_ms,
	    nvdev.vmm ? "yes" : nvdev.vmm_why_not != NULL ? nvdev.vmm_why_not : "no");
	return 0;
}

void
device_fini(void)
{
	size_t i;

	if (nvdev.ready) {
		/* Best effort: the process is about to end anyway. */
		if (nvdev.helpers != NULL)
			nvcu.cuModuleUnload(nvdev.helpers);
		for (i = 0; i < DEVICE_NEVENTS; i++)
			if (nvdev.events[i] != NULL)
				nvcu.cuEventDestroy(nvdev.events[i]);
		if (nvdev.stream != NULL)
			nvcu.cuStreamDestroy(nvdev.stream);
	}
	free(nvdev.unready);
	free(nvdev.vmm_why_not);
	memset(&nvdev, 0, sizeof nvdev);
}

/* ------------------------------------------------------------ memory */

int
device_buf_alloc(size_t bytes, struct device_buf *ret_buf, char **ret_cause)
{
	struct device_buf b;
	CUmemAllocationProp prop;
	CUmemAccessDesc access;
	size_t padded = (size_t)device_cdiv(bytes ? bytes : 1, DEVICE_ALIGN) * DEVICE_ALIGN;
	CUresult rc;
	int error;

	memset(&b, 0, sizeof b);
	b.bytes = bytes;
	if (!nvdev.vmm) {
		if ((rc = nvcu.cuMemAlloc(&b.base, padded)) != CUDA_SUCCESS)
			return device_fail(rc, ret_cause, "cuMemAlloc(%zu bytes)", padded);
		b.mapped = padded;
		b.ptr = b.base;
		goto zero;
	}
	b.mapped = (size_t)device_cdiv(padded, nvdev.granularity) * nvdev.granularity;
	b.reserved = b.mapped + nvdev.granularity;
	if ((rc = nvcu.cuMemAddressReserve(&b.base, b.reserved, nvdev.granularity, 0, 0)) !=
	    CUDA_SUCCESS)
		return device_fail(rc, ret_cause, "cuMemAddressReserve(%zu bytes)", b.reserved);
	memset(&prop, 0, sizeof prop);
	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	prop.location.id = nvdev.dev;
	if ((rc = nvcu.cuMemCreate(&b.handle, b.mapped, &prop, 0)) != CUDA_SUCCESS) {
		error = device_fail(rc, ret_cause, "cuMemCreate(%zu bytes)", b.mapped);
		goto free_address;
	}
	if ((rc = nvcu.cuMemMap(b.base, b.mapped, 0, b.handle, 0)) != CUDA_SUCCESS) {
		error = device_fail(rc, ret_cause, "cuMemMap(%zu bytes)", b.mapped);
		goto release_handle;
	}
	memset(&access, 0, sizeof access);
	access.location = prop.location;
	access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	if ((rc = nvcu.cuMemSetAccess(b.base, b.mapped, &access, 1)) != CUDA_SUCCESS) {
		error = device_fail(rc, ret_cause, "cuMemSetAccess(%zu bytes)", b.mapped);
		goto unmap;
	}
	/* Flush against the guard: an overrun of more than the alignment
	 * padding faults. */
	b.ptr = b.base + b.mapped - padded;
zero:
	/* Whatever the memory held before (another task's data) is gone
	 * before anything of ours or a candidate's can read it. */
	if ((rc = nvcu.cuMemsetD8Async(b.base, 0, b.mapped, nvdev.stream)) != CUDA_SUCCESS) {
		error = device_fail(rc, ret_cause, "zeroing %zu bytes", b.mapped);
		device_buf_free(&b);
		return error;
	}
	*ret_buf = b;
	return 0;
unmap:
	nvcu.cuMemUnmap(b.base, b.mapped);
release_handle:
	nvcu.cuMemRelease(b.handle);
free_address:
	nvcu.cuMemAddressFree(b.base, b.reserved);
	return error;
}

void
device_buf_free(struct device_buf *b)
{
	if (b == NULL || b->base == 0)
		return;
	if (b->reserved != 0) {
		nvcu.cuMemUnmap(b->base, b->mapped);
		nvcu.cuMemRelease(b->handle);
		nvcu.cuMemAddressFree(b->base, b->reserved);
	} else {
		nvcu.cuMemFree(b->base);
	}
	memset(b, 0, sizeof *b);
}

/* --------------------------------------------------- helper launches */

static int
device_launch(CUfunction f, const char *what, uint64_t n, void **args, char **ret_cause)
{
	uint64_t grid = device_cdiv(n ? n : 1, DEVICE_BLOCK);
	uint64_t most = (uint64_t)nvdev.sm_count * DEVICE_BLOCKS_PER_SM;
	CUresult rc;

	if (grid > most)
		grid = most;		/* the kernels loop over a grid stride */
	if ((rc = nvcu.cuLaunchKernel(f, (unsigned int)grid, 1, 1, DEVICE_BLOCK, 1, 1, 0,
	    nvdev.stream, args, NULL)) != CUDA_SUCCESS)
		return device_fail(rc, ret_cause, "helper kernel %s", what);
	return 0;
}

int
device_fill(const struct device_buf *b, enum spec_dtype dtype, uint64_t numel,
    const struct spec_init *init, uint64_t seed, char **ret_cause)
{
	unsigned long long n = numel, s = seed;
	CUdeviceptr p = b->ptr;
	int dt = (int)dtype, kind = (int)init->kind;
	double a, hi;
	void *args[] = { &p, &n, &dt, &kind, &a, &hi, &s };

	if (init->kind == SPEC_INIT_NORMAL) {
		a = init->mean;
		hi = init->std;
	} else {
		a = init->low;
		hi = init->high;
	}
	return device_launch(nvdev.k_init, "kg_init", numel, args, ret_cause);
}

int
device_poison(const struct device_buf *b, enum spec_dtype dtype, uint64_t numel,
    uint64_t seed, char **ret_cause)
{
	unsigned long long n = numel, s = seed;
	CUdeviceptr p = b->ptr;
	int dt = (int)dtype;
	void *args[] = { &p, &n, &dt, &s };

	return device_launch(nvdev.k_poison, "kg_poison", numel, args, ret_cause);
}

int
device_zero(CUdeviceptr p, size_t bytes, char **ret_cause)
{
	CUresult rc;

	if (bytes == 0)
		return 0;
	if ((rc = nvcu.cuMemsetD8Async(p, 0, bytes, nvdev.stream)) != CUDA_SUCCESS)
		return device_fail(rc, ret_cause, "zeroing %zu bytes", bytes);
	return 0;
}

int
device_compare(const struct device_buf *got, const struct device_buf *expected,
    enum spec_dtype dtype, uint64_t numel, double atol, double rtol, CUdeviceptr slot,
    char **ret_cause)
{
	CUdeviceptr g = got->ptr, e = expected->ptr, r = slot;
	unsigned long long n = numel;
	int dt = (int)dtype, error;
	void *args[] = { &g, &e, &n, &dt, &atol, &rtol, &r };

	if ((error = device_zero(slot, sizeof(struct kgym_compare_stats), ret_cause)) < 0)
		return error;
	return device_launch(nvdev.k_compare, "kg_compare", numel, args, ret_cause);
}

int
device_hash(const struct device_buf *b, uint64_t salt, CUdeviceptr slot, char **ret_cause)
{
	CUdeviceptr p = b->ptr, r = slot;
	unsigned long long n = b->bytes, s = salt;
	void *args[] = { &p, &n, &s, &r };
	int error;

	if ((error = device_zero(slot, sizeof(uint64_t), ret_cause)) < 0)
		return error;
	return device_launch(nvdev.k_hash, "kg_hash", b->bytes / 8, args, ret_cause);
}

int
device_flush_l2(const struct device_buf *flush, uint32_t salt, char **ret_cause)
{
	CUdeviceptr p = flush->ptr;
	unsigned long long n = flush->bytes / 4;
	unsigned int v = salt;
	void *args[] = { &p, &n, &v };
	CUresult rc;

	/* Lines a persisting access policy pinned would survive the writes;
	 * a GPU without persisting lines has none to reset. */
	if ((rc = nvcu.cuCtxResetPersistingL2Cache()) != CUDA_SUCCESS &&
	    rc != CUDA_ERROR_NOT_SUPPORTED)
		return device_fail(rc, ret_cause, "cuCtxResetPersistingL2Cache");
	return device_launch(nvdev.k_flush, "kg_flush", n, args, ret_cause);
}

int
device_scrub_shared(char **ret_cause)
{
	unsigned int words = (unsigned int)nvdev.max_shared_optin / 4;
	void *args[] = { &words };
	CUresult rc;

	if ((rc = nvcu.cuLaunchKernel(nvdev.k_scrub, (unsigned int)nvdev.sm_count * 2, 1, 1,
	    1024, 1, 1, (unsigned int)nvdev.max_shared_optin, nvdev.stream, args, NULL)) !=
	    CUDA_SUCCESS)
		return device_fail(rc, ret_cause, "helper kernel kg_scrub");
	return 0;
}

/* One block of one warp doing nothing: a launch's own cost (timing.c). */
int
device_empty_launch(char **ret_cause)
{
	CUresult rc;

	if ((rc = nvcu.cuLaunchKernel(nvdev.k_empty, 1, 1, 1, 32, 1, 1, 0, nvdev.stream, NULL,
	    NULL)) != CUDA_SUCCESS)
		return device_fail(rc, ret_cause, "helper kernel kg_empty");
	return 0;
}

int
device_upload(CUdeviceptr dst, const void *src, size_t bytes, char **ret_cause)
{
	CUresult rc;

	/* From pageable memory the call returns once `src` has been staged. */
	if ((rc = nvcu.cuMemcpyHtoDAsync(dst, src, bytes, nvdev.stream)) != CUDA_SUCCESS)
		return device_fail(rc, ret_cause, "copying %zu bytes to the GPU", bytes);
	return 0;
}

int
device_download(void *dst, CUdeviceptr src, size_t bytes, char **ret_cause)
{
	CUresult rc;

	if ((rc = nvcu.cuMemcpyDtoHAsync(dst, src, bytes, nvdev.stream)) != CUDA_SUCCESS)
		return device_fail(rc, ret_cause, "copying %zu bytes from the GPU", bytes);
	return device_sync(NULL, ret_cause);
}

int
device_sync(CUresult *ret_rc, char **ret_cause)
{
	CUresult rc;

	if ((rc = nvcu.cuStreamSynchronize(nvdev.stream)) != CUDA_SUCCESS) {
		if (ret_rc != NULL)
			*ret_rc = rc;
		return device_fail(rc, ret_cause, "the GPU");
	}
	return 0;
}

int
device_sm_clock_mhz(unsigned int *ret_mhz)
{
	unsigned int mhz = 0;

	if (nvml_get_clock == NULL || nvdev.nvml_dev == NULL ||
	    nvml_get_clock(nvdev.nvml_dev, DEVICE_NVML_CLOCK_SM, &mhz) != 0 || mhz == 0)
		return -ENOTSUP;
	*ret_mhz = mhz;
	return 0;
}

json_t *
device_json(void)
{
	char cc[16];

	snprintf(cc, sizeof cc, "%d.%d", nvdev.cc_major, nvdev.cc_minor);
	return json_pack("{s:s, s:s, s:s, s:s, s:i, s:i, s:I, s:i, s:i, s:s, s:f}",
	    "name", nvdev.name, "compute_capability", cc, "arch", nvdev.arch,
	    "pci_bus_id", nvdev.pci_bus_id, "sm_count", nvdev.sm_count,
	    "l2_bytes", nvdev.l2_bytes, "memory_bytes", (json_int_t)nvdev.total_mem,
	    "driver_version", nvdev.driver_version, "nominal_clock_mhz",
	    nvdev.clock_khz / 1000,
	    "memory_guard", nvdev.vmm ? "guard pages (virtual memory API)" :
	    nvdev.vmm_why_not != NULL ? nvdev.vmm_why_not : "none",
	    "helpers_compile_ms", nvdev.helpers_compile_ms);
}
