/*
 * sandbox.h -- the worker's sandbox: rlimits, Landlock and a seccomp filter.
 *
 * Ownership: the policy and every string it points to stay the caller's and
 * are only read; a *ret_cause is malloc'd and the caller frees it.
 *
 * A kgymd-worker sets up its backends (CUDA initialisation, NVRTC loading:
 * things that need the full system) and then calls sandbox_enter() once,
 * before it reads its first job (DESIGN.md §7).  There is no way out: every
 * layer holds for the life of the process, and a layer that cannot be put in
 * place makes sandbox_enter() fail, after which the worker must not run jobs.
 */
#ifndef KGYM_WORKER_SANDBOX_H
#define KGYM_WORKER_SANDBOX_H

#include <stdbool.h>
#include <stdint.h>

struct sandbox_policy {
	const char *work_dir;		   /* the only read-write directory (HOME, TMPDIR) */
	bool gpu;			   /* GPU worker: allow /dev/nvidia*, the CUDA driver's calls */
	const char *const *ro_paths;	   /* extra read-only paths (NULL-terminated, may be NULL) */
	const char *const *rw_paths;	   /* extra read-write paths (NULL-terminated, may be NULL) */
	const char *const *extra_syscalls; /* a backend's documented additions (names), NULL-terminated */
	int64_t memory_bytes;		   /* RLIMIT_AS (CPU worker) or RLIMIT_DATA (GPU worker) */
	int max_files;			   /* RLIMIT_NOFILE */
	int max_processes;		   /* RLIMIT_NPROC */
	int64_t max_file_bytes;		   /* RLIMIT_FSIZE */
	int64_t cpu_seconds;		   /* RLIMIT_CPU (0 = none) */
};

struct sandbox_report {
	bool seccomp;			/* the filter is installed */
	int landlock_abi;		/* Landlock ABI in force; 0 = not available */
};

/*
 * Check a policy without applying anything: work_dir set and absolute,
 * limits positive, no extra system call from the list that no backend may
 * have (sandbox_never_syscalls()).  Returns 0, -EINVAL or -EPERM with a cause.
 * Each function below calls it first.
 */
int	sandbox_policy_check(const struct sandbox_policy *p, char **ret_cause);

/*
 * Resource limits of the calling process: RLIMIT_CORE 0, RLIMIT_NOFILE,
 * RLIMIT_NPROC, RLIMIT_FSIZE, RLIMIT_CPU (when cpu_seconds > 0), and memory:
 * RLIMIT_AS for a CPU worker, RLIMIT_DATA for a GPU worker (the CUDA driver
 * reserves far more address space than it uses).  Soft and hard limits are
 * set alike, never above a hard limit already in force.  Also makes the
 * process non-dumpable (PR_SET_DUMPABLE 0).  Returns 0 or -errno.
 */
int	sandbox_rlimits(const struct sandbox_policy *p, char **ret_cause);

/*
 * The Landlock ABI version of the running kernel (>= 1), or -EOPNOTSUPP when
 * the kernel has no Landlock or it is disabled.  Applies nothing.
 */
int	sandbox_landlock_abi(void);

/*
 * Restrict the file system (and, where the ABI has them, TCP ports, abstract
 * Unix sockets and signals) to the policy: work_dir read-write, system
 * directories read-only, the GPU device nodes for a GPU worker, nothing else.
 * Sets PR_SET_NO_NEW_PRIVS.  Returns 0; -EOPNOTSUPP when the kernel has no
 * Landlock (the caller decides); any other -errno means the ruleset could not
 * be made complete and the worker must refuse to run jobs.
 */
int	sandbox_landlock(const struct sandbox_policy *p, char **ret_cause);

/*
 * Set PR_SET_NO_NEW_PRIVS and install the seccomp filter on every thread of
 * the process (TSYNC): the common allowlist, the GPU list for a GPU worker
 * and the policy's extra_syscalls; anything else kills the process with
 * SIGSYS.  Returns 0 or -errno (any libseccomp or kernel error: fail closed).
 */
int	sandbox_seccomp(const struct sandbox_policy *p, char **ret_cause);

/*
 * All of it, in order: rlimits, Landlock, seccomp.  A kernel without
 * Landlock is logged and reported as landlock_abi 0; every other failure
 * returns -errno with a cause, and the worker must not run jobs.
 * *ret_report is written on success only.
 */
int	sandbox_enter(const struct sandbox_policy *p, struct sandbox_report *ret_report,
	    char **ret_cause);

/*
 * Names of the system calls the filter allows (NULL-terminated, static):
 * the common list, and what a GPU worker gets beyond it.  Some are allowed
 * only with certain arguments; sandbox_syscall_note() says which.
 */
const char *const *sandbox_common_syscalls(void);
const char *const *sandbox_gpu_syscalls(void);

/*
 * Names that no backend may add through extra_syscalls (NULL-terminated,
 * static): process creation, exec, new sockets, debugging, kernel and
 * namespace administration, identity changes.
 */
const char *const *sandbox_never_syscalls(void);

/*
 * One line on how the filter treats `name` beyond plain allow or kill (an
 * argument condition, or an errno instead of death), or NULL.  Static.
 */
const char *sandbox_syscall_note(const char *name);

#endif /* KGYM_WORKER_SANDBOX_H */
