/*
 * sandbox_landlock.c -- the sandbox library's Landlock layer: the file
 * system (and, where the ABI has them, TCP ports, abstract Unix sockets
 * and signals) a worker keeps, and the narrower domain one thread of it
 * may enter (sandbox_landlock_thread(): the nvrtc backend's compile
 * thread).  The tree's one Landlock implementation (include/kgym/sandbox.h
 * documents each function; ARCHITECTURE.md, "The sandbox", the rules).
 */
#include "config.h"

#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include <linux/landlock.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kgym/sandbox.h"

#include "sandbox_internal.h"

/* The rights of later ABIs, for headers older than the running kernel. */
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE		(1ULL << 14)
#endif
#ifndef LANDLOCK_ACCESS_FS_IOCTL_DEV
#define LANDLOCK_ACCESS_FS_IOCTL_DEV		(1ULL << 15)
#endif
#ifndef LANDLOCK_ACCESS_NET_BIND_TCP
#define LANDLOCK_ACCESS_NET_BIND_TCP		(1ULL << 0)
#endif
#ifndef LANDLOCK_ACCESS_NET_CONNECT_TCP
#define LANDLOCK_ACCESS_NET_CONNECT_TCP		(1ULL << 1)
#endif
#ifndef LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET
#define LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET	(1ULL << 0)
#endif
#ifndef LANDLOCK_SCOPE_SIGNAL
#define LANDLOCK_SCOPE_SIGNAL			(1ULL << 1)
#endif
#ifndef LANDLOCK_RESTRICT_SELF_TSYNC
#define LANDLOCK_RESTRICT_SELF_TSYNC		(1U << 3)
#endif

/*
 * struct landlock_ruleset_attr as of ABI 6.  The kernel takes the size we
 * pass, so the fields an older ABI does not know are left out of it.
 */
struct sandbox_ruleset_attr {
	uint64_t handled_access_fs;
	uint64_t handled_access_net;	/* ABI 4 */
	uint64_t scoped;		/* ABI 6 */
};

/* The rights that may be granted on a file that is not a directory. */
#define SB_FS_FILE (LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE | \
	    LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_TRUNCATE | \
	    LANDLOCK_ACCESS_FS_IOCTL_DEV)
#define SB_FS_READ (LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR)
#define SB_FS_EXEC (SB_FS_READ | LANDLOCK_ACCESS_FS_EXECUTE)
#define SB_FS_DEV (SB_FS_READ | LANDLOCK_ACCESS_FS_WRITE_FILE | \
	    LANDLOCK_ACCESS_FS_TRUNCATE | LANDLOCK_ACCESS_FS_IOCTL_DEV)
#define SB_FS_ALL (~0ULL)		/* masked by what the ABI handles */
/* Writable places are never executable: a job cannot run what it wrote. */
#define SB_FS_RW (SB_FS_ALL & ~(uint64_t)LANDLOCK_ACCESS_FS_EXECUTE)

struct sandbox_path {
	const char *path;
	uint64_t access;
};

/*
 * Everything a job may see besides its work directory.  Not here, on
 * purpose: /etc as a whole (the daemon's configuration), the state
 * directory (task store, other workers' directories), /run (the control
 * socket), /tmp, /home.  Read, never execute: shared libraries are mapped,
 * which Landlock does not mediate, and running a program is the compiler
 * profile's exec_paths alone (without the profile the filter kills exec
 * first; this makes Landlock refuse it on its own too).
 */
static const struct sandbox_path sandbox_system_paths[] = {
	{ "/usr", SB_FS_READ },
	{ "/usr/local", SB_FS_READ },
	{ "/lib", SB_FS_READ },
	{ "/lib64", SB_FS_READ },
	{ "/bin", SB_FS_READ },
	{ "/sbin", SB_FS_READ },
	{ "/opt", SB_FS_READ },		/* CUDA, Python installations */
	{ "/etc/ld.so.cache", SB_FS_READ },
	{ "/etc/ld.so.conf", SB_FS_READ },
	{ "/etc/ld.so.conf.d", SB_FS_READ },
	{ "/etc/localtime", SB_FS_READ },
	{ "/etc/nsswitch.conf", SB_FS_READ },
	{ "/etc/passwd", SB_FS_READ },
	{ "/etc/group", SB_FS_READ },
	{ "/proc", SB_FS_READ },
	{ "/sys", SB_FS_READ },		/* the GPU driver reads sysfs */
	{ "/dev/urandom", SB_FS_READ },
	{ "/dev/random", SB_FS_READ },
	{ "/dev/null", SB_FS_DEV },
	{ "/dev/zero", SB_FS_DEV },
	{ "/dev/full", SB_FS_DEV },
};

/* A GPU worker's device nodes, besides /dev/nvidia[0-9]*. */
static const struct sandbox_path sandbox_gpu_paths[] = {
	{ "/dev/nvidiactl", SB_FS_DEV },
	{ "/dev/nvidia-uvm", SB_FS_DEV },
	{ "/dev/nvidia-uvm-tools", SB_FS_DEV },
	{ "/dev/nvidia-caps", SB_FS_DEV },
};

static int
sandbox_landlock_create(const void *attr, size_t size, uint32_t flags)
{
	return (int)syscall(SYS_landlock_create_ruleset, attr, size, flags);
}

int
sandbox_landlock_abi(void)
{
	int abi;

	abi = sandbox_landlock_create(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
	if (abi < 0)
		return -EOPNOTSUPP;	/* ENOSYS: not built; EOPNOTSUPP: off */
	return abi;
}

static uint64_t
sandbox_landlock_fs_rights(int abi)
{
	uint64_t rights;

	/* ABI 1: EXECUTE up to MAKE_SYM, bits 0 to 12. */
	rights = (LANDLOCK_ACCESS_FS_MAKE_SYM << 1) - 1;
	if (abi >= 2)
		rights |= LANDLOCK_ACCESS_FS_REFER;
	if (abi >= 3)
		rights |= LANDLOCK_ACCESS_FS_TRUNCATE;
	if (abi >= 5)
		rights |= LANDLOCK_ACCESS_FS_IOCTL_DEV;
	return rights;
}

/*
 * Allow `access` (masked by what the ruleset handles and by what a
 * non-directory can have) beneath `path`.  A missing path is skipped unless
 * `required`: a rule only grants, so leaving one out never widens anything.
 */
static int
sandbox_landlock_path(int ruleset, const char *path, uint64_t access,
    uint64_t handled, bool required, char **ret_cause)
{
	struct landlock_path_beneath_attr attr;
	struct stat st;
	int fd, rc;

	fd = open(path, O_PATH | O_CLOEXEC);
	if (fd == -1) {
		rc = -errno;
		if (!required && (rc == -ENOENT || rc == -ENOTDIR)) {
			sandbox_log(SANDBOX_LOG_DEBUG, "sandbox: %s does not exist; no rule", path);
			return 0;
		}
		sandbox_cause(ret_cause, "sandbox: Landlock rule for %s: %s",
		    path, strerror(-rc));
		return rc;
	}
	if (fstat(fd, &st) == -1) {
		rc = -errno;
		sandbox_cause(ret_cause, "sandbox: Landlock rule for %s: %s",
		    path, strerror(-rc));
		goto close_fd;
	}
	if (required && !S_ISDIR(st.st_mode)) {
		rc = -ENOTDIR;
		sandbox_cause(ret_cause, "sandbox: %s is not a directory", path);
		goto close_fd;
	}
	memset(&attr, 0, sizeof(attr));
	attr.parent_fd = fd;
	attr.allowed_access = access & handled;
	if (!S_ISDIR(st.st_mode))
		attr.allowed_access &= SB_FS_FILE;
	rc = 0;
	if (attr.allowed_access != 0 &&
	    syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH,
	    &attr, 0) == -1) {
		rc = -errno;
		sandbox_cause(ret_cause, "sandbox: Landlock rule for %s: %s",
		    path, strerror(-rc));
	}
close_fd:
	close(fd);
	return rc;
}

static int
sandbox_landlock_paths(int ruleset, const char *const *paths, uint64_t access,
    uint64_t handled, char **ret_cause)
{
	int rc;

	for (; paths != NULL && *paths != NULL; paths++)
		if ((rc = sandbox_landlock_path(ruleset, *paths, access, handled,
		    false, ret_cause)) < 0)
			return rc;
	return 0;
}

/* /dev/nvidia0, /dev/nvidia1, ...: one node per GPU the driver knows of
 * (CUDA_VISIBLE_DEVICES does not hide the others from the file system, but
 * the driver has opened the one it uses by now). */
static int
sandbox_landlock_nvidia(int ruleset, uint64_t handled, char **ret_cause)
{
	struct dirent *de;
	char path[sizeof("/dev/") + sizeof(de->d_name)];
	DIR *dir;
	int rc = 0;

	dir = opendir("/dev");
	if (dir == NULL) {
		rc = -errno;
		sandbox_cause(ret_cause, "sandbox: /dev: %s", strerror(-rc));
		return rc;
	}
	while ((de = readdir(dir)) != NULL) {
		if (strncmp(de->d_name, "nvidia", 6) != 0 ||
		    de->d_name[6] == '\0' ||
		    strspn(de->d_name + 6, "0123456789") != strlen(de->d_name + 6))
			continue;
		snprintf(path, sizeof(path), "/dev/%s", de->d_name);
		rc = sandbox_landlock_path(ruleset, path, SB_FS_DEV, handled,
		    false, ret_cause);
		if (rc < 0)
			break;
	}
	closedir(dir);
	return rc;
}

/*
 * The ELF interpreter of this process's program (PT_INTERP), or NULL for a
 * static program.  The kernel opens a dynamically linked program's
 * interpreter for execution (FMODE_EXEC, which Landlock checks) on every
 * exec, so the compiler profile must grant it EXECUTE; the compilers use
 * the same system loader as the process that starts them.
 */
static int
sandbox_interp_cb(struct dl_phdr_info *info, size_t size, void *data)
{
	const char **ret = data;
	ElfW(Half) i;

	(void)size;
	for (i = 0; i < info->dlpi_phnum; i++)
		if (info->dlpi_phdr[i].p_type == PT_INTERP) {
			*ret = (const char *)(info->dlpi_addr +
			    info->dlpi_phdr[i].p_vaddr);
			break;
		}
	return 1;		/* the first object is the program itself */
}

static const char *
sandbox_elf_interpreter(void)
{
	const char *interp = NULL;

	dl_iterate_phdr(sandbox_interp_cb, &interp);
	return interp;
}

/*
 * The compiler profile's EXECUTE rules: each listed compiler (file or
 * directory; a missing one is skipped, which only grants less) and the
 * dynamic loader.  The loader can itself run any readable program
 * ("ld.so PROGRAM"), so the list narrows what runs by accident or by
 * habit; what binds whatever runs is the inherited filter and domain.
 */
static int
sandbox_landlock_exec(int ruleset, const struct sandbox_policy *p,
    uint64_t handled, char **ret_cause)
{
	const char *interp;
	int rc;

	rc = sandbox_landlock_paths(ruleset, p->exec_paths, SB_FS_EXEC,
	    handled, ret_cause);
	if (rc < 0)
		return rc;
	interp = sandbox_elf_interpreter();
	if (interp == NULL || interp[0] != '/')
		return 0;
	return sandbox_landlock_path(ruleset, interp,
	    SB_FS_READ | LANDLOCK_ACCESS_FS_EXECUTE, handled, false, ret_cause);
}

/* Landlock binds only the calling thread before ABI 8; say how many are
 * left out, so a GPU worker's log tells the truth about the driver's. */
static void
sandbox_landlock_count_threads(void)
{
	struct dirent *de;
	DIR *dir;
	int n = 0;

	dir = opendir("/proc/self/task");
	if (dir == NULL)
		return;
	while ((de = readdir(dir)) != NULL)
		if (de->d_name[0] != '.')
			n++;
	closedir(dir);
	if (n > 1)
		sandbox_log(SANDBOX_LOG_INFO, "sandbox: Landlock ABI < 8 binds this thread only; "
		    "%d other thread(s) keep the file system (seccomp still "
		    "binds them)", n - 1);
}

/* The kernel's Landlock ABI, or -EOPNOTSUPP with the cause said. */
static int
sandbox_landlock_need(char **ret_cause)
{
	int abi = sandbox_landlock_abi();

	if (abi < 0) {
		sandbox_cause(ret_cause, "sandbox: the kernel has no Landlock "
		    "(or it is disabled)");
		return -EOPNOTSUPP;
	}
	return abi;
}

/*
 * /proc without the other processes (sandbox_policy.private_proc), and
 * without what tells of the host: rules for a list of entries, not for
 * /proc.  Host-wide, what runtimes read (the CPUs, the memory, the kernel's
 * settings); not the kernel's command line, the locks or the scheduler's
 * view of every process.  Of this process's own directory (/proc/PID, what
 * /proc/self leads to), what a runtime reads of itself (its descriptors,
 * its status); not its mappings (where the judge's shared areas lie: an
 * address is all raw memory access needs), its threads' entries, its
 * environment (the
 * worker's directory), its command line (kgymd's install paths), its
 * mounts (the host's), its network namespace's sockets (/proc/net is
 * self/net) or its cgroup.  A candidate can encode whatever it may read
 * into its error text, past any scrub: what it must not return, it must
 * not read.
 *
 * A rule holds an inode, and procfs makes a new inode whenever it looks a
 * dentry up again after the dentry was dropped (memory pressure): the rule
 * would then silently stop matching in the middle of a job.  So each
 * entry's O_PATH descriptor stays open for the process's life, pinning its
 * dentry (a few dozen descriptors; close-on-exec).
 */
static const char *const sandbox_proc_host[] = {
	"cpuinfo", "meminfo", "stat", "uptime", "loadavg", "version", "filesystems",
	"sys", "zoneinfo", "buddyinfo", "pressure",
};
static const char *const sandbox_proc_self[] = {
	"fd", "fdinfo", "stat", "statm", "status", "comm", "limits", "auxv", "io",
	"sched", "schedstat", "oom_score_adj",
};

static int
sandbox_landlock_proc_rule(int ruleset, const char *path, uint64_t handled, char **ret_cause)
{
	int fd, rc;

	/* An entry that cannot be opened (gone, or not ours) gets no rule. */
	if ((fd = open(path, O_PATH | O_CLOEXEC)) == -1)
		return 0;
	rc = sandbox_landlock_path(ruleset, path, SB_FS_READ, handled, false, ret_cause);
	if (rc < 0)
		close(fd);	/* else kept: the pin */
	return rc;
}

static int
sandbox_landlock_proc(int ruleset, uint64_t handled, char **ret_cause)
{
	char path[64], self[32];
	size_t i;
	int rc = 0;

	/* No rule for /proc itself: its listing names every process. */
	for (i = 0; rc == 0 && i < nitems(sandbox_proc_host); i++) {
		snprintf(path, sizeof(path), "/proc/%s", sandbox_proc_host[i]);
		rc = sandbox_landlock_proc_rule(ruleset, path, handled, ret_cause);
	}
	/* By number, not through "self": a rule is made on what the path names. */
	snprintf(self, sizeof(self), "/proc/%d", (int)getpid());
	for (i = 0; rc == 0 && i < nitems(sandbox_proc_self); i++) {
		snprintf(path, sizeof(path), "%s/%s", self, sandbox_proc_self[i]);
		rc = sandbox_landlock_proc_rule(ruleset, path, handled, ret_cause);
	}
	return rc;
}

int
sandbox_landlock(const struct sandbox_policy *p, char **ret_cause)
{
	struct sandbox_ruleset_attr attr;
	uint32_t flags = 0;
	size_t size, i;
	int abi, ruleset, rc;

	rc = sandbox_policy_check(p, ret_cause);
	if (rc < 0)
		return rc;
	if ((abi = sandbox_landlock_need(ret_cause)) < 0)
		return abi;

	memset(&attr, 0, sizeof(attr));
	attr.handled_access_fs = sandbox_landlock_fs_rights(abi);
	size = offsetof(struct sandbox_ruleset_attr, handled_access_net);
	if (abi >= 4) {
		/* Handled with no rule: no TCP bind or connect at all. */
		attr.handled_access_net = LANDLOCK_ACCESS_NET_BIND_TCP |
		    LANDLOCK_ACCESS_NET_CONNECT_TCP;
		size = offsetof(struct sandbox_ruleset_attr, scoped);
	}
	if (abi >= 6) {
		attr.scoped = LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET |
		    LANDLOCK_SCOPE_SIGNAL;
		size = sizeof(attr);
	}
	ruleset = sandbox_landlock_create(&attr, size, 0);
	if (ruleset < 0) {
		rc = -errno;
		sandbox_cause(ret_cause, "sandbox: landlock_create_ruleset "
		    "(ABI %d): %s", abi, strerror(-rc));
		return rc;
	}

	rc = sandbox_landlock_path(ruleset, p->work_dir, SB_FS_RW,
	    attr.handled_access_fs, true, ret_cause);
	for (i = 0; rc == 0 && i < nitems(sandbox_system_paths); i++) {
		if (p->private_proc && strcmp(sandbox_system_paths[i].path, "/proc") == 0)
			continue;
		rc = sandbox_landlock_path(ruleset, sandbox_system_paths[i].path,
		    sandbox_system_paths[i].access, attr.handled_access_fs,
		    false, ret_cause);
	}
	if (rc == 0 && p->private_proc)
		rc = sandbox_landlock_proc(ruleset, attr.handled_access_fs, ret_cause);
	for (i = 0; rc == 0 && p->gpu && i < nitems(sandbox_gpu_paths); i++)
		rc = sandbox_landlock_path(ruleset, sandbox_gpu_paths[i].path,
		    sandbox_gpu_paths[i].access, attr.handled_access_fs,
		    false, ret_cause);
	if (rc == 0 && p->gpu)
		rc = sandbox_landlock_nvidia(ruleset, attr.handled_access_fs,
		    ret_cause);
	if (rc == 0)
		rc = sandbox_landlock_paths(ruleset, p->ro_paths, SB_FS_READ,
		    attr.handled_access_fs, ret_cause);
	if (rc == 0)
		rc = sandbox_landlock_paths(ruleset, p->rw_paths, SB_FS_RW,
		    attr.handled_access_fs, ret_cause);
	if (rc == 0 && p->allow_exec_compilers)
		rc = sandbox_landlock_exec(ruleset, p, attr.handled_access_fs,
		    ret_cause);
	if (rc < 0)
		goto close_ruleset;

	/* landlock_restrict_self needs it unless we hold CAP_SYS_ADMIN. */
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == -1) {
		rc = -errno;
		sandbox_cause(ret_cause, "sandbox: prctl(PR_SET_NO_NEW_PRIVS): %s",
		    strerror(-rc));
		goto close_ruleset;
	}
	if (abi >= 8)
		flags |= LANDLOCK_RESTRICT_SELF_TSYNC;
	else
		sandbox_landlock_count_threads();
	if (syscall(SYS_landlock_restrict_self, ruleset, flags) == -1) {
		rc = -errno;
		sandbox_cause(ret_cause, "sandbox: landlock_restrict_self: %s",
		    strerror(-rc));
		goto close_ruleset;
	}
	sandbox_log(SANDBOX_LOG_DEBUG, "sandbox: Landlock ABI %d in force", abi);
close_ruleset:
	close(ruleset);
	return rc;
}

/*
 * One thread narrows its own file system further: the nvrtc backend's
 * compile thread (plugins/nvrtc/confine.c), which runs NVRTC on a
 * candidate's source inside a worker already in the sandbox.  Domains
 * nest, so this can only take rights away; only file-system rights are
 * handled (the worker's domain keeps the network and scopes), and never
 * with TSYNC: the worker's other threads keep the worker's domain.
 */
int
sandbox_landlock_thread(const char *const *read_dirs, const char *const *rw_dirs,
    char **ret_cause)
{
	struct sandbox_ruleset_attr attr;
	int abi, ruleset, rc;

	if ((abi = sandbox_landlock_need(ret_cause)) < 0)
		return abi;
	memset(&attr, 0, sizeof(attr));
	attr.handled_access_fs = sandbox_landlock_fs_rights(abi);
	/* The first member alone: the file system is all this is about. */
	ruleset = sandbox_landlock_create(&attr,
	    offsetof(struct sandbox_ruleset_attr, handled_access_net), 0);
	if (ruleset < 0) {
		rc = -errno;
		sandbox_cause(ret_cause, "sandbox: landlock_create_ruleset "
		    "(ABI %d): %s", abi, strerror(-rc));
		return rc;
	}
	rc = sandbox_landlock_paths(ruleset, read_dirs, SB_FS_READ,
	    attr.handled_access_fs, ret_cause);
	if (rc == 0)
		rc = sandbox_landlock_paths(ruleset, rw_dirs, SB_FS_RW,
		    attr.handled_access_fs, ret_cause);
	if (rc < 0)
		goto close_ruleset;
	if (syscall(SYS_landlock_restrict_self, ruleset, 0) == -1) {
		rc = -errno;
		/*
		 * Without no_new_privs (a process outside the sandbox: a
		 * test, or [sandbox] enabled = no) set it for this thread
		 * and try again.  Inside the sandbox it is always set, so
		 * this prctl, which the filter would not allow, is never
		 * reached there.
		 */
		if (rc == -EPERM && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0)
			rc = syscall(SYS_landlock_restrict_self, ruleset, 0) == -1 ?
			    -errno : 0;
		if (rc < 0)
			sandbox_cause(ret_cause, "sandbox: landlock_restrict_self: %s",
			    strerror(-rc));
	}
close_ruleset:
	close(ruleset);
	return rc;
}
