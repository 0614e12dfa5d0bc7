/*
 * native_workflow.h -- the task flow shared by the workflows that judge
 * native (backend "nvrtc") payloads: kernelbench and kernel_simple.
 *
 * Both run in the daemon and do the same three things with a task: check
 * its payload at submit time (spec.c's parser plus the workflow's own
 * fields; the parsed spec is kept for the task's start, parse_memo.h),
 * compile the reference and the candidate in a sandboxed CPU job,
 * then evaluate them in a GPU job and turn that job's result into the
 * task's.  They differ only in what struct nw_kind below says: the evaluate
 * job's mode, whether a reference kernel is required, what else the
 * payload carries (kernel_simple's test cases) and what the result keeps.
 * Each plugin .so links its own copy of native_workflow.c and hands it its
 * kind in init(); the plugin struct's operations are the nw_* functions.
 *
 * Ownership: the kind and the host table are borrowed for the plugin's
 * life; per-task state is owned here and freed when the task ends or is
 * cancelled; causes are host-freeable (host->alloc).
 */
#ifndef KGYM_NATIVE_WORKFLOW_H
#define KGYM_NATIVE_WORKFLOW_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>
#include <kgym/plugin.h>

#include "route.h"
#include "spec.h"

/* What one workflow adds to the shared flow. */
struct nw_kind {
	const char *name;		/* the workflow, for messages: "kernelbench" */
	const char *mode;		/* the evaluate job's "mode" */
	unsigned int spec_flags;	/* spec_parse() flags (SPEC_REFERENCE_OPTIONAL) */
	bool run_performance;		/* the default of payload.run_performance */
	bool speedup;			/* false: the result's speedup is always null */
	/*
	 * Check the workflow's own payload fields once the native spec has
	 * parsed (`ev`: evaluated with the problem's sizes).  0, or -EINVAL
	 * with a message naming the field in err.  NULL: nothing to check.
	 */
	int (*validate)(const json_t *payload, const struct spec *spec,
	    const struct spec_eval *ev, char *err, size_t errlen);
	/* Copy the workflow's own payload fields into the evaluate request. */
	void (*request)(const json_t *payload, json_t *request);
};

/*
 * The plugin operations.  nw_init() also reads the plugin's config section:
 *   arch            NVRTC architecture when no GPU worker has reported one
 *                   (default sm_90)
 *   max_source_bytes, max_tensor_bytes   spec limits (defaults: spec.h's)
 *   reference_cache_entries   reference cubins kept in memory (default
 *                   1024; 0 turns the cache off)
 *   reference_cache_bytes     ... and their total size (default 64M)
 *   parsed_payload_bytes      payloads parsed at submit kept for their
 *                   task's start, so it need not parse them again
 *                   (default 4M, counting sources and 4K a payload;
 *                   0: parse again at start)
 *   timing_rel_precision, max_timing_trials, max_timing_ms   timing
 *                   settings passed to the evaluate job (default: the
 *                   backend's)
 * and fails with a cause naming the key when a value is malformed.
 */
int	nw_init(const struct nw_kind *kind, const struct kgym_host *host,
	    const struct kgym_plugin_handle *self, char **ret_cause);
void	nw_fini(void);
/*
 * The plugin operations of a workflow whose only flow is this one
 * (kernel_simple): they decide the route (route.h) and go on with the
 * _on variants, which a workflow of several flows (kernelbench) calls
 * with the route it decided.  The task's state begins with its route.
 */
int	nw_validate(const json_t *payload, char **ret_cause);
int	nw_start(struct kgym_task *task, char **ret_cause);
int	nw_validate_on(const json_t *payload, const struct route *route, char **ret_cause);
int	nw_start_on(struct kgym_task *task, const struct route *route, char **ret_cause);
void	nw_cancel(struct kgym_task *task);

/*
 * How many times this process has parsed a native payload (validate, or
 * start when validate's result was not kept): tests show with it that a
 * task kept in memory since its submit is parsed once in the daemon.
 */
unsigned long nw_parse_count(void);

#endif /* KGYM_NATIVE_WORKFLOW_H */
