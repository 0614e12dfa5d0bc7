/*
 * selftest_backend.c -- the test-only backend `selftest` (never installed).
 *
 * It runs inside kgymd-worker, in the sandbox, and does on purpose what a
 * hostile or broken candidate would: crash, hang, open a network socket,
 * exec a shell, ptrace, read the task store or the daemon's config, fork
 * without end, eat memory, send an oversized result or garbage on the
 * parent channel.  Each action's expected end is asserted by the worker
 * tests (tests/integration/test_workers.py).  The gpu_* actions hold the
 * GPU lock and record CLOCK_MONOTONIC timestamps, for the lock tests, and
 * gpu_probe launches a real kernel (tests/gpu/run).  `toolkit` asks the
 * worker's host->toolkit for an API of the test toolkit
 * (tests/plugins/toolkit_selftest.c) from inside the sandboxed job.
 */
#include "config.h"

#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <kgym/plugin.h>

static const struct kgym_host *host;

static int
sb_init(const struct kgym_host *h, const struct kgym_plugin_handle *s, char **ret_cause)
{
	host = h;
	return 0;
}

static void
sb_fini(void)
{
}

static int
sb_prepare(char **ret_cause)
{
	return 0;
}

static int64_t
sb_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void
sb_sleep_ms(json_int_t ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000 };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static json_t *
sb_ok(bool correct, json_t *meta)
{
	return json_pack("{s:s, s:b, s:b, s:b, s:f, s:f, s:f, s:o}", "status", "completed",
	    "compiled", 1, "correctness", correct, "decoy_kernel", 0, "kernel_runtime", 1.0,
	    "reference_runtime", 1.0, "speedup", 1.0, "metadata", meta ? meta : json_object());
}

static json_t *
sb_failed(const char *code, const char *message)
{
	return json_pack("{s:s, s:b, s:b, s:s, s:s}", "status", "failed", "compiled", 0,
	    "correctness", 0, "error_code", code, "error_message", message);
}

/* Opening each path must fail; any success is a leak the test reports. */
static json_t *
sb_read_secret(const json_t *paths)
{
	json_t *leaked = json_array(), *v;
	char why[2048] = "", buf[64];
	size_t i;
	int fd;

	json_array_foreach(paths, i, v) {
		const char *p = json_string_value(v);

		if (p == NULL)
			continue;
		if ((fd = open(p, O_RDONLY)) >= 0) {
			if (read(fd, buf, sizeof buf) >= 0)
				json_array_append_new(leaked, json_string(p));
			close(fd);
			continue;
		}
		snprintf(why + strlen(why), sizeof why - strlen(why), "%s%s: %s",
		    why[0] ? "; " : "", p, strerror(errno));
	}
	if (json_array_size(leaked) > 0)
		return sb_ok(false, json_pack("{s:o}", "leaked", leaked));
	json_decref(leaked);
	return sb_failed("SANDBOX_VIOLATION", why[0] ? why : "no paths given");
}

static json_t *
sb_oom(void)
{
	const size_t chunk = 64u << 20;
	size_t total = 0;
	char msg[160];
	char *p;

	/* Keep what we take: the point is to run out, under the sandbox's limit. */
	for (;;) {
		if ((p = malloc(chunk)) == NULL)
			break;
		memset(p, 1, chunk);
		total += chunk;
	}
	snprintf(msg, sizeof msg, "out of host memory after %zu MiB (sandbox.job_memory)",
	    total >> 20);
	return sb_failed("RESOURCE_ERROR", msg);
}

static json_t *
sb_huge(void)
{
	/* Just past any sane max_message_bytes for tests (they set 1M). */
	size_t n = 8u << 20;
	char *s = malloc(n + 1);
	json_t *r;

	if (s == NULL)
		return sb_failed("RESOURCE_ERROR", "cannot build the huge output");
	memset(s, 'x', n);
	s[n] = '\0';
	r = sb_ok(true, json_pack("{s:s}", "blob", s));
	free(s);
	return r;
}

static json_t *
sb_lock_hold(bool exclusive, json_int_t hold_ms)
{
	int64_t t0, t1;

	if (exclusive && (host->gpu_lock == NULL || host->gpu_lock(KGYM_GPU_EXCLUSIVE) < 0))
		return sb_failed("SYSTEM_ERROR", "gpu_lock(exclusive) failed");
	if (exclusive && host->phase != NULL)
		host->phase("timing");
	t0 = sb_now_ns();
	sb_sleep_ms(hold_ms);
	t1 = sb_now_ns();
	return sb_ok(true, json_pack("{s:s, s:I, s:I}", "mode", exclusive ? "exclusive" : "shared",
	    "t0_ns", (json_int_t)t0, "t1_ns", (json_int_t)t1));
}

/*
 * gpu_probe: a real kernel through the driver API (dlopen'd libcuda, the
 * primary context the worker retained before the sandbox): add 1.0 to N
 * floats, check them, and report this process's Seccomp mode.
 */
static const char sb_ptx[] =
    ".version 7.0\n.target sm_75\n.address_size 64\n"
    ".visible .entry add_one(.param .u64 px, .param .u32 pn)\n{\n"
    ".reg .pred %p<2>;\n.reg .b32 %r<6>;\n.reg .f32 %f<3>;\n.reg .b64 %rd<5>;\n"
    "ld.param.u64 %rd1, [px];\nld.param.u32 %r2, [pn];\n"
    "mov.u32 %r3, %ctaid.x;\nmov.u32 %r4, %ntid.x;\nmov.u32 %r5, %tid.x;\n"
    "mad.lo.s32 %r1, %r3, %r4, %r5;\nsetp.ge.s32 %p1, %r1, %r2;\n@%p1 bra DONE;\n"
    "cvta.to.global.u64 %rd2, %rd1;\nmul.wide.s32 %rd3, %r1, 4;\nadd.s64 %rd4, %rd2, %rd3;\n"
    "ld.global.f32 %f1, [%rd4];\nadd.f32 %f2, %f1, 0f3F800000;\nst.global.f32 [%rd4], %f2;\n"
    "DONE:\nret;\n}\n";

static int
sb_seccomp_mode(void)
{
	char line[256];
	int mode = -1;
	FILE *f = fopen("/proc/self/status", "r");

	if (f == NULL)
		return -1;
	while (fgets(line, sizeof line, f) != NULL)
		if (sscanf(line, "Seccomp: %d", &mode) == 1)
			break;
	fclose(f);
	return mode;
}

static json_t *
sb_gpu_probe(void)
{
	typedef int (*fn_ctx_get)(void **);
	typedef int (*fn_mod_load)(void **, const void *);
	typedef int (*fn_get_fn)(void **, void *, const char *);
	typedef int (*fn_alloc)(unsigned long long *, size_t);
	typedef int (*fn_h2d)(unsigned long long, const void *, size_t);
	typedef int (*fn_d2h)(void *, unsigned long long, size_t);
	typedef int (*fn_launch)(void *, unsigned, unsigned, unsigned, unsigned, unsigned,
	    unsigned, unsigned, void *, void **, void **);
	typedef int (*fn_sync)(void);
	enum { N = 1 << 20 };
	void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
	void *ctx = NULL, *mod = NULL, *fn = NULL, *args[2];
	unsigned long long dptr = 0;
	static float host_buf[N];
	unsigned int n = N;
	char msg[160];
	int rc, bad = 0, i;

	if (lib == NULL)
		return sb_failed("SYSTEM_ERROR", "libcuda is not loaded in this worker");
#define SYM(t, name) ((t)dlsym(lib, name))
	if ((rc = SYM(fn_ctx_get, "cuCtxGetCurrent")(&ctx)) != 0 || ctx == NULL)
		return sb_failed("SYSTEM_ERROR", "no current CUDA context");
	for (i = 0; i < N; i++)
		host_buf[i] = (float)i;
	if ((rc = SYM(fn_mod_load, "cuModuleLoadData")(&mod, sb_ptx)) != 0 ||
	    (rc = SYM(fn_get_fn, "cuModuleGetFunction")(&fn, mod, "add_one")) != 0 ||
	    (rc = SYM(fn_alloc, "cuMemAlloc_v2")(&dptr, sizeof host_buf)) != 0 ||
	    (rc = SYM(fn_h2d, "cuMemcpyHtoD_v2")(dptr, host_buf, sizeof host_buf)) != 0) {
		snprintf(msg, sizeof msg, "CUDA setup failed with error %d", rc);
		return sb_failed("RUNTIME_ERROR", msg);
	}
	args[0] = &dptr;
	args[1] = &n;
	if ((rc = SYM(fn_launch, "cuLaunchKernel")(fn, (N + 255) / 256, 1, 1, 256, 1, 1, 0,
	    NULL, args, NULL)) != 0 || (rc = SYM(fn_sync, "cuCtxSynchronize")()) != 0 ||
	    (rc = SYM(fn_d2h, "cuMemcpyDtoH_v2")(host_buf, dptr, sizeof host_buf)) != 0) {
		snprintf(msg, sizeof msg, "kernel launch failed with error %d", rc);
		return sb_failed("RUNTIME_ERROR", msg);
	}
#undef SYM
	for (i = 0; i < N; i++)
		if (host_buf[i] != (float)i + 1.0f)
			bad++;
	return sb_ok(bad == 0, json_pack("{s:i, s:i, s:i}", "seccomp", sb_seccomp_mode(),
	    "elements", N, "wrong", bad));
}

/*
 * host->toolkit in a worker, inside a job: {"found", "sum" (the test
 * toolkit's add(2, 3)), "cause"} in the metadata.
 */
static json_t *
sb_toolkit(const json_t *request)
{
	struct selftest_api {
		struct kgym_toolkit_api head;
		int (*add)(int a, int b);
	};
	const char *name = json_string_value(json_object_get(request, "api"));
	json_int_t min = json_integer_value(json_object_get(request, "min_version"));
	const struct selftest_api *api;
	char *cause = NULL;
	json_t *meta;

	if (host->struct_size < offsetof(struct kgym_host, toolkit) + sizeof host->toolkit ||
	    host->toolkit == NULL)
		return sb_failed("SYSTEM_ERROR", "this host has no toolkit function");
	api = (const struct selftest_api *)(const void *)host->toolkit(name != NULL ? name :
	    "selftest_api", (uint32_t)min, &cause);
	meta = json_pack("{s:b, s:s?}", "found", api != NULL, "cause", cause);
	if (api != NULL && KGYM_TOOLKIT_HAS(api, add))
		json_object_set_new(meta, "sum", json_integer(api->add(2, 3)));
	free(cause);
	return sb_ok(api != NULL, meta);
}

static int
sb_run(const json_t *request, json_t **ret_result, char **ret_cause)
{
	const char *action = json_string_value(json_object_get(request, "action"));
	json_int_t delay = json_integer_value(json_object_get(request, "delay_ms"));
	json_int_t hold = json_integer_value(json_object_get(request, "hold_ms"));
	const json_t *then = json_object_get(request, "then");
	char *const sh[] = { "/bin/sh", "-c", "echo escaped", NULL };
	json_t *r = NULL;
	int fd;

	if (action == NULL) {
		*ret_cause = strdup("no action");
		return -EINVAL;
	}
	if (delay > 0)
		sb_sleep_ms(delay);
	if (strcmp(action, "ok") == 0) {
		r = sb_ok(true, json_pack("{s:I, s:I}", "delay_ms", delay, "pid",
		    (json_int_t)getpid()));
	} else if (strcmp(action, "incorrect") == 0) {
		r = sb_ok(false, NULL);
	} else if (strcmp(action, "fail") == 0) {
		r = sb_failed("RUNTIME_ERROR", "selftest: the task asked to fail");
	} else if (strcmp(action, "sleep") == 0) {
		sb_sleep_ms(json_integer_value(json_object_get(request, "seconds")) * 1000);
		r = sb_ok(true, NULL);
	} else if (strcmp(action, "crash") == 0) {
		raise(SIGSEGV);
	} else if (strcmp(action, "hang") == 0) {
		for (;;)
			sb_sleep_ms(1000);
	} else if (strcmp(action, "network") == 0) {
		fd = socket(AF_INET, SOCK_STREAM, 0);
		r = sb_ok(false, json_pack("{s:s, s:i}", "escaped", "opened an AF_INET socket",
		    "fd", fd));
	} else if (strcmp(action, "unix_socket") == 0) {
		fd = socket(AF_UNIX, SOCK_STREAM, 0);
		r = sb_ok(false, json_pack("{s:s, s:i}", "escaped", "opened an AF_UNIX socket",
		    "fd", fd));
	} else if (strcmp(action, "exec") == 0) {
		execve(sh[0], sh, NULL);
		r = sb_failed("SANDBOX_VIOLATION", "execve failed without killing the job");
	} else if (strcmp(action, "ptrace") == 0) {
		ptrace(PTRACE_ATTACH, getppid(), NULL, NULL);
		r = sb_failed("SANDBOX_VIOLATION", "ptrace returned without killing the job");
	} else if (strcmp(action, "read_secret") == 0) {
		r = sb_read_secret(json_object_get(request, "paths"));
	} else if (strcmp(action, "fork_bomb") == 0) {
		for (;;)
			if (fork() < 0)
				break;
		r = sb_failed("RESOURCE_ERROR", "fork failed (process limit)");
	} else if (strcmp(action, "oom") == 0) {
		r = sb_oom();
	} else if (strcmp(action, "huge_output") == 0) {
		r = sb_huge();
	} else if (strcmp(action, "garbage_output") == 0) {
		/* Forge bytes on the channel to kgymd, as a hostile job might. */
		if (write(3, "this is not a frame at all, just garbage\n", 41) < 0)
			r = sb_failed("SYSTEM_ERROR", "could not write garbage");
		sb_sleep_ms(5000);
		if (r == NULL)
			r = sb_ok(true, NULL);
	} else if (strcmp(action, "gpu_shared") == 0) {
		r = sb_lock_hold(false, hold);
	} else if (strcmp(action, "gpu_exclusive") == 0) {
		r = sb_lock_hold(true, hold);
	} else if (strcmp(action, "gpu_relock") == 0) {
		/* Timing twice in one job: exclusive, back to shared, exclusive again. */
		if (host->gpu_lock(KGYM_GPU_EXCLUSIVE) < 0 || host->gpu_lock(KGYM_GPU_SHARED) < 0 ||
		    host->gpu_lock(KGYM_GPU_EXCLUSIVE) < 0)
			r = sb_failed("SYSTEM_ERROR", "gpu_lock failed");
		else
			r = sb_lock_hold(false, hold);
	} else if (strcmp(action, "toolkit") == 0) {
		r = sb_toolkit(request);
	} else if (strcmp(action, "gpu_probe") == 0) {
		r = sb_gpu_probe();
		if (json_is_string(then) && strcmp(json_string_value(then), "network") == 0) {
			/* After real CUDA work, a socket must still kill the job. */
			fd = socket(AF_INET, SOCK_STREAM, 0);
			json_decref(r);
			r = sb_ok(false, json_pack("{s:s, s:i}", "escaped",
			    "opened an AF_INET socket after CUDA work", "fd", fd));
		}
	} else {
		*ret_cause = strdup("unknown action");
		return -EINVAL;
	}
	*ret_result = r;
	return 0;
}

static const char *const sb_serves[] = { "selftest", NULL };

const struct kgym_plugin kgym_plugin = {
	.abi_major = KGYM_PLUGIN_ABI_MAJOR,
	.abi_minor = KGYM_PLUGIN_ABI_MINOR,
	.struct_size = sizeof(struct kgym_plugin),
	.build_signature = KGYM_BUILD_SIGNATURE,
	.name = "selftest_backend",
	.kind = KGYM_PLUGIN_BACKEND,
	.version = "0.1.0",
	.serves = sb_serves,
	.init = sb_init,
	.fini = sb_fini,
	.prepare = sb_prepare,
	.run = sb_run,
	.syscalls = NULL,	/* nothing beyond the common set */
};
