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
 * this file only decides the route (plugins/common/route.c) and dispatches
 * on it.
 */
#include "config.h"

#include <errno.h>

#include <kgym/plugin.h>

#include "native_workflow.h"
#include "plugin_util.h"
#include "python_workflow.h"
#include "route.h"

static const struct nw_kind kernelbench_kind = {
	.name = "kernelbench",
	.mode = "kernelbench",
	.spec_flags = 0,
	.run_performance = true,
	.speedup = true,
};

/* --- dispatch on the route (route.h): KernelBench format or native */

#define KERNELBENCH_FLOWS	(ROUTE_NATIVE | ROUTE_PYTHON)
#define KERNELBENCH_ERRLEN	512

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
kernelbench_route(const json_t *payload, struct route *ret, char **ret_cause)
{
	char err[KERNELBENCH_ERRLEN];

	if (route_decide(payload, KERNELBENCH_FLOWS, "kernelbench", ret, err, sizeof err) == 0)
		return 0;
	*ret_cause = pu_strdup_host(kernelbench_host, err);
	return *ret_cause != NULL ? -EINVAL : -ENOMEM;
}

static int
kernelbench_validate(const json_t *payload, char **ret_cause)
{
	struct route route;
	int r;

	if ((r = kernelbench_route(payload, &route, ret_cause)) < 0)
		return r;
	return route.flow == ROUTE_PYTHON ? pw_validate(payload, &route, ret_cause) :
	    nw_validate_on(payload, &route, ret_cause);
}

/* The route is decided here once for the run, and handed on. */
static int
kernelbench_start(struct kgym_task *task, char **ret_cause)
{
	struct route route;
	int r;

	if ((r = kernelbench_route(kernelbench_host->task_payload(task), &route,
	    ret_cause)) < 0)
		return r;
	return route.flow == ROUTE_PYTHON ? pw_start(task, &route, ret_cause) :
	    nw_start_on(task, &route, ret_cause);
}

/* Whose state the task has: the route its start decided. */
static void
kernelbench_cancel(struct kgym_task *task)
{
	const struct route *route = route_of_task(kernelbench_host, task);

	if (route == NULL)
		return;		/* no state to release */
	if (route->flow == ROUTE_PYTHON)
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
