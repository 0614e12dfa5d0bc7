/*
 * gpuinfo.c -- the worker's first touch of its GPU, through the driver API.
 *
 * A GPU worker initialises CUDA before it enters the sandbox: the driver
 * opens its device nodes, starts its threads and connects to the MPS
 * control socket at that point, none of which the sandbox allows later
 * (measured: ARCHITECTURE.md, "What the GPU machine taught").  It keeps the
 * primary context retained for its whole life, so backends that use it find
 * the driver ready, and reports the device's name and memory to the parent,
 * which never opens CUDA itself.
 *
 * libcuda is loaded with dlopen: the worker builds and runs without a CUDA
 * toolkit, and a machine without a GPU simply reports none.
 */
#include "config.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kgymd.h"
#include "worker.h"

typedef int (*cu_init_fn)(unsigned int);
typedef int (*cu_device_get_fn)(int *, int);
typedef int (*cu_device_get_name_fn)(char *, int, int);
typedef int (*cu_device_total_mem_fn)(size_t *, int);
typedef int (*cu_primary_ctx_retain_fn)(void **, int);
typedef int (*cu_ctx_set_current_fn)(void *);
typedef int (*cu_get_error_string_fn)(int, const char **);
typedef int (*cu_device_get_attribute_fn)(int *, int, int);

/* CUdevice_attribute values (cuda.h), stable since CUDA 6.5. */
#define GPUINFO_ATTR_CC_MAJOR	75
#define GPUINFO_ATTR_CC_MINOR	76

static void *gpuinfo_lib;

static const char *
gpuinfo_error(cu_get_error_string_fn get, int rc)
{
	const char *s = NULL;

	if (get == NULL || get(rc, &s) != 0 || s == NULL)
		return "unknown CUDA error";
	return s;
}

json_t *
gpuinfo_init(char **ret_cause)
{
	cu_init_fn init;
	cu_device_get_fn device_get;
	cu_device_get_name_fn get_name;
	cu_device_total_mem_fn total_mem;
	cu_primary_ctx_retain_fn retain;
	cu_ctx_set_current_fn set_current;
	cu_get_error_string_fn errstr;
	cu_device_get_attribute_fn get_attr;
	char name[256], cc[16];
	int major = 0, minor = 0;
	size_t mem = 0;
	void *ctx = NULL;
	int dev, rc;

	if ((gpuinfo_lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL)) == NULL) {
		if (asprintf(ret_cause, "no CUDA driver: %s", dlerror()) < 0)
			*ret_cause = NULL;
		return NULL;
	}
	init = (cu_init_fn)dlsym(gpuinfo_lib, "cuInit");
	device_get = (cu_device_get_fn)dlsym(gpuinfo_lib, "cuDeviceGet");
	get_name = (cu_device_get_name_fn)dlsym(gpuinfo_lib, "cuDeviceGetName");
	total_mem = (cu_device_total_mem_fn)dlsym(gpuinfo_lib, "cuDeviceTotalMem_v2");
	retain = (cu_primary_ctx_retain_fn)dlsym(gpuinfo_lib, "cuDevicePrimaryCtxRetain");
	set_current = (cu_ctx_set_current_fn)dlsym(gpuinfo_lib, "cuCtxSetCurrent");
	errstr = (cu_get_error_string_fn)dlsym(gpuinfo_lib, "cuGetErrorString");
	get_attr = (cu_device_get_attribute_fn)dlsym(gpuinfo_lib, "cuDeviceGetAttribute");
	if (init == NULL || device_get == NULL || get_name == NULL || total_mem == NULL ||
	    retain == NULL || set_current == NULL || get_attr == NULL) {
		*ret_cause = strdup("the CUDA driver lacks a function kgymd-worker needs");
		return NULL;
	}
	if ((rc = init(0)) != 0 || (rc = device_get(&dev, 0)) != 0 ||
	    (rc = get_name(name, sizeof name, dev)) != 0 ||
	    (rc = total_mem(&mem, dev)) != 0 ||
	    (rc = get_attr(&major, GPUINFO_ATTR_CC_MAJOR, dev)) != 0 ||
	    (rc = get_attr(&minor, GPUINFO_ATTR_CC_MINOR, dev)) != 0 ||
	    (rc = retain(&ctx, dev)) != 0 ||
	    (rc = set_current(ctx)) != 0) {
		if (asprintf(ret_cause, "CUDA initialisation failed: %s (%d)",
		    gpuinfo_error(errstr, rc), rc) < 0)
			*ret_cause = NULL;
		return NULL;
	}
	snprintf(cc, sizeof cc, "%d.%d", major, minor);
	return json_pack("{s:s, s:I, s:s}", "name", name, "memory_bytes", (json_int_t)mem,
	    "compute_capability", cc);
}
