/*
 * test_sandbox_exec.c -- unit tests of the sandbox's compiler profile
 * (allow_exec_compilers), part of the test_sandbox program (main and the
 * helpers are test_sandbox.c's; see its header for the method).
 *
 * The profile is tried with gcc: the driver, cc1 and as are listed, so a
 * compile into the work directory works, while /bin/sh, python3 and a
 * script the child wrote do not start (EACCES from Landlock), socket() and
 * ptrace() still kill, and a forked child or an exec'd compiler is bound by
 * the same filter and domain.  Skipped without gcc or without Landlock
 * (which the profile requires).
 */
#include "config.h"

#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>

#include <netinet/in.h>
#include <arpa/inet.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "kgym/sandbox.h"

#include "test_sandbox.h"

/* --------------------------------------------------- the compiler profile */

/* Also writes the source the compiles use (other cases wipe work_dir). */
static void
need_exec_profile(void)
{
	if (gcc_path[0] == '\0' || cc1_path[0] == '\0' || as_path[0] == '\0') {
		print_message("[     SKIP ] no gcc (driver, cc1 and as)\n");
		skip();
	}
	if (landlock_abi <= 0) {
		print_message("[     SKIP ] no Landlock, which the compiler "
		    "profile needs\n");
		skip();
	}
	assert_int_equal(write_file(tiny_c, "int tiny(int x) { return x + 1; }\n"),
	    0);
}

static int
run_exec_child(int (*fn)(void))
{
	struct sandbox_policy p = exec_policy();
	struct child c = { .policy = &p, .stage = STAGE_ENTER, .fn = fn };

	return run_child(&c, NULL);
}

/* Run argv[0] with TMPDIR in the work directory (gcc's temporary files);
 * its wait status, or -1 when it could not start (errno says why). */
static int
spawn_wait(char *const argv[])
{
	char tmpdir[sizeof(work_dir) + 8];
	char *envp[] = { "PATH=/usr/bin:/bin", tmpdir, NULL };
	posix_spawn_file_actions_t fa;
	int status, rc;
	pid_t pid;

	snprintf(tmpdir, sizeof(tmpdir), "TMPDIR=%s", work_dir);
	if (posix_spawn_file_actions_init(&fa) != 0 ||
	    posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "/dev/null",
	    O_WRONLY, 0) != 0 ||
	    posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, "/dev/null",
	    O_WRONLY, 0) != 0)
		return -1;
	rc = posix_spawn(&pid, argv[0], &fa, NULL, argv, envp);
	posix_spawn_file_actions_destroy(&fa);
	if (rc != 0) {
		errno = rc;
		return -1;
	}
	if (waitpid(pid, &status, 0) != pid)
		return -1;
	return status;
}

static int
child_exec_compiler(void)
{
	char *const version[] = { gcc_path, "--version", NULL };
	char *const compile[] = { gcc_path, "-c", tiny_c, "-o", tiny_o, NULL };
	struct stat st;
	int status;

	status = spawn_wait(version);
	if (status < 0)
		return 10 + (errno == EACCES);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		return 2;
	/* driver -> cc1 -> as: a real object file in the work directory */
	status = spawn_wait(compile);
	if (status < 0)
		return 3;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		return 4;
	if (stat(tiny_o, &st) != 0 || st.st_size == 0)
		return 5;
	return 0;
}

void
test_exec_compiler(void **state)
{
	need_exec_profile();
	unlink(tiny_o);
	assert_exited(run_exec_child(child_exec_compiler), 0);
}

/* Exec of a program that is not listed: EACCES, no death. */
static int
exec_denied(const char *path)
{
	char *const argv[] = { (char *)path, NULL };

	if (access(path, X_OK) != 0)
		return 0;		/* not on this machine: nothing to show */
	execve(path, argv, environ);
	return errno == EACCES ? 0 : 1;
}

static int
child_exec_unlisted(void)
{
	if (exec_denied("/bin/sh") != 0)
		return 1;
	if (exec_denied("/usr/bin/python3") != 0)
		return 2;
	/* Executable outside the sandbox (the test checked), written by a
	 * job: a writable place never has EXECUTE. */
	if (exec_denied(own_script) != 0)
		return 3;
	/* A descriptor is no way around it: execveat is not in the profile. */
	syscall(SYS_execveat, AT_FDCWD, gcc_path, NULL, NULL, 0);
	return 4;
}

void
test_exec_unlisted(void **state)
{
	char *const argv[] = { own_script, NULL };
	int status, fd;

	need_exec_profile();
	fd = open(own_script, O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, 0700);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "#!/bin/sh\nexit 7\n", 18), 18);
	close(fd);
	status = spawn_wait(argv);
	if (status < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 7) {
		print_message("[     SKIP ] %s does not run even unsandboxed "
		    "(noexec /tmp?)\n", own_script);
		unlink(own_script);
		skip();
	}
	/* Up to execveat, refused softly; execveat kills. */
	assert_killed(run_exec_child(child_exec_unlisted), SIGSYS);
	unlink(own_script);
}

static int
child_fork_socket(void)
{
	int status;
	pid_t pid;

	pid = fork();
	if (pid < 0)
		return 1;
	if (pid == 0) {
		socket(AF_UNIX, SOCK_STREAM, 0);
		_exit(0);
	}
	if (waitpid(pid, &status, 0) != pid)
		return 2;
	return WIFSIGNALED(status) && WTERMSIG(status) == SIGSYS ? 0 : 3;
}

/* What a compiler reads is what the job may read: its own source, not a
 * file outside the sandbox. */
static int
child_compiler_confined(void)
{
	char *const inside[] = { gcc_path, "-fsyntax-only", tiny_c, NULL };
	char *const outside[] = { gcc_path, "-fsyntax-only", outside_c, NULL };
	int status;

	status = spawn_wait(inside);
	if (status < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
		return 1;
	status = spawn_wait(outside);
	if (status < 0 || !WIFEXITED(status) || WEXITSTATUS(status) == 0)
		return 2;
	return 0;
}

static int
child_clone_newuser(void)
{
	long r;

	r = syscall(SYS_clone, (unsigned long)(CLONE_NEWUSER | SIGCHLD), NULL,
	    NULL, NULL, NULL);
	if (r == 0)
		_exit(0);
	return 1;
}

static int
child_chmod_soft(void)
{
	char path[sizeof(work_dir) + 16];
	struct stat st;
	int fd;

	snprintf(path, sizeof(path), "%s/mode", work_dir);
	fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
	if (fd < 0)
		return 1;
	close(fd);
	if (chmod(path, 0755) == 0 || errno != EPERM)
		return 2;
	if (stat(path, &st) != 0 || (st.st_mode & 07777) != 0600)
		return 3;
	unlink(path);
	return 0;
}

/* No signal leaves under the compiler profile either, but softly (ninja
 * signals its commands' groups when a build fails). */
static int
child_kill_parent_soft(void)
{
	if (kill(getppid(), 0) == 0 || errno != EPERM)
		return 1;
	if (kill(0, 0) == 0 || errno != EPERM)
		return 2;
	return kill(getpid(), 0) == 0 ? 0 : 3;
}

static int
child_chmod(void)
{
	return chmod(work_dir, 0700) == 0 ? 0 : 1;
}

void
test_exec_profile_limits(void **state)
{
	struct stat st;

	need_exec_profile();
	/* Still no sockets, no debugging, no namespaces ... */
	assert_killed(run_exec_child(child_socket_inet), SIGSYS);
	assert_killed(run_exec_child(child_socket_unix), SIGSYS);
	assert_killed(run_exec_child(child_ptrace), SIGSYS);
	assert_killed(run_exec_child(child_process_vm_readv), SIGSYS);
	assert_killed(run_exec_child(child_clone_newuser), SIGSYS);
	assert_exited(run_exec_child(child_kill_parent_soft), 0);
	assert_killed(run_simple(child_kill_parent_soft), SIGSYS);
	/* ... in a forked child too, and for what it execs. */
	assert_exited(run_exec_child(child_fork_socket), 0);
	assert_int_equal(stat(outside_c, &st), 0);
	assert_exited(run_exec_child(child_compiler_confined), 0);
	/* Processes may be made; chmod (ld's) fails softly here only. */
	assert_exited(run_exec_child(child_fork), 0);
	assert_exited(run_exec_child(child_chmod_soft), 0);
	assert_killed(run_simple(child_chmod), SIGSYS);
}

/* Without the profile, Landlock alone refuses exec too (layers hold on
 * their own); the filter, which kills first, is test_execve's. */
static int
child_exec_eacces(void)
{
	char *const argv[] = { "true", NULL };

	execve("/bin/true", argv, environ);
	return errno == EACCES ? 0 : 1;
}

void
test_landlock_no_execute(void **state)
{
	struct child c = { .stage = STAGE_LANDLOCK, .fn = child_exec_eacces };

	if (landlock_abi <= 0) {
		print_message("[     SKIP ] no Landlock in this kernel\n");
		skip();
	}
	assert_exited(run_child(&c, NULL), 0);
}

/* The strict profile with the compilers' list but not the flag: refused,
 * and a worker's filter still kills exec of a compiler. */
static int
child_exec_gcc(void)
{
	char *const argv[] = { gcc_path, "--version", NULL };

	execve(gcc_path, argv, environ);
	return 1;
}

void
test_exec_profile_off(void **state)
{
	if (gcc_path[0] == '\0') {
		print_message("[     SKIP ] no gcc\n");
		skip();
	}
	assert_killed(run_simple(child_exec_gcc), SIGSYS);
	assert_killed(run_simple(child_posix_spawn), SIGSYS);
}

void
test_exec_profile_needs_landlock(void **state)
{
	struct sandbox_policy p = exec_policy();
	struct sandbox_report report;
	char *cause = NULL;
	int status;
	pid_t pid;

	if (landlock_abi > 0) {
		print_message("[     SKIP ] this kernel has Landlock\n");
		skip();
	}
	if (gcc_path[0] == '\0')
		skip();
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(sandbox_enter(&p, &report, &cause) == -EOPNOTSUPP &&
		    cause != NULL ? 0 : 1);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_exited(status, 0);
}

