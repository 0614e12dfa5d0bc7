/*
 * test_sandbox_thread.c -- sandbox_landlock_thread(): one thread narrows
 * its own file system, as the nvrtc backend's compile thread does
 * (plugins/nvrtc/confine.c), while the process's other threads keep
 * theirs.  Part of the test_sandbox program (test_sandbox.h).
 */
#include "config.h"

#include <sys/stat.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "test_sandbox.h"

static char thread_ro_dir[sizeof(TEST_DIR_TEMPLATE) + 16];
static char thread_ro_file[sizeof(TEST_DIR_TEMPLATE) + 32];

/* 0 when `path` opens with `flags`, else the errno. */
static int
open_errno(const char *path, int flags)
{
	int fd = open(path, flags | O_CLOEXEC, 0600);

	if (fd < 0)
		return errno;
	close(fd);
	return 0;
}

/* In the narrowed thread: what it must and must not reach.  Its return
 * value names the first thing that went wrong (0: none). */
static void *
narrowed_thread(void *arg)
{
	static const char *const missing[] = { "/nonexistent/kgym-test", NULL };
	const char *ro[] = { thread_ro_dir, missing[0], NULL };
	const char *rw[] = { work_dir, NULL };
	char path[sizeof(work_dir) + 16], *cause = NULL;
	intptr_t r = 0;

	(void)arg;
	if (sandbox_landlock_thread(ro, rw, &cause) != 0) {
		fprintf(stderr, "sandbox_landlock_thread: %s\n", cause ? cause : "?");
		free(cause);
		return (void *)1;
	}
	snprintf(path, sizeof(path), "%s/thread", work_dir);
	if (open_errno(thread_ro_file, O_RDONLY) != 0)
		r = 2;			/* a read directory's file reads */
	else if (open_errno(thread_ro_file, O_WRONLY) != EACCES)
		r = 3;			/* ... and is not writable */
	else if (open_errno(path, O_CREAT | O_WRONLY) != 0 || unlink(path) != 0)
		r = 4;			/* the read-write directory takes files */
	else if (open_errno(outside_file, O_RDONLY) != EACCES)
		r = 5;			/* anything else is out of reach */
	else if (open_errno("/etc/passwd", O_RDONLY) != EACCES)
		r = 6;			/* the system's files too */
	return (void *)r;
}

static int
child_thread(void)
{
	pthread_t th;
	void *r;

	if (pthread_create(&th, NULL, narrowed_thread, NULL) != 0 ||
	    pthread_join(th, &r) != 0)
		return 10;
	if ((intptr_t)r != 0)
		return (int)(intptr_t)r;
	/* The thread's domain was its own: this one still reads. */
	if (open_errno(outside_file, O_RDONLY) != 0 ||
	    open_errno("/etc/passwd", O_RDONLY) != 0)
		return 11;
	return 0;
}

void
test_landlock_thread(void **state)
{
	struct stat st;
	pid_t pid;
	int status;

	(void)state;
	if (landlock_abi <= 0) {
		print_message("[     SKIP ] no Landlock in this kernel\n");
		skip();
	}
	if (stat("/etc/passwd", &st) != 0) {
		print_message("[     SKIP ] no /etc/passwd\n");
		skip();
	}
	snprintf(thread_ro_dir, sizeof(thread_ro_dir), "%s/ro", test_dir);
	snprintf(thread_ro_file, sizeof(thread_ro_file), "%s/headers.h", thread_ro_dir);
	assert_true(mkdir(thread_ro_dir, 0700) == 0 || errno == EEXIST);
	assert_int_equal(write_file(thread_ro_file, "#define X 1\n"), 0);
	fflush(stdout);
	fflush(stderr);
	/* A child of its own: no_new_privs may be set on the thread. */
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(child_thread());
	assert_int_equal(waitpid(pid, &status, 0), pid);
	unlink(thread_ro_file);
	rmdir(thread_ro_dir);
	assert_exited(status, 0);
}
