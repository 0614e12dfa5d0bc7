/*
 * python_workflow.h -- the kernelbench workflow's flow for KernelBench-format
 * payloads (backends "torch", "triton", "cuda"), run by the python backend
 * plugin (plugins/python) in sandboxed Python processes.
 *
 * kernelbench.c decides the route (route.h) and hands it here: this flow's
 * payloads are those route_decide() sends to ROUTE_PYTHON; native ("nvrtc")
 * payloads go to native_workflow.c.  Both flows keep their own per-task
 * state, which begins with the task's route, so kernelbench.c's cancel
 * knows whose it is without looking at the payload again.
 *
 * Ownership: the host table is borrowed for the plugin's life; per-task
 * state is owned here and freed when the task ends or is cancelled; causes
 * are host-freeable (host->alloc).
 */
#ifndef KGYM_PYTHON_WORKFLOW_H
#define KGYM_PYTHON_WORKFLOW_H

#include <stdbool.h>

#include <jansson.h>
#include <kgym/plugin.h>

#include "route.h"

/*
 * pw_init() reads, from the workflow's config section ([plugin.kernelbench]):
 *   reference_cache_entries   reference timings kept in memory (default 1024,
 *                             0 turns the cache off; shared with the native
 *                             flow's cubin cache, each has its own entries)
 *   max_source_bytes          reference_code and kernel_code, each (1M)
 *   timing_rel_precision      the adaptive stop of timing (the harness's)
 * and fails with a cause naming the key when a value is malformed.
 */
int	pw_init(const struct kgym_host *host, const struct kgym_plugin_handle *self,
	    char **ret_cause);
void	pw_fini(void);
/* A payload (the task's) of route->flow ROUTE_PYTHON; the task runs its
 * job on route->backend. */
int	pw_validate(const json_t *payload, const struct route *route, char **ret_cause);
int	pw_start(struct kgym_task *task, const struct route *route, char **ret_cause);
void	pw_cancel(struct kgym_task *task);

#endif /* KGYM_PYTHON_WORKFLOW_H */
