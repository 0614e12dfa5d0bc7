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
 * The Landlock part is the sandbox library's (lib/sandbox_landlock.c,
 * sandbox_landlock_thread()), the one Landlock implementation of the
 * tree; this file owns the thread.
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

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kgym/sandbox.h"

#include "nvrtc_internal.h"

/* NVRTC recurses deeply on heavy templates (CUB, libcu++). */
#define CONFINE_STACK		((size_t)64 << 20)

struct confine_call {
	const struct confine_policy *policy;
	int (*fn)(void *);
	void *arg;
	int fn_ret;
	int error;		/* the confinement's: 0 or -errno */
	char *cause;
};

/* Restrict the calling thread; 0 or -errno with *cause. */
static int
confine_self(const struct confine_policy *p, char **cause)
{
	char *why = NULL;
	int error;

	error = sandbox_landlock_thread(p->read_dirs, p->rw_dirs, &why);
	if (error == -EOPNOTSUPP)
		*cause = cause_printf("compile sandbox: the kernel has no Landlock (or it is "
		    "disabled), so NVRTC could read any file the worker can");
	else if (error < 0)
		/* The library's causes begin "sandbox: ". */
		*cause = cause_printf("compile %s", why != NULL ? why : strerror(-error));
	free(why);
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
