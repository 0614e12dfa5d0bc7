/*
 * python_workflow.h -- the kernelbench workflow's flow for KernelBench-format
 * payloads (backends "torch", "triton", "cuda"), run by the python backend
 * plugin (plugins/python) in sandboxed Python processes.
 *
 * kernelbench.c dispatches on payload.backend: pw_serves() says whether a
 * payload is this flow's; native ("nvrtc") payloads go to native_workflow.c.
 * Both flows keep their own per-task state; kernelbench.c's cancel asks
 * pw_serves() again to know whose it is (the payload does not change).
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
/* True when payload.backend names a KernelBench-format backend. */
bool	pw_serves(const json_t *payload);
int	pw_validate(const json_t *payload, char **ret_cause);
int	pw_start(struct kgym_task *task, char **ret_cause);
void	pw_cancel(struct kgym_task *task);

#endif /* KGYM_PYTHON_WORKFLOW_H */
