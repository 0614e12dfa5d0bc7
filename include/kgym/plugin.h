/*
 * kgym/plugin.h -- the kgymd plugin ABI.
 *
 * This is the only public C interface of kgymd.  A plugin is a shared object
 * that exports exactly one symbol, KGYM_PLUGIN_SYMBOL, a `const struct
 * kgym_plugin`.  kgymd dlopen()s it, checks the fields that come first
 * (ABI major/minor, struct size, build signature) before it reads anything
 * else, and hands the plugin a `struct kgym_host` table of host functions.
 * Plugins link nothing of kgymd: everything they need from the daemon comes
 * through that table.  Plugins that take or give JSON link libjansson
 * themselves (kgym-plugin.pc says so).
 *
 * Ownership: arguments are borrowed for the duration of a call unless the
 * function's comment says "steals"; strings a plugin hands back through a
 * `char **cause` are allocated with host->alloc (or strdup) and freed by the
 * host.
 *
 * Rules of evolution (Redis-module style, append only):
 *   - ABI_MAJOR changes when anything already here changes meaning, size or
 *     position.  The loader refuses a plugin whose major differs.
 *   - ABI_MINOR grows when fields or host functions are appended.  A plugin
 *     built against a newer minor than the daemon is refused; an older one
 *     is accepted and the host reads only the first `struct_size` bytes of
 *     its struct (fields past that are treated as NULL).
 *   - Nothing is ever removed or reordered within a major.
 *
 * Changelog:
 *   1.0  (kgymd 0.1) first version: workflow ops (validate, start, cancel),
 *        backend ops (prepare, run), host table with log, alloc, config,
 *        task accessors, timers and task completion.
 *   1.1  (kgymd 0.1) sandboxed jobs: host->job_run and ->gpu_arch for
 *        workflows; host->gpu_lock and ->phase for backends inside a
 *        worker; the plugin field `syscalls` (a backend's documented seccomp
 *        additions).
 *   1.2  host->task_time_left: the task's deadline, which the daemon owns,
 *        for workflows to hand down to their jobs (ARCHITECTURE.md,
 *        "Who owns which clock").
 *   1.3  toolkits for real: the plugin field `toolkit_api` (required of a
 *        toolkit built for 1.3 or later) hands out the APIs a toolkit
 *        serves (kgym/toolkit.h); host->toolkit finds one for a backend,
 *        in the daemon and in workers, which now load toolkits too.
 *   1.4  kgym_job_spec.affinity: what a job can reuse in a worker that ran
 *        a job of the same key; the pool sends such a job there when it
 *        can (ARCHITECTURE.md, "Affinity").
 */
#ifndef KGYM_PLUGIN_H
#define KGYM_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "kgym/toolkit.h"

#ifdef __cplusplus
extern "C" {
#endif

#define KGYM_PLUGIN_ABI_MAJOR	1
#define KGYM_PLUGIN_ABI_MINOR	4

/* The one symbol a plugin exports. */
#define KGYM_PLUGIN_SYMBOL	"kgym_plugin"

/*
 * The build signature catches plugins built with an incompatible compiler
 * model (pointer width, byte order) or against a different jansson major,
 * which the ABI numbers alone would not.
 */
#define KGYM__STR2(x)	#x
#define KGYM__STR(x)	KGYM__STR2(x)
#define KGYM_BUILD_SIGNATURE					\
	"kgym-abi-" KGYM__STR(KGYM_PLUGIN_ABI_MAJOR)		\
	"/ptr" KGYM__STR(__SIZEOF_POINTER__)			\
	"/" KGYM__STR(__BYTE_ORDER__)				\
	"/jansson" KGYM__STR(JANSSON_MAJOR_VERSION)

enum kgym_plugin_kind {
	KGYM_PLUGIN_BACKEND = 1,	/* runs candidates, inside kgymd-worker */
	KGYM_PLUGIN_TOOLKIT = 2,	/* evaluation pieces backends use (ABI 1.3), everywhere */
	KGYM_PLUGIN_WORKFLOW = 3,	/* drives a task, in the daemon (parent) */
};

enum kgym_log_level {
	KGYM_LOG_ERROR = 0,
	KGYM_LOG_WARN = 1,
	KGYM_LOG_INFO = 2,
	KGYM_LOG_DEBUG = 3,
};

/* Opaque handles owned by the host. */
struct kgym_task;		/* one accepted task, while it runs */
struct kgym_plugin_handle;	/* the host's record of one loaded plugin */

/* Where a job runs (ABI 1.1). */
enum kgym_job_where {
	KGYM_JOB_CPU = 1,	/* a CPU worker: no GPU device access (compiling) */
	KGYM_JOB_GPU = 2,	/* a GPU slot worker, holding its GPU's lock shared */
};

/* What a workflow asks of a sandboxed job (ABI 1.1).  Borrowed by job_run. */
struct kgym_job_spec {
	uint32_t struct_size;		/* sizeof(struct kgym_job_spec) */
	const char *backend;		/* a name some backend plugin serves */
	enum kgym_job_where where;
	const json_t *request;		/* handed to the backend's run() */
	uint64_t gpu_memory_bytes;	/* device memory the job needs; 0: unknown */
	const char *phase;		/* first phase: "compile", "correctness", ... */
	/*
	 * ABI 1.4: a key of what the job can reuse in a worker whose last job
	 * had the same key (the python backend: the reference's judge server);
	 * the pool prefers such a worker, never waiting for it.  NULL: none.
	 * A spec of an older plugin ends before it (struct_size).
	 */
	const char *affinity;
};

/* How a job ended (ABI 1.1).  Valid during the done callback only. */
struct kgym_job_outcome {
	int ok;				/* 1: the backend returned `result` */
	const json_t *result;		/* the backend's result object when ok */
	const char *error_code;		/* when !ok: RUNTIME_ERROR, TIMEOUT_ERROR, ... */
	const char *error_message;	/* when !ok: the obituary, naming the phase */
	const char *phase;		/* the phase the job was in at the end */
	const char *worker;		/* the worker's name, e.g. "gpu0.1" */
};

/* GPU lock modes a backend may ask for inside a job (ABI 1.1). */
enum kgym_gpu_lock {
	KGYM_GPU_SHARED = 1,	/* ordinary GPU work beside other jobs */
	KGYM_GPU_EXCLUSIVE = 2,	/* timing: no other job touches the GPU */
};

/*
 * Host functions, handed to every plugin at init.  Versioned like the plugin
 * struct: a plugin must check `struct_size` before using a function appended
 * after the minor it was built against.
 */
struct kgym_host {
	uint16_t abi_major;
	uint16_t abi_minor;
	uint32_t struct_size;

	/* Logging into kgymd's log, tagged with the plugin's name. */
	void (*log)(const struct kgym_plugin_handle *self, enum kgym_log_level level,
	    const char *fmt, ...) __attribute__((format(printf, 3, 4)));

	/* Memory the host may free (used for `cause` strings). */
	void *(*alloc)(size_t size);
	void (*free)(void *ptr);

	/*
	 * The value of `key` in this plugin's [plugin.NAME] config section, or
	 * NULL when unset.  Valid until the next reload.
	 */
	const char *(*config_get)(const struct kgym_plugin_handle *self, const char *key);

	/* --- task accessors (workflows) --- */
	const char *(*task_id)(const struct kgym_task *task);
	/* The task's payload object; borrowed, valid while the task runs. */
	const json_t *(*task_payload)(const struct kgym_task *task);
	/* One pointer of plugin state per task. */
	void (*task_set_data)(struct kgym_task *task, void *data);
	void *(*task_get_data)(const struct kgym_task *task);

	/*
	 * Call `cb` after `ms` milliseconds on the daemon's loop.  At most one
	 * timer per task; a second call replaces the first.  Cancelled
	 * automatically when the task ends.  0 or -errno.
	 */
	int (*task_timer)(struct kgym_task *task, unsigned int ms,
	    void (*cb)(struct kgym_task *task));

	/*
	 * End the task.  `result` (steals the reference) is the result object
	 * of kgymd-protocol(7), RESULTS; the host adds task_id and metadata it owns (queue_ms,
	 * run_ms, attempt) and derives the task's terminal state from
	 * result.status ("completed" or "failed").  After this returns the task
	 * handle is invalid.  0 or -errno.
	 */
	int (*task_finish)(struct kgym_task *task, json_t *result);

	/* --- ABI 1.1 --- */

	/*
	 * Workflows: run a job in a sandboxed worker; `done` is called once on
	 * the daemon's loop when it ends, however it ends (unless the task
	 * ends first, e.g. cancelled: then the job is killed and `done` is not
	 * called).  One job per task at a time.  0, or -errno with *ret_cause:
	 * -ENOENT no backend of that name, -E2BIG the job can never fit a GPU
	 * (its memory need exceeds every GPU's), -EBUSY a job already runs.
	 */
	int (*job_run)(struct kgym_task *task, const struct kgym_job_spec *spec,
	    void (*done)(struct kgym_task *task, const struct kgym_job_outcome *outcome),
	    char **ret_cause);

	/*
	 * Backends, inside a GPU worker: change this job's hold on the GPU
	 * lock; blocks until granted.  Exclusive is for timing.  NULL in the
	 * daemon.  0 or -errno.
	 */
	int (*gpu_lock)(enum kgym_gpu_lock mode);
	/*
	 * Backends, inside a worker: the job enters a new phase ("timing", ...);
	 * the parent's deadline for that phase starts now.  NULL in the daemon.
	 */
	int (*phase)(const char *name);

	/*
	 * Workflows: the NVRTC architecture of this daemon's GPUs ("sm_90"),
	 * learnt from the GPU workers, or NULL while none has reported yet (or
	 * there is no GPU).  With GPUs of several architectures, the lowest.
	 */
	const char *(*gpu_arch)(void);

	/* --- ABI 1.2 --- */

	/*
	 * Workflows: seconds left before the task's deadline (its timeout_s,
	 * or the daemon's default_timeout, counted from its start), never
	 * below 0.  The daemon owns that clock and ends the task when it runs
	 * out; a workflow hands what is left down to its jobs, so that the
	 * backend's own phase deadlines end first, with an error that names
	 * the phase.
	 */
	double (*task_time_left)(const struct kgym_task *task);

	/* --- ABI 1.3 --- */

	/*
	 * Any plugin, in the daemon and in workers: the API `name` of a loaded
	 * toolkit (kgym/toolkit.h), if its version is at least `min_version`.
	 * NULL otherwise, with *ret_cause (host->alloc'd; may be NULL) naming
	 * the API and saying why: no toolkit serves it, or the one that does
	 * is older.  Backends ask in prepare() and fail closed there when a
	 * toolkit they need is missing.  The API stays valid while the process
	 * runs (toolkits are unloaded after every other kind).
	 */
	const struct kgym_toolkit_api *(*toolkit)(const char *name, uint32_t min_version,
	    char **ret_cause);
};

/*
 * The plugin's exported struct.  The first four fields are the ABI guard and
 * protect the rest: the loader reads nothing after them until they check out.
 */
struct kgym_plugin {
	uint16_t abi_major;		/* KGYM_PLUGIN_ABI_MAJOR */
	uint16_t abi_minor;		/* KGYM_PLUGIN_ABI_MINOR */
	uint32_t struct_size;		/* sizeof(struct kgym_plugin) */
	const char *build_signature;	/* KGYM_BUILD_SIGNATURE */

	const char *name;		/* unique, [a-z0-9_]+ */
	enum kgym_plugin_kind kind;
	const char *version;		/* free-form, e.g. "0.1.0" */
	/*
	 * NULL-terminated list of what this plugin serves: workflow names for a
	 * workflow plugin, backend names (as in payload.backend) for a backend.
	 */
	const char *const *serves;

	/*
	 * Called once after loading.  Must not touch CUDA: the daemon loads
	 * every plugin and never initialises CUDA (prepare() does that, in a
	 * worker).  A reload changes what config_get returns, not init's view.
	 * Returns 0 or -errno with a reason in *ret_cause.  Required.
	 */
	int (*init)(const struct kgym_host *host, const struct kgym_plugin_handle *self,
	    char **ret_cause);
	/* Called before unloading.  Required. */
	void (*fini)(void);

	/* --- workflow operations (required for KGYM_PLUGIN_WORKFLOW) --- */

	/*
	 * Check a task's payload before it is accepted.  Must not block.
	 * 0, or -EINVAL with a message naming the field in *ret_cause.
	 */
	int (*validate)(const json_t *payload, char **ret_cause);
	/*
	 * Begin running a task.  May finish it at once (host->task_finish) or
	 * later from a timer or job completion.  0 or -errno: the host then
	 * fails the task with the cause, as RESOURCE_ERROR for -E2BIG (it can
	 * never get what it needs, e.g. from job_run) and SYSTEM_ERROR otherwise.
	 */
	int (*start)(struct kgym_task *task, char **ret_cause);
	/*
	 * The task is being cancelled or the daemon is shutting down: release
	 * the plugin's per-task state.  The host ends the task itself; the
	 * plugin must not call task_finish from here.  Required for workflows.
	 */
	void (*cancel)(struct kgym_task *task);

	/* --- backend operations (required for KGYM_PLUGIN_BACKEND) --- */

	/*
	 * In the worker, before the sandbox is installed: initialise what
	 * needs privileges the sandbox takes away (e.g. the GPU driver).
	 */
	int (*prepare)(char **ret_cause);
	/*
	 * In the worker, inside the sandbox: run one job described by
	 * `request` and return its result object in *ret_result.
	 */
	int (*run)(const json_t *request, json_t **ret_result, char **ret_cause);

	/* --- ABI 1.1 --- */

	/*
	 * Backends: system calls this backend needs beyond the sandbox's common
	 * set, NULL-terminated names, each documented in the plugin.  NULL: none.
	 */
	const char *const *syscalls;

	/* --- ABI 1.3 --- */

	/*
	 * Toolkits (required of one built for 1.3 or later): the API struct
	 * for `name`, one of this plugin's `serves`, or NULL.  Called after
	 * init(); the struct must stay valid until fini().
	 */
	const struct kgym_toolkit_api *(*toolkit_api)(const char *name);
};

#ifdef __cplusplus
}
#endif

#endif /* KGYM_PLUGIN_H */
