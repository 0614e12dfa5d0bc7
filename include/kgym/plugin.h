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
 */
#ifndef KGYM_PLUGIN_H
#define KGYM_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KGYM_PLUGIN_ABI_MAJOR	1
#define KGYM_PLUGIN_ABI_MINOR	0

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
	KGYM_PLUGIN_TOOLKIT = 2,	/* correctness/timing/profiling helpers, in workers */
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
	 * of DESIGN §5; the host adds task_id and metadata it owns (queue_ms,
	 * run_ms, attempt) and derives the task's terminal state from
	 * result.status ("completed" or "failed").  After this returns the task
	 * handle is invalid.  0 or -errno.
	 */
	int (*task_finish)(struct kgym_task *task, json_t *result);
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
	 * Called once after loading (and again after a reload of config).
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
	 * later from a timer or job completion.  0 or -errno (the host then
	 * fails the task with SYSTEM_ERROR and the cause).
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
};

#ifdef __cplusplus
}
#endif

#endif /* KGYM_PLUGIN_H */
