/*
 * nvrtc.c -- the backend plugin `nvrtc`: native tasks (kgymd-protocol(7), "Native tasks").
 *
 * A native candidate is CUDA C device code plus a declarative launch plan;
 * kgymd does all the host work.  This plugin runs inside kgymd-worker and
 * serves two kinds of job, told apart by request.op:
 *
 *   "compile"   in a CPU worker: NVRTC turns sources into cubins
 *               (compile.c); no GPU is touched.
 *   "evaluate"  in a GPU worker: load both cubins, check the plans against
 *               the kernels and the device, run correctness trials and
 *               timing (evaluate.c, the job, over call.c, the calls,
 *               and verdict.c, the verdicts; timing.c, device.c).
 *
 * prepare() runs before the sandbox: it finds the compare toolkit
 * (kgym/compare.h), without which it fails, since every verdict is that
 * toolkit's rule; in a GPU worker it finds the context the worker made
 * current and compiles and loads kgymd's helper kernels, the toolkit's
 * kg_compare among them (device.c); in a CPU worker it does no more, since
 * compiling needs no GPU.
 *
 * [plugin.nvrtc] keys:
 *   compile_sandbox = yes|no  NVRTC runs in a thread that can open only the
 *              CUDA headers and the job's scratch directory (default yes;
 *              without Landlock the compile then fails: no turns it off,
 *              and NVRTC reads what the worker can)
 *   guard    = yes|no  tensors in guarded allocations (default yes)
 *   sm_clock = yes|no  sample the SM clock through NVML (default yes)
 *   profile, profile_during_timing, profile_calls, cupti_library: CUPTI
 *              through the cupti toolkit (profile.c, nvrtc_internal.h says
 *              what each does); without that toolkit, events alone
 */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "kgym/sandbox.h"

#include "nvrtc_internal.h"

const struct kgym_host *nvrtc_host;
const struct kgym_plugin_handle *nvrtc_self;
const struct kgym_compare_api *nvrtc_compare;

void
nvrtc_log(enum kgym_log_level level, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	if (nvrtc_host == NULL || nvrtc_host->log == NULL)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	nvrtc_host->log(nvrtc_self, level, "%s", msg);
}

int
nvrtc_fail(char **ret_cause, int error, const char *fmt, ...)
{
	va_list ap;

	if (ret_cause == NULL)
		return error;
	va_start(ap, fmt);
	if (vasprintf(ret_cause, fmt, ap) < 0)
		*ret_cause = NULL;
	va_end(ap);
	return error;
}

/* A yes/no config key; `dflt` when unset or unreadable. */
static bool
nvrtc_config_bool(const char *key, bool dflt)
{
	const char *v;

	if (nvrtc_host == NULL || nvrtc_host->config_get == NULL ||
	    (v = nvrtc_host->config_get(nvrtc_self, key)) == NULL)
		return dflt;
	if (strcasecmp(v, "yes") == 0 || strcasecmp(v, "true") == 0 || strcmp(v, "1") == 0)
		return true;
	if (strcasecmp(v, "no") == 0 || strcasecmp(v, "false") == 0 || strcmp(v, "0") == 0)
		return false;
	nvrtc_log(KGYM_LOG_WARN, "[plugin.nvrtc] %s = %s: not yes or no; using %s", key, v,
	    dflt ? "yes" : "no");
	return dflt;
}

static int
nvrtc_init(const struct kgym_host *host, const struct kgym_plugin_handle *self,
    char **ret_cause)
{
	nvrtc_host = host;
	nvrtc_self = self;
	return 0;
}

static void
nvrtc_fini(void)
{
	profile_fini();
	device_fini();
}

/*
 * Before the sandbox: NVRTC's first compile loads its builtins library and,
 * in CUDA 13, initialises libcuda itself -- calls seccomp would kill later
 * (strace, H100).  A trivial compile now takes all of that out of the jobs.
 */
static int
nvrtc_prepare(char **ret_cause)
{
	char *cause = NULL;
	int r;

	/*
	 * Fail closed without the compare toolkit: no verdict can be reached
	 * without its rule, so this backend takes no job at all (the worker
	 * answers them with this cause) and the daemon goes on serving the
	 * others.
	 */
	if (nvrtc_host == NULL || nvrtc_host->toolkit == NULL ||
	    (nvrtc_compare = (const struct kgym_compare_api *)(const void *)nvrtc_host->toolkit(
	    KGYM_COMPARE_API, KGYM_COMPARE_VERSION, &cause)) == NULL) {
		r = nvrtc_fail(ret_cause, -ENOENT, "nvrtc needs the '%s' toolkit, version %d: %s",
		    KGYM_COMPARE_API, KGYM_COMPARE_VERSION, cause != NULL ? cause :
		    "this kgymd hands out no toolkits");
		free(cause);
		return r;
	}
	/* Any architecture NVRTC knows will do: only the loading matters. */
	if ((r = compile_warm_up("sm_90", ret_cause)) < 0)
		return r;
	if (!nvrtc_config_bool("compile_sandbox", true)) {
		compile_set_unconfined(true);
		nvrtc_log(KGYM_LOG_WARN, "[plugin.nvrtc] compile_sandbox = no: NVRTC can read "
		    "any file this worker can, and a candidate's #include can quote it");
	} else if (sandbox_landlock_abi() < 0) {
		nvrtc_log(KGYM_LOG_WARN, "the kernel has no Landlock: compile jobs fail "
		    "([plugin.nvrtc] compile_sandbox = no would run them unconfined)");
	}
	if ((r = device_prepare(nvrtc_config_bool("guard", true),
	    nvrtc_config_bool("sm_clock", true), ret_cause)) < 0)
		return r;
	/* CUPTI (the cupti toolkit) before the sandbox too; without it, timing
	 * uses events alone. */
	if (nvdev.ready)
		profile_prepare();
	return 0;
}

static int
nvrtc_run(const json_t *request, json_t **ret_result, char **ret_cause)
{
	const char *op = json_string_value(json_object_get(request, "op"));

	if (op == NULL)
		return nvrtc_fail(ret_cause, -EINVAL, "nvrtc: the request has no \"op\"");
	if (strcmp(op, "compile") == 0)
		return compile_job(request, ret_result, ret_cause);
	if (strcmp(op, "evaluate") == 0)
		return evaluate_job(request, ret_result, ret_cause);
	return nvrtc_fail(ret_cause, -EINVAL, "nvrtc: unknown op \"%s\" (compile, evaluate)",
	    op);
}

static const char *const nvrtc_serves[] = { "nvrtc", NULL };

/*
 * Beyond the common and GPU sets: the compile step confines its NVRTC
 * thread with Landlock (confine.c), which can only take rights away --
 *   landlock_create_ruleset  a ruleset of the rights to keep
 *   landlock_add_rule        one rule per directory NVRTC may read
 *   landlock_restrict_self   the thread enters it (never TSYNC)
 * Nothing else, as far as is known: kernels are compiled and loaded in
 * prepare() or through calls the GPU set has (ioctl, mmap).  To be
 * confirmed with strace -f on a GPU worker running an evaluate job
 * (cuMemCreate/cuMemMap, module loads, NVML's clock query); any addition
 * goes here, one name per line, with why.  CUPTI (the cupti toolkit,
 * driven by profile.c) is set up in prepare(), its worker thread included; what it calls later is expected
 * to be within the GPU set (ioctl, mmap, futex, clock_nanosleep) --
 * learn-syscalls with CUPTI on is what confirms it.
 */
static const char *const nvrtc_syscalls[] = {
	"landlock_create_ruleset",
	"landlock_add_rule",
	"landlock_restrict_self",
	NULL,
};

const struct kgym_plugin kgym_plugin = {
	.abi_major = KGYM_PLUGIN_ABI_MAJOR,
	.abi_minor = KGYM_PLUGIN_ABI_MINOR,
	.struct_size = sizeof(struct kgym_plugin),
	.build_signature = KGYM_BUILD_SIGNATURE,
	.name = "nvrtc",
	.kind = KGYM_PLUGIN_BACKEND,
	.version = "0.1.0",
	.serves = nvrtc_serves,
	.init = nvrtc_init,
	.fini = nvrtc_fini,
	.prepare = nvrtc_prepare,
	.run = nvrtc_run,
	.syscalls = nvrtc_syscalls,
};
