/*
 * confine.c -- the compile step's own file-system sandbox: NVRTC runs in a
 * thread that can open only the CUDA headers and the job's scratch
 * directory.
 *
 * The CPU worker's sandbox (kgymd-worker's Landlock domain) lets a job read
 * what any job may need: /usr, /proc, /etc/passwd and the rest.  NVRTC
 * opens whatever path an #include names, so a candidate that includes
 * "/etc/passwd" or "/proc/self/environ" would get those bytes back in the
 * compiler's log -- or, subtler, inside a message about its own line
 * ("incomplete type S<12345>").  Filtering the log cannot close the second
 * way, so the file must not open at all.
 *
 * Landlock domains nest: a thread may restrict itself further at any time
 * (the worker has set no_new_privs already), and before Landlock ABI 8 a
 * restriction binds the calling thread alone (we never ask for TSYNC).  So
 * every compile gets a fresh thread that first restricts itself to
 * reading the include directories and reading and writing the scratch
 * directory, then calls NVRTC, and ends; the worker's other threads keep
 * the worker's own domain.  Nothing but NVRTC runs in that thread, and
 * NVRTC runs no candidate code, so binding the one thread is enough.
 *
 * Landlock does not mediate stat(): whether a path exists (NVRTC's
 * __has_include) is still visible, its contents are not.
 *
 * Fail closed: a kernel without Landlock, or a ruleset that cannot be
 * made, means the compile does not run (-EOPNOTSUPP or -errno with a
 * cause), unless the caller asked for no confinement at all.
 *
 * The worker's seccomp filter must allow landlock_create_ruleset,
 * landlock_add_rule and landlock_restrict_self (nvrtc.c's syscalls list):
 * they can only take rights away.
 */
#include "config.h"

#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <linux/landlock.h>

#include "nvrtc_internal.h"

#ifndef LANDLOCK_ACCESS_FS_REFER
#define LANDLOCK_ACCESS_FS_REFER		(1ULL << 13)
#endif
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE		(1ULL << 14)
#endif
#ifndef LANDLOCK_ACCESS_FS_IOCTL_DEV
#define LANDLOCK_ACCESS_FS_IOCTL_DEV		(1ULL << 15)
#endif

/* NVRTC recurses deeply on heavy templates (CUB, libcu++). */
#define CONFINE_STACK		((size_t)64 << 20)

#define CONFINE_READ	(LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR)
/* Rights a non-directory may be given. */
#define CONFINE_FILE	(LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE | \
	    LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_TRUNCATE | \
	    LANDLOCK_ACCESS_FS_IOCTL_DEV)

struct confine_call {
	const struct confine_policy *policy;
	int (*fn)(void *);
	void *arg;
	int fn_ret;
	int error;		/* the confinement's: 0 or -errno */
	char *cause;
};

int
confine_abi(void)
{
	long abi = syscall(SYS_landlock_create_ruleset, NULL, 0,
	    LANDLOCK_CREATE_RULESET_VERSION);

	return abi < 0 ? -EOPNOTSUPP : (int)abi;
}

/* Every file-system right this ABI knows: handled, so denied unless granted. */
static uint64_t
confine_fs_rights(int abi)
{
	uint64_t rights = (LANDLOCK_ACCESS_FS_MAKE_SYM << 1) - 1;

	if (abi >= 2)
		rights |= LANDLOCK_ACCESS_FS_REFER;
	if (abi >= 3)
		rights |= LANDLOCK_ACCESS_FS_TRUNCATE;
	if (abi >= 5)
		rights |= LANDLOCK_ACCESS_FS_IOCTL_DEV;
	return rights;
}

/* A missing path gets no rule: a rule only grants. */
static int
confine_rule(int ruleset, const char *path, uint64_t access, uint64_t handled, char **cause)
{
	struct landlock_path_beneath_attr attr;
	struct stat st;
	int fd, error = 0;

	if ((fd = open(path, O_PATH | O_CLOEXEC)) < 0)
		return errno == ENOENT || errno == ENOTDIR ? 0 : -errno;
	if (fstat(fd, &st) < 0) {
		error = -errno;
		goto out;
	}
	memset(&attr, 0, sizeof attr);
	attr.parent_fd = fd;
	attr.allowed_access = access & handled;
	if (!S_ISDIR(st.st_mode))
		attr.allowed_access &= CONFINE_FILE;
	if (attr.allowed_access != 0 && syscall(SYS_landlock_add_rule, ruleset,
	    LANDLOCK_RULE_PATH_BENEATH, &attr, 0) < 0)
		error = -errno;
out:
	if (error < 0)
		*cause = cause_printf("compile sandbox: a rule for a directory it may read: %s",
		    strerror(-error));
	close(fd);
	return error;
}

/* Restrict the calling thread; 0 or -errno with *cause. */
static int
confine_self(const struct confine_policy *p, char **cause)
{
	struct landlock_ruleset_attr attr;
	uint64_t handled;
	int abi, ruleset, error = 0;
	size_t i;

	if ((abi = confine_abi()) < 0) {
		*cause = cause_printf("compile sandbox: the kernel has no Landlock (or it is "
		    "disabled), so NVRTC could read any file the worker can");
		return -EOPNOTSUPP;
	}
	handled = confine_fs_rights(abi);
	memset(&attr, 0, sizeof attr);
	attr.handled_access_fs = handled;
	/* Only the first member: the file system is all this layer is about. */
	ruleset = (int)syscall(SYS_landlock_create_ruleset, &attr,
	    sizeof attr.handled_access_fs, 0);
	if (ruleset < 0) {
		error = -errno;
		*cause = cause_printf("compile sandbox: landlock_create_ruleset: %s",
		    strerror(-error));
		return error;
	}
	for (i = 0; error == 0 && p->read_dirs != NULL && p->read_dirs[i] != NULL; i++)
		error = confine_rule(ruleset, p->read_dirs[i], CONFINE_READ, handled, cause);
	/* Writable, never executable. */
	for (i = 0; error == 0 && p->rw_dirs != NULL && p->rw_dirs[i] != NULL; i++)
		error = confine_rule(ruleset, p->rw_dirs[i],
		    handled & ~(uint64_t)LANDLOCK_ACCESS_FS_EXECUTE, handled, cause);
	if (error < 0)
		goto out;
	if (syscall(SYS_landlock_restrict_self, ruleset, 0) < 0) {
		error = -errno;
		/*
		 * Without no_new_privs (a worker run with [sandbox] enabled =
		 * no, or a test) set it for this thread and try again; under
		 * the worker's filter it is always set, so the prctl below,
		 * which the filter would not allow, is never reached there.
		 */
		if (error == -EPERM && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0)
			error = syscall(SYS_landlock_restrict_self, ruleset, 0) < 0 ? -errno : 0;
		if (error < 0)
			*cause = cause_printf("compile sandbox: landlock_restrict_self: %s",
			    strerror(-error));
	}
out:
	close(ruleset);
	return error;
}

static void *
confine_thread(void *arg)
{
	struct confine_call *c = arg;

	if ((c->error = confine_self(c->policy, &c->cause)) == 0)
		c->fn_ret = c->fn(c->arg);
	return NULL;
}

int
confine_run(const struct confine_policy *p, int (*fn)(void *), void *arg, int *ret_fn,
    char **ret_cause)
{
	struct confine_call c = { .policy = p, .fn = fn, .arg = arg };
	pthread_attr_t attr;
	pthread_t th;
	int r;

	if ((r = pthread_attr_init(&attr)) != 0)
		goto fail;
	if ((r = pthread_attr_setstacksize(&attr, CONFINE_STACK)) == 0)
		r = pthread_create(&th, &attr, confine_thread, &c);
	pthread_attr_destroy(&attr);
	if (r != 0)
		goto fail;
	pthread_join(th, NULL);
	if (c.error < 0) {
		if (ret_cause != NULL)
			*ret_cause = c.cause;
		else
			free(c.cause);
		return c.error;
	}
	*ret_fn = c.fn_ret;
	return 0;
fail:
	if (ret_cause != NULL)
		*ret_cause = cause_printf("compile sandbox: cannot start the compile thread: "
		    "%s", strerror(r));
	return -r;
}
