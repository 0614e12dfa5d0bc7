/*
 * worker.h -- kgymd-worker's internal interfaces.
 *
 * kgymd-worker is the sandboxed process that runs jobs (ARCHITECTURE.md,
 * "Processes" and "The sandbox"): main.c (start-up, the job loop), whost.c
 * (the host table backends see inside a worker), gpuinfo.c (first CUDA
 * contact); the sandbox library, lib/sandbox.c (rlimits, Landlock,
 * seccomp).  Ownership: json_t results are new references the
 * caller owns; causes are malloc'd.
 */
#ifndef KGYM_WORKER_H
#define KGYM_WORKER_H

#include <jansson.h>

#include "kgym/plugin.h"

/* fd 3 is the socketpair to kgymd (set up by proc.c before exec). */
#define WORKER_CHANNEL_FD	3

/* gpuinfo.c: initialise CUDA on the pinned GPU; {name, memory_bytes} or NULL. */
json_t	*gpuinfo_init(char **ret_cause);

/* whost.c: the host table for backends in this worker. */
const struct kgym_host *whost_table(void);
/* Route the process's log lines to the parent as LOG messages. */
void	whost_log_to_parent(void);
/* Frame limit for messages from the parent. */
void	whost_set_max_message(size_t max);

#endif /* KGYM_WORKER_H */
