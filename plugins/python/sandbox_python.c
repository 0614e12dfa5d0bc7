/*
 * sandbox_python.c -- libkgym_sandbox.so: the worker's sandbox for the
 * Python harness's children.
 *
 * The python backend's zygote (kgym_harness.py) runs outside kgymd-worker's
 * sandbox: it is started in prepare(), before the worker confines itself,
 * because a seccomp'd worker may not fork or exec.  Every job's two
 * children -- the reference and the candidate -- therefore confine
 * themselves, first thing after fork(), by calling the one function this
 * library exports, through ctypes.  It links the worker's sandbox library
 * (lib/sandbox.c, include/kgym/sandbox.h) and nothing else of kgymd, so the
 * children get the same three layers as a worker (rlimits, Landlock,
 * seccomp with a kill-the-process default), with the Python profile below
 * added to the filter.  If the library cannot be loaded or the function
 * fails, the harness fails the job (fail closed).
 *
 * The Python profile: what CPython and torch on the CPU need beyond the
 * worker's common set -- nothing.  Measured with strace -f on Debian 12
 * (python3.11, torch 1.13, OMP_NUM_THREADS=2) over the harness's whole
 * path (correctness and timing) for the six examples of examples/kernelbench:
 * after the filter, the children called brk, clone (threads: CLONE_THREAD,
 * allowed), clone3 (ENOSYS by the common set's special, glibc falls back to
 * clone), close, exit_group, fcntl, futex, getpid, ioctl (TCGETS from
 * isatty: ENOTTY by the special), lseek, mmap, mprotect, munmap,
 * newfstatat, openat, prctl (PR_SET_NAME of the OpenMP threads), read,
 * recvfrom, rseq, rt_sigprocmask, sendto and set_robust_list -- all in the
 * common set.  So the profile adds no system call: no exec, no new process,
 * no socket; a GPU child gets the GPU worker's list (sandbox.c) and nothing
 * more.  python_syscalls[] below is where an addition would go, one name
 * per line with the reason.
 *
 * The compiler profile (KGYM_PY_SANDBOX_EXEC): the candidate process of a
 * "triton" or "cuda" job must run compilers -- Triton's ptxas and a C
 * compiler for its launcher stub, load_inline's ninja, /bin/sh, nvcc and
 * the host toolchain.  For that candidate alone, and only with this flag,
 * the policy sets allow_exec_compilers (sandbox.h): the filter allows
 * process creation and execve, and Landlock grants EXECUTE on the exact
 * programs the harness lists in exec_paths (and the dynamic loader), on
 * nothing else, and never on anything writable; a kernel without Landlock
 * refuses the profile.  The compilers inherit the same filter, domain and
 * limits.  The reference process and torch candidates never pass the flag,
 * so they keep the profile above, in which exec and fork kill.  The
 * harness's compiler_profile() says which program is listed and why.
 */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kgym/sandbox.h"

/* Flags of kgym_sandbox_enter_python(). */
#define KGYM_PY_SANDBOX_EXEC	0x1u	/* the compiler profile: exec_paths may run */
#define KGYM_PY_SANDBOX_PRIVATE_PROC 0x2u /* /proc without other processes (sandbox.h) */

int	kgym_sandbox_enter_python(const char *work_dir, int gpu, const char *const *ro_paths,
	    int64_t memory_bytes, int max_files, int max_processes, int64_t max_file_bytes,
	    int64_t cpu_seconds, unsigned int flags, int *ret_landlock_abi, char *errbuf,
	    size_t errlen, const char *const *exec_paths);

/* The Python profile's additions to the common set: none (see above). */
static const char *const python_syscalls[] = {
	NULL,
};

/*
 * The library's warnings go to the child's stderr (its output.log), the
 * rest nowhere: a job process has no log of kgymd's to write to.
 */
static void
sandbox_python_log(enum sandbox_log_level level, const char *msg, void *arg)
{
	if (level >= SANDBOX_LOG_WARNING)
		fprintf(stderr, "kgym sandbox: warning: %s\n", msg);
}

/*
 * Confine the calling process for good: rlimits, Landlock (work_dir read-
 * write, the system's directories and ro_paths read-only), seccomp with the
 * Python profile; with KGYM_PY_SANDBOX_EXEC, the compiler profile on top,
 * exec_paths (NULL-terminated) being the only programs that may run.
 * exec_paths is the last parameter so that an older library, which does
 * not read it, refuses the flag instead of misreading it.  Call it
 * single-threaded where possible: Landlock before ABI 8 binds the calling
 * thread only (seccomp binds all, TSYNC).  Returns 0 and the Landlock ABI
 * in force (0: the kernel has none), or -errno with a reason in errbuf.
 */
int
kgym_sandbox_enter_python(const char *work_dir, int gpu, const char *const *ro_paths,
    int64_t memory_bytes, int max_files, int max_processes, int64_t max_file_bytes,
    int64_t cpu_seconds, unsigned int flags, int *ret_landlock_abi, char *errbuf,
    size_t errlen, const char *const *exec_paths)
{
	struct sandbox_policy policy = { 0 };
	struct sandbox_report report = { 0 };
	char *cause = NULL;
	int rc;

	if (errbuf != NULL && errlen > 0)
		errbuf[0] = '\0';
	if (sandbox_version() != KGYM_SANDBOX_VERSION) {
		if (errbuf != NULL)
			snprintf(errbuf, errlen, "sandbox: library version %d, header %d",
			    sandbox_version(), KGYM_SANDBOX_VERSION);
		return -EINVAL;
	}
	if ((flags & ~(KGYM_PY_SANDBOX_EXEC | KGYM_PY_SANDBOX_PRIVATE_PROC)) != 0) {
		if (errbuf != NULL)
			snprintf(errbuf, errlen, "sandbox: unknown flags 0x%x", flags);
		return -EINVAL;
	}
	policy.work_dir = work_dir;
	policy.gpu = gpu != 0;
	policy.ro_paths = ro_paths;
	policy.extra_syscalls = python_syscalls;
	policy.memory_bytes = memory_bytes;
	policy.max_files = max_files;
	policy.max_processes = max_processes;
	policy.max_file_bytes = max_file_bytes;
	policy.cpu_seconds = cpu_seconds;
	/* Only with the flag: a stray list alone is refused by the policy check. */
	policy.allow_exec_compilers = (flags & KGYM_PY_SANDBOX_EXEC) != 0;
	policy.exec_paths = exec_paths;
	policy.private_proc = (flags & KGYM_PY_SANDBOX_PRIVATE_PROC) != 0;
	sandbox_set_log(sandbox_python_log, NULL);
	rc = sandbox_enter(&policy, &report, &cause);
	if (rc < 0) {
		if (errbuf != NULL)
			snprintf(errbuf, errlen, "%s", cause != NULL ? cause : strerror(-rc));
		free(cause);
		return rc;
	}
	if (ret_landlock_abi != NULL)
		*ret_landlock_abi = report.landlock_abi;
	return 0;
}
