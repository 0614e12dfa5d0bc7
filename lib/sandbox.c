/*
 * sandbox.c -- the worker's sandbox: rlimits, Landlock and a seccomp filter.
 *
 * A small library (include/kgym/sandbox.h) that kgymd-worker and the
 * python backend's libkgym_sandbox.so link: it includes nothing of the
 * daemon and logs only through the callback its user sets
 * (sandbox_set_log()), so a process outside kgymd can use it.
 *
 * A kgymd-worker runs untrusted candidate code in its own address space, so
 * the process itself is the thing to confine (ARCHITECTURE.md, "The
 * sandbox").  The worker
 * first does what needs the whole system -- loading its backends, CUDA
 * initialisation, which opens device nodes, starts driver threads and talks
 * to the MPS socket -- and only then calls sandbox_enter(), which puts three
 * layers in place, each meant to hold if another is missing:
 *
 *  1. rlimits: no core files, bounded descriptors, processes, file size, CPU
 *     time and memory; the process becomes non-dumpable and gives up every
 *     capability (bounding, ambient, permitted), so that a worker started as
 *     root cannot read other processes' /proc files with CAP_SYS_PTRACE or
 *     override file permissions.
 *  2. Landlock: the file system shrinks to the private work directory (read-
 *     write), the system's library directories and a few files of /etc
 *     (read-only), /proc, /sys, a handful of /dev nodes and, for a GPU
 *     worker, the NVIDIA device nodes.  Where the ABI has them, TCP bind and
 *     connect, abstract Unix sockets and signals out of the domain are denied
 *     too.  A kernel without Landlock is reported, and the caller decides.
 *  3. seccomp (libseccomp): an allowlist installed last, on every thread
 *     (TSYNC: the CUDA driver's threads exist by then), whose default is to
 *     kill the whole process, so the parent sees SIGSYS and can say
 *     "sandbox violation".
 *
 * The Landlock layer lives in sandbox_landlock.c (the worker's domain,
 * and one thread's narrower one); this file has the policy, the tables,
 * the rlimits, the filter and the order of sandbox_enter().
 *
 * Like OpenSSH's privsep child, the filter is an allowlist installed late,
 * after everything that needs more has been done; unlike it, a filter that
 * cannot be installed is an error the worker may not ignore (fail closed).
 *
 * The allowlists are tables of names, resolved at install time, so that
 * adding a call is a one-line change and the worker can print what it runs
 * under.  A name unknown on this architecture is skipped.  The few calls that
 * are allowed only with certain arguments, or that fail with an errno rather
 * than kill, are described once, in sandbox_specials[].
 *
 * One process kind gets more: a KernelBench candidate whose backend must
 * compile (Triton's ptxas and launcher stub, load_inline's ninja and nvcc)
 * runs under the *compiler profile* (allow_exec_compilers).  It may create
 * processes and exec, but Landlock then grants EXECUTE on the listed
 * compilers and the dynamic loader only -- no other file anywhere has it,
 * in any profile, and nothing writable may be listed -- and it is refused
 * outright on a kernel without Landlock.  Whatever it starts inherits the
 * same filter, Landlock domain and rlimits (a seccomp filter and a
 * Landlock domain survive fork and execve, and NO_NEW_PRIVS stops a setuid
 * program from shedding them), so a compiler, or something posing as one,
 * cannot open a socket, ptrace, or read the task store either.  Workers
 * and the trusted reference process never get it.
 */
#include "config.h"

#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include <linux/capability.h>

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <seccomp.h>

#include "kgym/sandbox.h"

#include "sandbox_internal.h"

/* ------------------------------------------------------------ logging */

static void (*sandbox_log_fn)(enum sandbox_log_level, const char *, void *);
static void *sandbox_log_arg;

void
sandbox_set_log(void (*fn)(enum sandbox_log_level level, const char *msg, void *arg),
    void *arg)
{
	sandbox_log_fn = fn;
	sandbox_log_arg = arg;
}

int
sandbox_version(void)
{
	return KGYM_SANDBOX_VERSION;
}

void
sandbox_log(enum sandbox_log_level level, const char *fmt, ...)
{
	va_list ap;
	char *msg;

	if (sandbox_log_fn == NULL)
		return;
	va_start(ap, fmt);
	if (vasprintf(&msg, fmt, ap) < 0)
		msg = NULL;
	va_end(ap);
	if (msg == NULL)
		return;		/* no memory: the message is only advice */
	sandbox_log_fn(level, msg, sandbox_log_arg);
	free(msg);
}

/* ---------------------------------------------------------- the tables */

/*
 * What a C program running jobs needs.  No call here creates a process, a
 * socket or a mapping of another process; paths are Landlock's business, not
 * the filter's (seccomp cannot read the strings behind pointers).
 */
static const char *const sandbox_common[] = {
	/* I/O on descriptors the worker has or opens under Landlock */
	"read", "write", "readv", "writev", "pread64", "pwrite64", "lseek",
	"close", "close_range", "dup", "dup2", "dup3", "fcntl", "pipe", "pipe2",
	"fstat", "newfstatat", "statx", "stat", "lstat", "fstatfs", "statfs",
	"access", "faccessat", "faccessat2",
	"open", "openat", "getdents64", "readlink", "readlinkat", "getcwd",
	"mkdir", "mkdirat", "rmdir", "unlink", "unlinkat",
	"rename", "renameat", "renameat2",
	"ftruncate", "fsync", "fdatasync", "fadvise64",
	"poll", "ppoll", "select", "pselect6",
	"epoll_create1", "epoll_ctl", "epoll_wait", "epoll_pwait", "epoll_pwait2",
	"eventfd2",
	/* the socketpair to the parent: socket() itself is not here */
	"sendto", "recvfrom", "sendmsg", "recvmsg",
	/* a socket object for a received descriptor: Python asks its name */
	"getsockname",
	/* memory */
	"mmap", "munmap", "mprotect", "madvise", "brk", "mremap", "msync",
	/* threads (clone is restricted to threads), signals to ourselves */
	"clone", "futex", "set_robust_list", "set_tid_address", "rseq",
	"sched_yield", "sched_getaffinity", "gettid",
	"rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "rt_sigpending",
	"rt_sigtimedwait", "sigaltstack", "restart_syscall", "kill", "tgkill",
	"exit", "exit_group",
	/* who and when we are */
	"getpid", "getppid", "getuid", "geteuid", "getgid", "getegid",
	"getresuid", "getresgid", "getgroups",
	"clock_gettime", "clock_getres", "clock_nanosleep", "nanosleep",
	"gettimeofday", "time",
	"getrandom", "uname", "sysinfo", "getrusage", "times",
	"getrlimit", "prlimit64", "prctl",
	/* oneDNN asks the kernel for the AMX tile state before its first
	 * convolution on a CPU that has AMX (sandbox_specials[]) */
	"arch_prctl",
	NULL,
};

/*
 * What the CUDA driver and runtime call beyond the common set once they are
 * initialised.  A first list, to be refined with strace on a GPU machine:
 * one name per entry, so adding one is a one-line change.
 *
 * Deliberately absent:
 *  - socket and connect.  The driver connects to the MPS control socket
 *    during cuInit, before the filter (measured: ARCHITECTURE.md,
 *    "What the GPU machine taught").  Later, an
 *    AF_UNIX socket could connect by path to kgymd's own control socket or
 *    the journal: seccomp cannot read the path, and Landlock up to ABI 7
 *    does not mediate connecting to a named socket.  Should strace show the
 *    driver needs them after all, "socket" here is AF_UNIX-only (see
 *    sandbox_specials[]).
 *  - SysV shared memory (shmget/shmat: the IPC namespace is the host's,
 *    root passes its permission checks, Landlock does not cover it).
 *  - inotify.
 */
static const char *const sandbox_gpu[] = {
	"ioctl",			/* the driver speaks ioctl to /dev/nvidia* */
	"getsockopt",			/* on the MPS socket opened at init */
	"setsockopt",
	"mlock",
	"munlock",
	"sched_setaffinity",
	"get_mempolicy",
	"set_mempolicy",
	"mbind",
	"memfd_create",
	"fallocate",
	"timerfd_create",
	"timerfd_settime",
	"timerfd_gettime",
	/* The PTX JIT (libnvidia-ptxjitcompiler) asks these at module load (strace, H100). */
	"sched_get_priority_max",
	"sched_get_priority_min",
	NULL,
};

/*
 * Calls that no backend may add through extra_syscalls: each would undo a
 * layer (new processes or programs, new sockets, other processes' memory,
 * signals or limits beyond our own, namespaces, mounts, the kernel's own
 * administration, identity changes, and mode or owner changes, which Landlock
 * does not mediate).  A few appear in the tables above with an argument
 * condition; a backend cannot lift the condition.  New processes and
 * programs come only with the compiler profile (sandbox_exec[]), which
 * ties them to Landlock's EXECUTE rules; a plain syscalls list cannot.
 */
static const char *const sandbox_never[] = {
	"execve", "execveat", "fork", "vfork", "clone", "clone3",
	"ptrace", "process_vm_readv", "process_vm_writev", "process_madvise",
	"pidfd_open", "pidfd_getfd", "pidfd_send_signal", "kcmp",
	"socket", "kill", "tkill", "tgkill", "rt_sigqueueinfo",
	"rt_tgsigqueueinfo", "prctl", "prlimit64", "setrlimit",
	"mount", "umount2", "mount_setattr", "move_mount", "open_tree",
	"fsopen", "fsconfig", "fsmount", "fspick", "pivot_root", "chroot",
	"unshare", "setns", "bpf", "perf_event_open", "userfaultfd",
	"keyctl", "add_key", "request_key",
	"init_module", "finit_module", "delete_module", "kexec_load",
	"kexec_file_load", "reboot", "swapon", "swapoff", "syslog", "acct",
	"quotactl", "iopl", "ioperm", "settimeofday", "clock_settime",
	"clock_adjtime", "adjtimex", "sethostname", "setdomainname",
	"setuid", "setgid", "setreuid", "setregid", "setresuid", "setresgid",
	"setfsuid", "setfsgid", "setgroups", "capset", "personality",
	"io_uring_setup", "io_uring_enter", "io_uring_register",
	"open_by_handle_at", "name_to_handle_at",
	"chmod", "fchmod", "fchmodat", "chown", "fchown", "lchown", "fchownat",
	"mknod", "mknodat",
	NULL,
};

/*
 * The compiler profile's additions (allow_exec_compilers), found with
 * strace -f over load_inline builds (ninja, /bin/sh, c++, cc1plus, as,
 * collect2, ld) and nvcc (sh, gcc, cicc, ptxas, fatbinary, cudafe++) on
 * Debian 12.  Beyond these, clone may create processes (any clone without
 * a CLONE_NEW* flag), and chmod and signals to other processes fail softly
 * (sandbox_specials[]).
 *
 * Deliberately absent: execveat.  It runs a descriptor (fexecve), which
 * may be a memfd that no Landlock rule can see; no compiler uses it.
 * Also setsid, and everything of sandbox_never[] not named here.
 */
static const char *const sandbox_exec[] = {
	"execve",			/* the compilers themselves */
	"fork", "vfork",		/* posix_spawn, subprocess, sh, gcc's pex */
	"wait4", "waitid",		/* reaping them: own children only */
	"chdir", "fchdir",		/* subprocess(cwd=), ninja -C, sh's cd */
	"umask",			/* ld reads it to set its output's mode */
	/* ninja spawns each command in its own group (POSIX_SPAWN_SETPGROUP);
	 * the harness reaps whatever a candidate leaves behind as a subreaper,
	 * so a new group does not outlive the job */
	"setpgid", "getpgid", "getpgrp",
	/* (arch_prctl is in the common set: a fresh program's libc sets its
	 * TLS base with it, which the compiler profile allows, see
	 * sandbox_specials[]) */
	NULL,
};

enum sandbox_cond {
	SB_COND_NONE,
	SB_COND_THREAD,			/* clone: CLONE_THREAD, no namespace */
	SB_COND_SELF,			/* arg 0 is our own pid */
	SB_COND_GET_ONLY,		/* prlimit64: new_limit (arg 2) NULL */
	SB_COND_AF_UNIX,		/* socket: domain AF_UNIX */
	SB_COND_PRCTL_NAME,		/* prctl: PR_SET_NAME, PR_GET_NAME */
	SB_COND_NO_NS,			/* clone, compiler profile: no namespace */
	SB_COND_XCOMP,			/* arch_prctl: the XSAVE feature permissions */
};

/* <asm/prctl.h> of Linux 5.16; older headers lack them. */
#ifndef ARCH_GET_XCOMP_SUPP
#define ARCH_GET_XCOMP_SUPP	0x1021
#endif
#ifndef ARCH_GET_XCOMP_PERM
#define ARCH_GET_XCOMP_PERM	0x1022
#endif
#ifndef ARCH_REQ_XCOMP_PERM
#define ARCH_REQ_XCOMP_PERM	0x1023
#endif

struct sandbox_special {
	const char *name;
	enum sandbox_cond cond;		/* when the name is allowed */
	int err;			/* when not allowed: fail with this, not kill */
	bool exec_only;			/* err applies under the compiler profile only */
	const char *note;
};

static const struct sandbox_special sandbox_specials[] = {
	/* The compiler profile loosens the condition to SB_COND_NO_NS. */
	{ "clone", SB_COND_THREAD, 0, false,
	    "threads only: CLONE_THREAD set and no CLONE_NEW* flag; under the "
	    "compiler profile, any clone without a CLONE_NEW* flag" },
	{ "clone3", SB_COND_NONE, ENOSYS, false,
	    "fails with ENOSYS: its flags sit behind a pointer seccomp cannot "
	    "read; glibc then falls back to clone" },
	/*
	 * The pid is the sandboxed process's own.  Under the compiler profile
	 * another pid fails with EPERM instead of killing: ninja signals its
	 * commands' process groups when a build fails, and a compiler's own
	 * raise() has a pid of its own.  Either way no signal leaves.
	 */
	{ "kill", SB_COND_SELF, EPERM, true, "to this process only; under the "
	    "compiler profile another pid fails with EPERM" },
	{ "tgkill", SB_COND_SELF, EPERM, true, "to this process's threads "
	    "only; under the compiler profile another pid fails with EPERM" },
	/*
	 * NVRTC raises its own RLIMIT_STACK on every compile and carries on
	 * when refused: setting fails with EPERM rather than killing.
	 */
	{ "prlimit64", SB_COND_GET_ONLY, EPERM, false,
	    "reading only (new_limit NULL); setting fails with EPERM" },
	{ "prctl", SB_COND_PRCTL_NAME, 0, false,
	    "PR_SET_NAME and PR_GET_NAME only" },
	/*
	 * A process may use AMX only once it asked (ARCH_REQ_XCOMP_PERM):
	 * oneDNN, under torch's CPU convolutions, asks on CPUs that have it
	 * (a job killed by SIGSYS on a Xeon with AMX).  The permission is the
	 * calling process's own.  Under the compiler profile every code is
	 * allowed: a fresh program's libc sets its TLS base (ARCH_SET_FS).
	 */
	{ "arch_prctl", SB_COND_XCOMP, 0, false,
	    "ARCH_GET_XCOMP_SUPP, ARCH_GET_XCOMP_PERM, ARCH_REQ_XCOMP_PERM only "
	    "(AMX permission, the process's own); under the compiler profile all" },
	{ "socket", SB_COND_AF_UNIX, 0, false,
	    "AF_UNIX only, where a list has it" },
	{ "ioctl", SB_COND_NONE, ENOTTY, false,
	    "where not allowed (CPU workers) fails with ENOTTY, which isatty() "
	    "expects" },
	/*
	 * ld makes its output executable with chmod and carries on when
	 * refused (a shared object loads without the x bits).  A mode change
	 * is not Landlock's to mediate, so it never happens; only under the
	 * compiler profile is the refusal soft.
	 */
	{ "chmod", SB_COND_NONE, EPERM, true,
	    "under the compiler profile fails with EPERM (ld's chmod of its "
	    "output); elsewhere kills" },
	{ "fchmod", SB_COND_NONE, EPERM, true,
	    "under the compiler profile fails with EPERM; elsewhere kills" },
	{ "fchmodat", SB_COND_NONE, EPERM, true,
	    "under the compiler profile fails with EPERM; elsewhere kills" },
};

/* Namespace flags a thread must not ask for (CLONE_NEWTIME shares bits
 * with the exit signal in clone(), and needs clone3 anyway). */
#define SB_CLONE_NS_FLAGS (CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | \
	    CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET)

/* ----------------------------------------------------------- helpers */

void
sandbox_cause(char **ret_cause, const char *fmt, ...)
{
	va_list ap;
	char *s;

	if (ret_cause == NULL)
		return;
	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) < 0)
		s = NULL;
	va_end(ap);
	*ret_cause = s;
}

static bool
sandbox_table_has(const char *const *table, const char *name)
{
	if (table == NULL)
		return false;
	for (; *table != NULL; table++)
		if (strcmp(*table, name) == 0)
			return true;
	return false;
}

static const struct sandbox_special *
sandbox_special_find(const char *name)
{
	size_t i;

	for (i = 0; i < nitems(sandbox_specials); i++)
		if (strcmp(sandbox_specials[i].name, name) == 0)
			return &sandbox_specials[i];
	return NULL;
}

const char *const *
sandbox_common_syscalls(void)
{
	return sandbox_common;
}

const char *const *
sandbox_gpu_syscalls(void)
{
	return sandbox_gpu;
}

const char *const *
sandbox_never_syscalls(void)
{
	return sandbox_never;
}

const char *const *
sandbox_exec_syscalls(void)
{
	return sandbox_exec;
}

const char *
sandbox_syscall_note(const char *name)
{
	const struct sandbox_special *sp;

	sp = sandbox_special_find(name);
	return sp != NULL ? sp->note : NULL;
}

/* Whether `path` is `dir` or lies beneath it, by name (both absolute). */
static bool
sandbox_path_within(const char *dir, const char *path)
{
	size_t n = strlen(dir);

	while (n > 1 && dir[n - 1] == '/')
		n--;
	if (strncmp(dir, path, n) != 0)
		return false;
	return path[n] == '\0' || path[n] == '/' || (n == 1 && dir[0] == '/');
}

/*
 * The compiler profile's paths: given exactly when the profile is on,
 * absolute, and apart from everything writable -- a file the job may write
 * must never be one it may execute.  Compared by name: the caller is
 * trusted and lists real paths; this catches mistakes, not malice.
 */
static int
sandbox_exec_paths_check(const struct sandbox_policy *p, char **ret_cause)
{
	const char *const *e, *const *w;

	if (!p->allow_exec_compilers) {
		if (p->exec_paths != NULL && p->exec_paths[0] != NULL) {
			sandbox_cause(ret_cause, "sandbox: exec_paths given "
			    "without the compiler profile");
			return -EINVAL;
		}
		return 0;
	}
	if (p->exec_paths == NULL || p->exec_paths[0] == NULL) {
		sandbox_cause(ret_cause, "sandbox: the compiler profile needs "
		    "the compilers' paths (exec_paths)");
		return -EINVAL;
	}
	for (e = p->exec_paths; *e != NULL; e++) {
		if ((*e)[0] != '/') {
			sandbox_cause(ret_cause, "sandbox: exec path %s is not "
			    "absolute", *e);
			return -EINVAL;
		}
		if (strspn(*e, "/") == strlen(*e)) {
			sandbox_cause(ret_cause, "sandbox: exec path %s would "
			    "make everything executable", *e);
			return -EPERM;
		}
		if (sandbox_path_within(*e, p->work_dir) ||
		    sandbox_path_within(p->work_dir, *e)) {
			sandbox_cause(ret_cause, "sandbox: exec path %s and the "
			    "work directory %s overlap: nothing writable may be "
			    "executable", *e, p->work_dir);
			return -EPERM;
		}
		for (w = p->rw_paths; w != NULL && *w != NULL; w++)
			if (sandbox_path_within(*e, *w) ||
			    sandbox_path_within(*w, *e)) {
				sandbox_cause(ret_cause, "sandbox: exec path %s "
				    "and the writable path %s overlap: nothing "
				    "writable may be executable", *e, *w);
				return -EPERM;
			}
	}
	return 0;
}

int
sandbox_policy_check(const struct sandbox_policy *p, char **ret_cause)
{
	const char *const *s;

	if (p == NULL) {
		sandbox_cause(ret_cause, "sandbox: no policy");
		return -EINVAL;
	}
	if (p->work_dir == NULL || p->work_dir[0] != '/') {
		sandbox_cause(ret_cause, "sandbox: the work directory must be "
		    "an absolute path (got %s)",
		    p->work_dir != NULL ? p->work_dir : "none");
		return -EINVAL;
	}
	if (p->memory_bytes <= 0 || p->max_files <= 0 ||
	    p->max_processes <= 0 || p->max_file_bytes <= 0 ||
	    p->cpu_seconds < 0) {
		sandbox_cause(ret_cause, "sandbox: memory, file, process and "
		    "file size limits must be positive, the CPU limit >= 0");
		return -EINVAL;
	}
	for (s = p->extra_syscalls; s != NULL && *s != NULL; s++)
		if (sandbox_table_has(sandbox_never, *s)) {
			sandbox_cause(ret_cause, "sandbox: a backend asks for "
			    "system call %s, which no backend may have", *s);
			return -EPERM;
		}
	return sandbox_exec_paths_check(p, ret_cause);
}

/* ----------------------------------------------------------- rlimits */

/* Soft and hard to the asked values, lowered to a hard limit already in
 * force (we may not raise it, and need not). */
static int
sandbox_setrlimit(int resource, const char *name, rlim_t soft, rlim_t hard,
    char **ret_cause)
{
	struct rlimit cur, want;

	if (getrlimit(resource, &cur) == -1) {
		sandbox_cause(ret_cause, "sandbox: getrlimit(%s): %s", name,
		    strerror(errno));
		return -errno;
	}
	want.rlim_max = hard < cur.rlim_max ? hard : cur.rlim_max;
	want.rlim_cur = soft < want.rlim_max ? soft : want.rlim_max;
	if (setrlimit(resource, &want) == -1) {
		sandbox_cause(ret_cause, "sandbox: setrlimit(%s, %llu): %s",
		    name, (unsigned long long)want.rlim_max, strerror(errno));
		return -errno;
	}
	return 0;
}

int
sandbox_rlimits(const struct sandbox_policy *p, char **ret_cause)
{
	int rc;

	rc = sandbox_policy_check(p, ret_cause);
	if (rc < 0)
		return rc;

	if ((rc = sandbox_setrlimit(RLIMIT_CORE, "RLIMIT_CORE", 0, 0,
	    ret_cause)) < 0)
		return rc;
	if ((rc = sandbox_setrlimit(RLIMIT_NOFILE, "RLIMIT_NOFILE",
	    (rlim_t)p->max_files, (rlim_t)p->max_files, ret_cause)) < 0)
		return rc;
	/*
	 * The kernel counts every process and thread of the real uid here,
	 * and does not apply it to root (CAP_SYS_RESOURCE/CAP_SYS_ADMIN): what
	 * stops a fork bomb is the filter's clone rule, not this.
	 */
	if ((rc = sandbox_setrlimit(RLIMIT_NPROC, "RLIMIT_NPROC",
	    (rlim_t)p->max_processes, (rlim_t)p->max_processes,
	    ret_cause)) < 0)
		return rc;
	if ((rc = sandbox_setrlimit(RLIMIT_FSIZE, "RLIMIT_FSIZE",
	    (rlim_t)p->max_file_bytes, (rlim_t)p->max_file_bytes,
	    ret_cause)) < 0)
		return rc;
	/* Soft below hard, so the job dies of SIGXCPU (a limit the parent can
	 * name) before the kernel's SIGKILL at the hard limit. */
	if (p->cpu_seconds > 0 &&
	    (rc = sandbox_setrlimit(RLIMIT_CPU, "RLIMIT_CPU",
	    (rlim_t)p->cpu_seconds, (rlim_t)p->cpu_seconds + 1,
	    ret_cause)) < 0)
		return rc;
	/*
	 * The CUDA driver reserves address space by the terabyte (unified
	 * addressing), so a GPU worker's bound is on data, which counts only
	 * private writable mappings.
	 */
	if (p->gpu)
		rc = sandbox_setrlimit(RLIMIT_DATA, "RLIMIT_DATA",
		    (rlim_t)p->memory_bytes, (rlim_t)p->memory_bytes, ret_cause);
	else
		rc = sandbox_setrlimit(RLIMIT_AS, "RLIMIT_AS",
		    (rlim_t)p->memory_bytes, (rlim_t)p->memory_bytes, ret_cause);
	if (rc < 0)
		return rc;

	/* No ptrace attach or /proc/PID/mem by other processes of our uid. */
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == -1) {
		sandbox_cause(ret_cause, "sandbox: prctl(PR_SET_DUMPABLE): %s",
		    strerror(errno));
		return -errno;
	}
	return 0;
}

/*
 * No capability survives: a root worker keeps its uid (the driver's device
 * nodes and the state directory are root's), but not what root's
 * capabilities add -- reading any process's memory and environment
 * (CAP_SYS_PTRACE), ignoring file permissions (CAP_DAC_OVERRIDE), and the
 * rest.  The bounding set first: dropping from it needs CAP_SETPCAP, which
 * capset() gives up.  A process without CAP_SETPCAP (not root) has nothing
 * in its bounding set it could ever use under NO_NEW_PRIVS.
 */
static int
sandbox_drop_capabilities(char **ret_cause)
{
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];
	int cap;

	for (cap = 0; cap < 64; cap++) {
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) == 0)
			continue;
		if (errno == EINVAL)		/* past the kernel's last capability */
			break;
		if (errno != EPERM) {
			sandbox_cause(ret_cause, "sandbox: prctl(PR_CAPBSET_DROP, %d): %s", cap,
			    strerror(errno));
			return -errno;
		}
	}
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) == -1 && errno != EINVAL) {
		sandbox_cause(ret_cause, "sandbox: prctl(PR_CAP_AMBIENT_CLEAR_ALL): %s",
		    strerror(errno));
		return -errno;
	}
	memset(data, 0, sizeof data);
	if (syscall(SYS_capset, &hdr, data) == -1) {
		sandbox_cause(ret_cause, "sandbox: capset: %s", strerror(errno));
		return -errno;
	}
	return 0;
}

/* ----------------------------------------------------------- seccomp */

static bool
sandbox_allowed(const struct sandbox_policy *p, const char *name)
{
	return sandbox_table_has(sandbox_common, name) ||
	    (p->gpu && sandbox_table_has(sandbox_gpu, name)) ||
	    (p->allow_exec_compilers && sandbox_table_has(sandbox_exec, name)) ||
	    sandbox_table_has(p->extra_syscalls, name);
}

/* One argument comparison, spelt out (libseccomp's macros leave datum_b to
 * the compiler's zeroing, which -Wmissing-field-initializers dislikes). */
static struct scmp_arg_cmp
sandbox_arg(unsigned int arg, enum scmp_compare op, scmp_datum_t a,
    scmp_datum_t b)
{
	struct scmp_arg_cmp cmp = { .arg = arg, .op = op, .datum_a = a,
	    .datum_b = b };

	return cmp;
}

static int
sandbox_seccomp_allow(scmp_filter_ctx ctx, const struct sandbox_policy *p,
    const char *name, bool extra, char **ret_cause)
{
	const struct sandbox_special *sp;
	enum sandbox_cond cond;
	scmp_datum_t self;
	int sys, rc;

	sys = seccomp_syscall_resolve_name(name);
	if (sys < 0) {
		/* Tables span architectures; a backend's list may not. */
		if (extra)
			sandbox_log(SANDBOX_LOG_WARNING, "sandbox: a backend's system call %s does "
			    "not exist here; not allowed", name);
		else
			sandbox_log(SANDBOX_LOG_DEBUG, "sandbox: no system call %s here", name);
		return 0;
	}
	sp = sandbox_special_find(name);
	self = (scmp_datum_t)getpid();
	cond = sp != NULL ? sp->cond : SB_COND_NONE;
	/* Compilers are processes: clone may make them, never a namespace. */
	if (cond == SB_COND_THREAD && p->allow_exec_compilers)
		cond = SB_COND_NO_NS;
	if (cond == SB_COND_XCOMP && p->allow_exec_compilers)
		cond = SB_COND_NONE;
	switch (cond) {
	case SB_COND_NONE:
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, sys, 0);
		break;
	case SB_COND_THREAD:
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, sys, 1,
		    sandbox_arg(0, SCMP_CMP_MASKED_EQ,
		    (scmp_datum_t)(CLONE_THREAD | SB_CLONE_NS_FLAGS),
		    (scmp_datum_t)CLONE_THREAD));
		break;
	case SB_COND_NO_NS:
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, sys, 1,
		    sandbox_arg(0, SCMP_CMP_MASKED_EQ,
		    (scmp_datum_t)SB_CLONE_NS_FLAGS, 0));
		break;
	case SB_COND_SELF:
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, sys, 1,
		    sandbox_arg(0, SCMP_CMP_EQ, self, 0));
		if (rc == 0 && sp->err != 0 &&
		    (!sp->exec_only || p->allow_exec_compilers))
			rc = seccomp_rule_add(ctx,
			    SCMP_ACT_ERRNO((uint32_t)sp->err), sys, 1,
			    sandbox_arg(0, SCMP_CMP_NE, self, 0));
		break;
	case SB_COND_GET_ONLY:
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, sys, 1,
		    sandbox_arg(2, SCMP_CMP_EQ, 0, 0));
		/* Setting, when the special says so, fails softly instead of killing. */
		if (rc == 0 && sp->err != 0)
			rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO((uint32_t)sp->err), sys, 1,
			    sandbox_arg(2, SCMP_CMP_NE, 0, 0));
		break;
	case SB_COND_AF_UNIX:
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, sys, 1,
		    sandbox_arg(0, SCMP_CMP_EQ, AF_UNIX, 0));
		break;
	case SB_COND_PRCTL_NAME:
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, sys, 1,
		    sandbox_arg(0, SCMP_CMP_EQ, PR_SET_NAME, 0));
		if (rc == 0)
			rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, sys, 1,
			    sandbox_arg(0, SCMP_CMP_EQ, PR_GET_NAME, 0));
		break;
	case SB_COND_XCOMP:
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, sys, 1,
		    sandbox_arg(0, SCMP_CMP_EQ, ARCH_GET_XCOMP_SUPP, 0));
		if (rc == 0)
			rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, sys, 1,
			    sandbox_arg(0, SCMP_CMP_EQ, ARCH_GET_XCOMP_PERM, 0));
		if (rc == 0)
			rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, sys, 1,
			    sandbox_arg(0, SCMP_CMP_EQ, ARCH_REQ_XCOMP_PERM, 0));
		break;
	default:
		rc = -EINVAL;
		break;
	}
	if (rc < 0)
		sandbox_cause(ret_cause, "sandbox: seccomp rule for %s: %s",
		    name, strerror(-rc));
	return rc;
}

static int
sandbox_seccomp_table(scmp_filter_ctx ctx, const struct sandbox_policy *p,
    const char *const *table, bool extra, char **ret_cause)
{
	int rc;

	for (; table != NULL && *table != NULL; table++)
		if ((rc = sandbox_seccomp_allow(ctx, p, *table, extra,
		    ret_cause)) < 0)
			return rc;
	return 0;
}

int
sandbox_seccomp(const struct sandbox_policy *p, char **ret_cause)
{
	scmp_filter_ctx ctx;
	const char *const *s;
	size_t i;
	int rc, sys;

	rc = sandbox_policy_check(p, ret_cause);
	if (rc < 0)
		return rc;

	/* Before anything else, so a failure here is not hidden in libseccomp. */
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == -1) {
		rc = -errno;
		sandbox_cause(ret_cause, "sandbox: prctl(PR_SET_NO_NEW_PRIVS): %s",
		    strerror(-rc));
		return rc;
	}

	ctx = seccomp_init(SCMP_ACT_KILL_PROCESS);
	if (ctx == NULL) {
		sandbox_cause(ret_cause, "sandbox: seccomp_init failed "
		    "(kernel without SECCOMP_RET_KILL_PROCESS?)");
		return -ENOMEM;
	}
	/* The driver's threads must be bound too; a foreign architecture's
	 * calls (int $0x80) kill like any other stranger; and a failure
	 * should carry the kernel's errno, not libseccomp's -ECANCELED. */
	if ((rc = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_TSYNC, 1)) < 0 ||
	    (rc = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH,
	    SCMP_ACT_KILL_PROCESS)) < 0 ||
	    (rc = seccomp_attr_set(ctx, SCMP_FLTATR_API_SYSRAWRC, 1)) < 0) {
		sandbox_cause(ret_cause, "sandbox: seccomp attributes: %s",
		    strerror(-rc));
		goto release_ctx;
	}

	rc = sandbox_seccomp_table(ctx, p, sandbox_common, false, ret_cause);
	if (rc == 0 && p->gpu)
		rc = sandbox_seccomp_table(ctx, p, sandbox_gpu, false, ret_cause);
	/* Processes and exec come from this table alone, with the Landlock
	 * rules; the policy check keeps them out of extra_syscalls. */
	if (rc == 0 && p->allow_exec_compilers)
		rc = sandbox_seccomp_table(ctx, p, sandbox_exec, false, ret_cause);
	for (s = p->extra_syscalls; rc == 0 && s != NULL && *s != NULL; s++)
		if (!sandbox_table_has(sandbox_common, *s) &&
		    !(p->gpu && sandbox_table_has(sandbox_gpu, *s)) &&
		    !(p->allow_exec_compilers &&
		    sandbox_table_has(sandbox_exec, *s)))
			rc = sandbox_seccomp_allow(ctx, p, *s, true, ret_cause);
	if (rc < 0)
		goto release_ctx;

	/* Calls that fail softly where they are not allowed. */
	for (i = 0; i < nitems(sandbox_specials); i++) {
		if (sandbox_specials[i].err == 0 ||
		    (sandbox_specials[i].exec_only && !p->allow_exec_compilers) ||
		    sandbox_allowed(p, sandbox_specials[i].name))
			continue;
		sys = seccomp_syscall_resolve_name(sandbox_specials[i].name);
		if (sys < 0)
			continue;
		rc = seccomp_rule_add(ctx,
		    SCMP_ACT_ERRNO((uint32_t)sandbox_specials[i].err), sys, 0);
		if (rc < 0) {
			sandbox_cause(ret_cause, "sandbox: seccomp rule for "
			    "%s: %s", sandbox_specials[i].name, strerror(-rc));
			goto release_ctx;
		}
	}

	rc = seccomp_load(ctx);
	if (rc != 0) {
		/* With TSYNC the kernel answers a thread it could not
		 * synchronise with that thread's id. */
		if (rc > 0) {
			sandbox_cause(ret_cause, "sandbox: seccomp_load: "
			    "thread %d could not take the filter", rc);
			rc = -ESRCH;
		} else
			sandbox_cause(ret_cause, "sandbox: seccomp_load: %s",
			    strerror(-rc));
	}
release_ctx:
	seccomp_release(ctx);
	return rc;
}

/* ------------------------------------------------------------- entry */

int
sandbox_enter(const struct sandbox_policy *p, struct sandbox_report *ret_report,
    char **ret_cause)
{
	struct sandbox_report report;
	char *cause = NULL;
	int rc, abi;

	rc = sandbox_policy_check(p, ret_cause);
	if (rc < 0)
		return rc;
	/* Before anything is applied: without Landlock nothing would limit
	 * what the compiler profile may execute. */
	abi = sandbox_landlock_abi();
	if (abi < 0 && p->allow_exec_compilers) {
		sandbox_cause(ret_cause, "sandbox: the compiler profile needs "
		    "Landlock, which limits exec to the compilers, and this "
		    "kernel has none (or it is disabled)");
		return -EOPNOTSUPP;
	}
	rc = sandbox_rlimits(p, ret_cause);
	if (rc < 0)
		return rc;

	rc = sandbox_landlock(p, &cause);
	if (rc == -EOPNOTSUPP && p->allow_exec_compilers) {
		free(cause);		/* it went away since: still refused */
		sandbox_cause(ret_cause, "sandbox: the compiler profile needs "
		    "Landlock, and it is not available");
		return -EOPNOTSUPP;
	}
	if (rc == -EOPNOTSUPP) {
		sandbox_log(SANDBOX_LOG_WARNING, "%s: the file system is not restricted",
		    cause != NULL ? cause : "sandbox: no Landlock");
		free(cause);
		abi = 0;
	} else if (rc < 0) {
		if (ret_cause != NULL)
			*ret_cause = cause;
		else
			free(cause);
		return rc;
	}

	/* After Landlock, whose rules a root process might otherwise
	 * need CAP_SYS_ADMIN for; before the filter, which refuses capset. */
	rc = sandbox_drop_capabilities(ret_cause);
	if (rc < 0)
		return rc;

	/* Last: the filter does not allow what the layers above need. */
	rc = sandbox_seccomp(p, ret_cause);
	if (rc < 0)
		return rc;

	report.seccomp = true;
	report.landlock_abi = abi;
	if (ret_report != NULL)
		*ret_report = report;
	return 0;
}
