/*
 * kernelbench.c -- the workflow plugin `kernelbench` (runs in the daemon).
 *
 * A candidate against the problem's reference: correctness on fresh secret
 * inputs, then both timed interleaved on the same GPU, with the speedup
 * (reference median / candidate median) in the result.  This build serves
 * native payloads (backend "nvrtc", DESIGN §5); the KernelBench-format
 * backends (triton, cuda, torch) are refused at submit until their plugins
 * exist.  KernelGYM's request fields are accepted by their names
 * (num_correct_trials, num_perf_trials, num_warmup, run_correctness,
 * run_performance, enable_profiling, force_refresh); unknown fields are
 * ignored.  The flow itself -- compile job, evaluate job, result -- is
 * plugins/common/native_workflow.c.
 */
#include "config.h"

#include <kgym/plugin.h>

#include "native_workflow.h"

static const struct nw_kind kernelbench_kind = {
	.name = "kernelbench",
	.mode = "kernelbench",
	.spec_flags = 0,
	.run_performance = true,
	.speedup = true,
};

static int
kernelbench_init(const struct kgym_host *host, const struct kgym_plugin_handle *self,
    char **ret_cause)
{
	return nw_init(&kernelbench_kind, host, self, ret_cause);
}

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
	.fini = nw_fini,
	.validate = nw_validate,
	.start = nw_start,
	.cancel = nw_cancel,
};
