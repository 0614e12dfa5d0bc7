/*
 * route.h -- where a task of a workflow goes: which flow runs it (native
 * or KernelBench-format) and which backend plugin runs its jobs.
 *
 * One rule, decided here from payload.backend: at submit (validate), to
 * refuse a payload no flow serves, and at the task's start, once for the
 * run.  The start's decision is then handed on, never made again: the
 * flow keeps it as the first member of its per-task state, its jobs ask
 * for route.backend, and cancel reads it back (route_of_task()) instead of
 * looking at the payload again.
 *
 * Ownership: a struct route points only to static strings.
 */
#ifndef KGYM_ROUTE_H
#define KGYM_ROUTE_H

#include <stddef.h>

#include <jansson.h>
#include <kgym/plugin.h>

/* The flows; a workflow serves a set of them. */
enum route_flow {
	ROUTE_NATIVE = 1 << 0,		/* native_workflow.c: compile + evaluate (nvrtc) */
	ROUTE_PYTHON = 1 << 1,		/* python_workflow.c: one python-backend job */
};

struct route {
	enum route_flow flow;
	const char *backend;		/* the backend plugin its jobs ask for
					 * ("nvrtc", "torch", "triton", "cuda") */
};

/*
 * The route of `payload` for `workflow`, which serves the flows in the
 * mask `flows`.  0, or -EINVAL with a message naming payload.backend in
 * err (missing, not a string, or no flow of this workflow serves it).
 */
int	route_decide(const json_t *payload, unsigned int flows, const char *workflow,
	    struct route *ret, char *err, size_t errlen);

/*
 * The route a running task was started on: the first member of whatever
 * per-task state its flow set (host->task_set_data).  NULL when the task
 * has no state (not started, or its flow let go of it).
 */
const struct route *route_of_task(const struct kgym_host *host, const struct kgym_task *task);

#endif /* KGYM_ROUTE_H */
