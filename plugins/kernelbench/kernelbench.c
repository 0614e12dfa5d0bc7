/*
 * kernelbench.c -- the workflow plugin `kernelbench` (runs in the daemon).
 *
 * A candidate against the problem's reference: correctness on fresh secret
 * inputs, then both timed interleaved on the same GPU, with the speedup
 * (reference median / candidate median) in the result.  This build serves
 * native payloads (backend "nvrtc", kgymd-protocol(7)) and KernelBench-format
 * payloads (backends "torch", "triton", "cuda": reference_code, kernel_code,
 * ...) run by the python backend.  KernelGYM's request fields are accepted
 * by their names (num_correct_trials, num_perf_trials, num_warmup,
 * run_correctness, run_performance, enable_profiling, force_refresh);
 * unknown fields are ignored.  The flows themselves are
 * plugins/common/native_workflow.c (compile job, evaluate job, result) and
 * plugins/common/python_workflow.c (one python job, reference timing cache);
 * this file only dispatches on payload.backend.
 */
#include "config.h"

#include <kgym/plugin.h>

#include "native_workflow.h"
#include "python_workflow.h"

static const struct nw_kind kernelbench_kind = {
	.name = "kernelbench",
	.mode = "kernelbench",
	.spec_flags = 0,
	.run_performance = true,
	.speedup = true,
};

/* --- dispatch on payload.backend: KernelBench format or native */

static const struct kgym_host *kernelbench_host;

static int
kernelbench_init(const struct kgym_host *host, const struct kgym_plugin_handle *self,
    char **ret_cause)
{
	int r;

	kernelbench_host = host;
	if ((r = nw_init(&kernelbench_kind, host, self, ret_cause)) < 0)
		return r;
	return pw_init(host, self, ret_cause);
}

static void
kernelbench_fini(void)
{
	pw_fini();
	nw_fini();
}

static int
kernelbench_validate(const json_t *payload, char **ret_cause)
{
	return pw_serves(payload) ? pw_validate(payload, ret_cause) :
	    nw_validate(payload, ret_cause);
}

static int
kernelbench_start(struct kgym_task *task, char **ret_cause)
{
	return pw_serves(kernelbench_host->task_payload(task)) ? pw_start(task, ret_cause) :
	    nw_start(task, ret_cause);
}

/* The payload does not change while a task runs: it still says whose state it has. */
static void
kernelbench_cancel(struct kgym_task *task)
{
	if (pw_serves(kernelbench_host->task_payload(task)))
		pw_cancel(task);
	else
		nw_cancel(task);
}
/* --- end of dispatch */

static const char *const kernelbench_serves[] = { "kernelbench", NULL };

const struct kgym_plugin kgym_plugin = {
	.abi_major = KGYM_PLUGIN_ABI_MAJOR,
	.abi_minor = KGYM_PLUGIN_ABI_MINOR,
	.struct_size = sizeof(struct kgym_plugin),
	.build_signature = KGYM_BUILD_SIGNATURE,
	.name = "kernelbench",
	.kind = KGYM_PLUGIN_WORKFLOW,
	.version = "0.1.0",
	.serves = kernelbench_serves,
	.init = kernelbench_init,
	.fini = kernelbench_fini,
	.validate = kernelbench_validate,
	.start = kernelbench_start,
	.cancel = kernelbench_cancel,
};
