/*
 * kgym/sandbox.h -- the worker's sandbox: rlimits, Landlock and a seccomp
 * filter, as a small library (lib/sandbox.c; its Landlock layer in
 * lib/sandbox_landlock.c).
 *
 * Ownership: the policy and every string it points to stay the caller's and
 * are only read; a *ret_cause is malloc'd and the caller frees it.
 *
 * A kgymd-worker sets up its backends (CUDA initialisation, NVRTC loading:
 * things that need the full system) and then calls sandbox_enter() once,
 * before it reads its first job (ARCHITECTURE.md, "The sandbox").  There is
 * no way out: every layer holds for the life of the process, and a layer
 * that cannot be put in place makes sandbox_enter() fail, after which the
 * worker must not run jobs.  The python backend's libkgym_sandbox.so puts
 * its job processes under the same layers through this library.
 *
 * The library needs nothing of kgymd: it logs through the callback set with
 * sandbox_set_log() and nowhere else.  It is linked statically into its
 * users (never installed as a shared object), so the version below guards
 * against a user built against another copy of this header:
 * sandbox_version() == KGYM_SANDBOX_VERSION.  Evolution is append-only:
 * new fields go at the end of struct sandbox_policy (zero meaning the old
 * behaviour), and any other change bumps the version.
 */
#ifndef KGYM_SANDBOX_H
#define KGYM_SANDBOX_H

#include <stdbool.h>
#include <stdint.h>

#define KGYM_SANDBOX_VERSION	2	/* 2: sandbox_landlock_thread() */

enum sandbox_log_level {
	SANDBOX_LOG_DEBUG,
	SANDBOX_LOG_INFO,
	SANDBOX_LOG_WARNING,
};

/*
 * Where the library's messages go (a missing path, a Landlock ABI that binds
 * one thread, a kernel without Landlock): fn(level, message, arg), message
 * being borrowed for the call.  NULL, the default, drops them.  Process-wide;
 * set it before sandbox_enter().  Failures never travel this way: they are
 * returned with a cause.
 */
void	sandbox_set_log(void (*fn)(enum sandbox_log_level level, const char *msg, void *arg),
	    void *arg);

/* KGYM_SANDBOX_VERSION of the library as built. */
int	sandbox_version(void);

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
	/*
	 * The compiler profile, for one kind of process only: a KernelBench
	 * candidate whose backend compiles ("triton": ptxas and a C compiler
	 * for Triton's launcher; "cuda": load_inline's ninja, nvcc and the
	 * host toolchain).  Never a worker's, never a reference's.
	 *
	 * Off (the default): creating a process or running a program kills,
	 * and Landlock grants no EXECUTE right anywhere.  On: the filter also
	 * allows process creation (fork, vfork, clone without CLONE_NEW*),
	 * execve and what compilers call around it (sandbox_exec_syscalls());
	 * Landlock grants EXECUTE on exec_paths and on the dynamic loader only,
	 * so exec is for the listed compilers alone; and Landlock becomes
	 * mandatory (sandbox_enter() refuses without it).  Everything started
	 * inherits the filter, the Landlock domain and the rlimits: a compiler
	 * can no more open a socket or read the task store than the candidate.
	 */
	bool allow_exec_compilers;
	const char *const *exec_paths;	   /* absolute files or directories, NULL-terminated */
	/*
	 * /proc as a runtime needs it, and nothing that tells of the host:
	 * of its own /proc/PID (and so /proc/self) what a runtime reads of
	 * itself (fd, status, maps, ...; not environ, cmdline, mounts, net,
	 * cgroup), of the host-wide entries the machine's figures (cpuinfo,
	 * meminfo, stat, sys, ...; not locks, the kernel's command line), and
	 * no other process's directory -- their command lines name kgymd's
	 * files, their environments its directories.  Off: all of /proc.
	 */
	bool private_proc;
};

struct sandbox_report {
	bool seccomp;			/* the filter is installed */
	int landlock_abi;		/* Landlock ABI in force; 0 = not available */
};

/*
 * Check a policy without applying anything: work_dir set and absolute,
 * limits positive, no extra system call from the list that no backend may
 * have (sandbox_never_syscalls()); exec_paths given exactly when
 * allow_exec_compilers is, each absolute, none of them "/" and none above
 * or below a writable path (work_dir, rw_paths: nothing written may be
 * executed).  Returns 0, -EINVAL or -EPERM with a cause.  Each function
 * below calls it first.
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
 * directories read-only, the GPU device nodes for a GPU worker, nothing else;
 * executable only exec_paths and the dynamic loader, under the compiler
 * profile, and nothing at all without it.  Sets PR_SET_NO_NEW_PRIVS.  Returns 0; -EOPNOTSUPP when the kernel has no
 * Landlock (the caller decides); any other -errno means the ruleset could not
 * be made complete and the worker must refuse to run jobs.
 */
int	sandbox_landlock(const struct sandbox_policy *p, char **ret_cause);

/*
 * Narrow the calling thread alone, further (Landlock domains nest), to
 * reading read_dirs and reading and writing rw_dirs (never executing);
 * every other file is out of its reach.  Both lists are NULL-terminated
 * and may be NULL; a missing path gets no rule (a rule only grants).
 * Only file-system rights are handled, never with TSYNC: the process's
 * other threads keep what they had.  For a thread that runs a tool on a
 * job's input inside a sandboxed worker (the nvrtc backend's NVRTC
 * thread), which must not read what the worker may.  Sets
 * PR_SET_NO_NEW_PRIVS on the thread only if landlock_restrict_self
 * refuses without it (never the case inside the sandbox, whose filter
 * would kill that prctl).  Returns 0; -EOPNOTSUPP when the kernel has no
 * Landlock; any other -errno with a cause, and then the thread must not
 * run the tool.
 */
int	sandbox_landlock_thread(const char *const *read_dirs, const char *const *rw_dirs,
	    char **ret_cause);

/*
 * Set PR_SET_NO_NEW_PRIVS and install the seccomp filter on every thread of
 * the process (TSYNC): the common allowlist, the GPU list for a GPU worker
 * and the policy's extra_syscalls (and, for the compiler profile, its own
 * list); anything else kills the process with SIGSYS.  Returns 0 or -errno
 * (any libseccomp or kernel error: fail closed).  Alone it does not limit
 * what the compiler profile may execute -- that is Landlock's part: use
 * sandbox_enter(), which refuses the profile without Landlock.
 */
int	sandbox_seccomp(const struct sandbox_policy *p, char **ret_cause);

/*
 * All of it, in order: rlimits, Landlock, seccomp.  A kernel without
 * Landlock is logged and reported as landlock_abi 0 -- except under the
 * compiler profile, which then fails with -EOPNOTSUPP (Landlock alone
 * limits what may be executed); every other failure returns -errno with a
 * cause, and the worker must not run jobs.  *ret_report is written on
 * success only.
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
 * namespace administration, identity changes.  Process creation and exec
 * come only with allow_exec_compilers, never through extra_syscalls.
 */
const char *const *sandbox_never_syscalls(void);

/*
 * Names the compiler profile allows beyond the common (and GPU) set
 * (NULL-terminated, static).  It also widens clone to processes and turns
 * a few calls into soft failures; sandbox_syscall_note() says which.
 */
const char *const *sandbox_exec_syscalls(void);

/*
 * One line on how the filter treats `name` beyond plain allow or kill (an
 * argument condition, or an errno instead of death), or NULL.  Static.
 */
const char *sandbox_syscall_note(const char *name);

#endif /* KGYM_SANDBOX_H */
