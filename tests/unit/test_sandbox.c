/*
 * test_sandbox.c -- unit tests of the sandbox library, lib/sandbox.c (cmocka).
 *
 * A sandbox cannot be left, so every case forks: the child puts the sandbox
 * (or one layer of it) in place, does one thing, and ends; the parent looks
 * at how it ended -- an exit code the child chose, or the signal that killed
 * it (SIGSYS for a call the filter forbids).  The child never uses cmocka:
 * it reports through its exit status only, and codes other than 0 name the
 * step that went wrong.
 *
 * The policy is a CPU worker's, with a private work directory beside an
 * "outside" directory holding a file the child must not read.  File-system
 * cases are skipped (reported as such) on a kernel without Landlock, TCP and
 * signal scoping on one whose Landlock ABI lacks them.
 *
 * The compiler profile (allow_exec_compilers, test_sandbox_exec.c) is tried with gcc: the
 * driver, cc1 and as are listed, so a compile into the work directory
 * works, while /bin/sh, python3 and a script the child wrote do not start
 * (EACCES from Landlock), socket() and ptrace() still kill, and a forked
 * child or an exec'd compiler is bound by the same filter and domain.
 * Those cases are skipped without gcc or without Landlock (which the
 * profile requires).
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

char test_dir[sizeof(TEST_DIR_TEMPLATE)] = TEST_DIR_TEMPLATE;
char work_dir[sizeof(TEST_DIR_TEMPLATE) + 16];
char outside_file[sizeof(TEST_DIR_TEMPLATE) + 32];
char outside_c[sizeof(TEST_DIR_TEMPLATE) + 32];
char tiny_c[sizeof(TEST_DIR_TEMPLATE) + 32];
char tiny_o[sizeof(TEST_DIR_TEMPLATE) + 32];
char own_script[sizeof(TEST_DIR_TEMPLATE) + 32];
int landlock_abi;
char gcc_path[4096], cc1_path[4096], as_path[4096];
const char *exec_list[4];

struct sandbox_policy
cpu_policy(void)
{
	struct sandbox_policy p = {
		.work_dir = work_dir,
		.gpu = false,
		.memory_bytes = MEMORY_BYTES,
		.max_files = MAX_FILES,
		/* High: RLIMIT_NPROC counts every process of a non-root user. */
		.max_processes = 65536,
		.max_file_bytes = MAX_FILE_BYTES,
		.cpu_seconds = CPU_SECONDS,
	};

	return p;
}

/* The same, under the compiler profile, gcc's programs listed. */
struct sandbox_policy
exec_policy(void)
{
	struct sandbox_policy p = cpu_policy();

	p.allow_exec_compilers = true;
	p.exec_paths = exec_list;
	return p;
}

/*
 * Fork, sandbox the child at c->stage, run c->fn there; return the child's
 * wait status.  With STAGE_ENTER the child sends its report through a pipe
 * first (write(2) is allowed), and *ret_report gets it.
 */
int
run_child(const struct child *c, struct sandbox_report *ret_report)
{
	struct sandbox_policy def = cpu_policy();
	const struct sandbox_policy *p = c->policy != NULL ? c->policy : &def;
	struct sandbox_report report;
	char *cause = NULL;
	int fds[2], status, rc;
	ssize_t n;
	pid_t pid;

	assert_int_equal(pipe2(fds, O_CLOEXEC), 0);
	fflush(stdout);
	fflush(stderr);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(fds[0]);
		if (c->before != NULL)
			c->before();
		switch (c->stage) {
		case STAGE_ENTER:
			rc = sandbox_enter(p, &report, &cause);
			break;
		case STAGE_RLIMITS:
			rc = sandbox_rlimits(p, &cause);
			break;
		case STAGE_LANDLOCK:
			rc = sandbox_landlock(p, &cause);
			break;
		default:
			rc = -EINVAL;
			break;
		}
		if (rc < 0) {
			fprintf(stderr, "child: %s\n",
			    cause != NULL ? cause : strerror(-rc));
			_exit(ENTER_FAILED);
		}
		if (c->stage == STAGE_ENTER &&
		    write(fds[1], &report, sizeof(report)) != sizeof(report))
			_exit(ENTER_FAILED + 1);
		close(fds[1]);
		_exit(c->fn());
	}
	close(fds[1]);
	memset(&report, 0, sizeof(report));
	n = read(fds[0], &report, sizeof(report));
	close(fds[0]);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	if (ret_report != NULL) {
		assert_int_equal(n, (ssize_t)sizeof(report));
		*ret_report = report;
	}
	return status;
}

void
assert_exited(int status, int code)
{
	if (WIFSIGNALED(status))
		print_error("child killed by signal %d (%s), expected exit %d\n",
		    WTERMSIG(status), strsignal(WTERMSIG(status)), code);
	assert_true(WIFEXITED(status));
	if (WEXITSTATUS(status) != code)
		print_error("child exited %d, expected %d\n",
		    WEXITSTATUS(status), code);
	assert_int_equal(WEXITSTATUS(status), code);
}

void
assert_killed(int status, int sig)
{
	if (WIFEXITED(status))
		print_error("child exited %d, expected death by signal %d (%s)\n",
		    WEXITSTATUS(status), sig, strsignal(sig));
	assert_true(WIFSIGNALED(status));
	assert_int_equal(WTERMSIG(status), sig);
}

int
run_simple(int (*fn)(void))
{
	struct child c = { .stage = STAGE_ENTER, .fn = fn };

	return run_child(&c, NULL);
}

/* ------------------------------------------------- what must still work */

static void *
thread_main(void *arg)
{
	*(int *)arg = 42;
	return NULL;
}

static int
child_basics(void)
{
	char path[sizeof(work_dir) + 16], buf[6];
	struct timespec ts;
	struct rlimit rl;
	pthread_t th;
	int fd, value = 0;
	char *mem;

	snprintf(path, sizeof(path), "%s/file", work_dir);
	fd = open(path, O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || write(fd, "hello", 5) != 5 || close(fd) != 0)
		return 1;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || read(fd, buf, 5) != 5 || memcmp(buf, "hello", 5) != 0)
		return 2;
	close(fd);
	if (unlink(path) != 0)
		return 3;
	mem = malloc(64 << 20);		/* well under MEMORY_BYTES */
	if (mem == NULL)
		return 4;
	memset(mem, 1, 64 << 20);
	free(mem);
	if (pthread_create(&th, NULL, thread_main, &value) != 0 ||
	    pthread_join(th, NULL) != 0 || value != 42)
		return 5;
	if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0)
		return 6;
	if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur != MAX_FILES)
		return 7;
	if (prctl(PR_SET_NAME, "kgym-test", 0, 0, 0) != 0)
		return 8;
	return 0;
}

static void
test_allowed(void **state)
{
	struct child c = { .stage = STAGE_ENTER, .fn = child_basics };
	struct sandbox_report report;

	assert_exited(run_child(&c, &report), 0);
	assert_true(report.seccomp);
	assert_int_equal(report.landlock_abi, landlock_abi);
}

/* 0 when /proc/self/status says `field` is all zero bits. */
static int
status_caps_zero(const char *field)
{
	char line[256];
	unsigned long long v = 1;
	size_t n = strlen(field);
	FILE *f = fopen("/proc/self/status", "re");

	if (f == NULL)
		return -1;
	while (fgets(line, sizeof line, f) != NULL)
		if (strncmp(line, field, n) == 0 && line[n] == ':')
			v = strtoull(line + n + 1, NULL, 16);
	fclose(f);
	return v == 0 ? 0 : 1;
}

/* A root worker keeps no capability (CAP_SYS_PTRACE would open every
 * process's /proc files to the candidate). */
static int
child_no_capabilities(void)
{
	if (status_caps_zero("CapEff") != 0)
		return 1;
	if (status_caps_zero("CapPrm") != 0)
		return 2;
	if (status_caps_zero("CapAmb") != 0)
		return 3;
	if (geteuid() == 0 && status_caps_zero("CapBnd") != 0)
		return 4;
	return 0;
}

static void
test_no_capabilities(void **state)
{
	assert_exited(run_simple(child_no_capabilities), 0);
}

static int
child_system_reads(void)
{
	char buf[16];
	DIR *dir;
	int fd;

	fd = open("/etc/ld.so.cache", O_RDONLY | O_CLOEXEC);
	if (fd < 0 || read(fd, buf, sizeof(buf)) <= 0)
		return 1;
	close(fd);
	if ((dir = opendir("/usr/lib")) == NULL)
		return 2;
	closedir(dir);
	fd = open("/dev/null", O_WRONLY | O_TRUNC | O_CLOEXEC);
	if (fd < 0 || write(fd, "x", 1) != 1)
		return 3;
	close(fd);
	fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
	if (fd < 0 || read(fd, buf, sizeof(buf)) <= 0)
		return 4;
	close(fd);
	return 0;
}

static void
test_system_reads(void **state)
{
	assert_exited(run_simple(child_system_reads), 0);
}

static int
wipe_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	if (ftw->level == 0)
		return 0;
	return remove(path) == 0 ? 0 : 1;
}

/* The worker empties its directory between jobs, inside the sandbox. */
static int
child_wipe(void)
{
	char path[sizeof(work_dir) + 32];
	DIR *dir;
	struct dirent *de;
	int fd, left = 0;

	snprintf(path, sizeof(path), "%s/a", work_dir);
	if (mkdir(path, 0700) != 0)
		return 1;
	snprintf(path, sizeof(path), "%s/a/b", work_dir);
	if (mkdir(path, 0700) != 0)
		return 2;
	snprintf(path, sizeof(path), "%s/a/b/f", work_dir);
	fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
	if (fd < 0)
		return 3;
	close(fd);
	if (nftw(work_dir, wipe_one, 16, FTW_DEPTH | FTW_PHYS) != 0)
		return 4;
	if ((dir = opendir(work_dir)) == NULL)
		return 5;
	while ((de = readdir(dir)) != NULL)
		if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
			left++;
	closedir(dir);
	return left == 0 ? 0 : 6;
}

static void
test_wipe(void **state)
{
	assert_exited(run_simple(child_wipe), 0);
}

/* isatty() is ioctl(TCGETS): a soft no, not death; clone3 says ENOSYS so
 * glibc falls back to clone. */
static int
child_soft_denials(void)
{
	int fds[2], n;

	errno = 0;
	if (isatty(STDIN_FILENO) != 0 || errno != ENOTTY)
		return 1;
	/* A pipe answers FIONREAD: ENOTTY here is the filter's doing. */
	if (pipe(fds) != 0)
		return 3;
	errno = 0;
	if (ioctl(fds[0], FIONREAD, &n) != -1 || errno != ENOTTY)
		return 4;
	errno = 0;
	if (syscall(SYS_clone3, NULL, 0) != -1 || errno != ENOSYS)
		return 2;
	return 0;
}

static void
test_soft_denials(void **state)
{
	assert_exited(run_simple(child_soft_denials), 0);
}

static volatile sig_atomic_t got_usr1;

static void
on_usr1(int sig)
{
	got_usr1 = sig;
}

static int
child_signal_self(void)
{
	signal(SIGUSR1, on_usr1);
	if (raise(SIGUSR1) != 0 || got_usr1 != SIGUSR1)
		return 1;
	if (kill(getpid(), 0) != 0)
		return 2;
	return 0;
}

static void
test_signal_self(void **state)
{
	assert_exited(run_simple(child_signal_self), 0);
}

/* ------------------------------------------------- what must kill (SIGSYS) */

int
child_socket_inet(void)
{
	return socket(AF_INET, SOCK_STREAM, 0) >= 0 ? 0 : 1;
}

int
child_socket_unix(void)
{
	return socket(AF_UNIX, SOCK_STREAM, 0) >= 0 ? 0 : 1;
}

static int
child_execve(void)
{
	char *const argv[] = { "true", NULL };

	execve("/bin/true", argv, environ);
	return 1;
}

int
child_fork(void)
{
	pid_t pid = fork();

	if (pid == 0)
		_exit(0);
	return pid > 0 ? 0 : 1;
}

int
child_posix_spawn(void)
{
	char *const argv[] = { "true", NULL };
	pid_t pid;

	return posix_spawn(&pid, "/bin/true", NULL, NULL, argv, environ) == 0 ?
	    0 : 1;
}

int
child_ptrace(void)
{
	return ptrace(PTRACE_TRACEME, 0, NULL, NULL) == 0 ? 0 : 1;
}

int
child_process_vm_readv(void)
{
	char src[8] = "secret", dst[8];
	struct iovec local = { dst, sizeof(dst) }, remote = { src, sizeof(src) };

	return process_vm_readv(getpid(), &local, 1, &remote, 1, 0) >= 0 ? 0 : 1;
}

static int
child_kill_parent(void)
{
	return kill(getppid(), 0) == 0 ? 0 : 1;
}

/* Changing a limit is refused with EPERM (NVRTC tries, and copes). */
static int
child_setrlimit(void)
{
	struct rlimit rl = { 16, 16 }, now;

	if (setrlimit(RLIMIT_NOFILE, &rl) == 0)
		return 1;
	if (errno != EPERM)
		return 2;
	if (getrlimit(RLIMIT_NOFILE, &now) < 0 || now.rlim_cur == 16)
		return 3;
	return 0;
}

static int
child_getpriority(void)
{
	errno = 0;
	return getpriority(PRIO_PROCESS, 0) == -1 && errno != 0 ? 1 : 0;
}

#ifdef __x86_64__
/* oneDNN's question before AMX code (torch's CPU convolutions): asked and
 * answered, not killed. */
static int
child_xcomp_perm(void)
{
	unsigned long features = 0;

	return syscall(SYS_arch_prctl, 0x1022 /* ARCH_GET_XCOMP_PERM */,
	    &features) == 0 ? 0 : 1;
}

/* Any other code (here ARCH_SET_GS) is not the common set's. */
static int
child_arch_prctl_set_gs(void)
{
	syscall(SYS_arch_prctl, 0x1001 /* ARCH_SET_GS */, 0UL);
	return 0;
}
#endif

static void
test_arch_prctl(void **state)
{
#ifdef __x86_64__
	assert_exited(run_simple(child_xcomp_perm), 0);
	assert_killed(run_simple(child_arch_prctl_set_gs), SIGSYS);
#else
	skip();
#endif
}

static void
test_socket_inet(void **state)
{
	assert_killed(run_simple(child_socket_inet), SIGSYS);
}

static void
test_socket_unix_cpu(void **state)
{
	assert_killed(run_simple(child_socket_unix), SIGSYS);
}

static void
test_execve(void **state)
{
	assert_killed(run_simple(child_execve), SIGSYS);
}

static void
test_fork(void **state)
{
	assert_killed(run_simple(child_fork), SIGSYS);
}

static void
test_posix_spawn(void **state)
{
	assert_killed(run_simple(child_posix_spawn), SIGSYS);
}

static void
test_ptrace(void **state)
{
	assert_killed(run_simple(child_ptrace), SIGSYS);
}

static void
test_process_vm_readv(void **state)
{
	assert_killed(run_simple(child_process_vm_readv), SIGSYS);
}

static void
test_kill_parent(void **state)
{
	assert_killed(run_simple(child_kill_parent), SIGSYS);
}

static void
test_setrlimit(void **state)
{
	assert_exited(run_simple(child_setrlimit), 0);
}

/*
 * TSYNC: a thread that exists before the filter is installed is bound by
 * it.  It waits on a pipe until the main thread is inside the sandbox.
 */
static int tsync_pipe[2];

static void *
tsync_thread(void *arg)
{
	char c;

	if (read(tsync_pipe[0], &c, 1) != 1)
		_exit(2);
	if (socket(AF_INET, SOCK_STREAM, 0) >= 0)
		_exit(0);	/* not bound: the test fails */
	_exit(3);
}

static pthread_t tsync_th;

static void
tsync_before(void)
{
	if (pipe(tsync_pipe) != 0 ||
	    pthread_create(&tsync_th, NULL, tsync_thread, NULL) != 0)
		_exit(4);
}

static int
child_tsync(void)
{
	if (write(tsync_pipe[1], "x", 1) != 1)
		return 5;
	pthread_join(tsync_th, NULL);
	return 6;
}

static void
test_tsync(void **state)
{
	struct child c = {
		.stage = STAGE_ENTER, .before = tsync_before, .fn = child_tsync
	};

	assert_killed(run_child(&c, NULL), SIGSYS);
}

/* ----------------------------------------------------- a backend's extras */

static void
test_extra_syscalls(void **state)
{
	const char *const extras[] = { "getpriority", "no_such_call", NULL };
	struct sandbox_policy p = cpu_policy();
	struct child c = { .stage = STAGE_ENTER, .fn = child_getpriority };

	/* Not in the common list ... */
	assert_killed(run_child(&c, NULL), SIGSYS);
	/* ... allowed when a backend names it; an unknown name is skipped. */
	p.extra_syscalls = extras;
	c.policy = &p;
	assert_exited(run_child(&c, NULL), 0);
}

/* --------------------------------------------------------- a GPU policy */

static int
child_gpu_calls(void)
{
	int fds[2], n = -1;

	/* First: a CPU worker dies here (ioctl would only fail softly). */
	if (syscall(SYS_get_mempolicy, NULL, NULL, 0, NULL, 0) != 0)
		return 1;
	if (pipe(fds) != 0 || write(fds[1], "abc", 3) != 3)
		return 2;
	if (ioctl(fds[0], FIONREAD, &n) != 0 || n != 3)
		return 3;
	return 0;
}

static void
test_gpu_policy(void **state)
{
	struct sandbox_policy p = cpu_policy();
	struct child c = { .policy = &p, .stage = STAGE_ENTER };

	/* Runs without a GPU: absent /dev/nvidia* nodes are skipped. */
	p.gpu = true;
	c.fn = child_gpu_calls;
	assert_exited(run_child(&c, NULL), 0);
	/* No new sockets for a GPU worker either (see sandbox_gpu[]). */
	c.fn = child_socket_unix;
	assert_killed(run_child(&c, NULL), SIGSYS);
	c.fn = child_socket_inet;
	assert_killed(run_child(&c, NULL), SIGSYS);
	/* ... and the GPU list is not a CPU worker's. */
	p.gpu = false;
	c.fn = child_gpu_calls;
	assert_killed(run_child(&c, NULL), SIGSYS);
}

/* ------------------------------------------------------------ Landlock */

static int
child_outside(void)
{
	DIR *dir;
	int fd;

	fd = open(outside_file, O_RDONLY | O_CLOEXEC);
	if (fd >= 0 || errno != EACCES)
		return 1;
	fd = open("/tmp/kgym-test-sandbox-escape", O_CREAT | O_WRONLY | O_CLOEXEC,
	    0600);
	if (fd >= 0 || errno != EACCES)
		return 2;
	/* The daemon's configuration lives in /etc: only a few files of it. */
	if ((dir = opendir("/etc")) != NULL || errno != EACCES)
		return 3;
	fd = open("/etc/hostname", O_RDONLY | O_CLOEXEC);
	if (fd >= 0 || errno != EACCES)
		return 4;
	fd = open("/etc/passwd", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 5;
	close(fd);
	return 0;
}

static void
test_landlock_outside(void **state)
{
	struct stat st;

	if (landlock_abi <= 0) {
		print_message("[     SKIP ] no Landlock in this kernel\n");
		skip();
	}
	/* Both must exist, or an ENOENT would pass for a denial. */
	assert_int_equal(stat(outside_file, &st), 0);
	if (stat("/etc/hostname", &st) != 0 || stat("/etc/passwd", &st) != 0) {
		print_message("[     SKIP ] no /etc/hostname or /etc/passwd\n");
		skip();
	}
	assert_exited(run_simple(child_outside), 0);
}

/*
 * private_proc: what a runtime reads of itself and of the machine stays
 * readable; another process's directory (here the test runner's, the
 * child's parent, which certainly exists) does not open, nor what tells of
 * the host (its own environment and mounts, the sockets, the locks).  Without the
 * flag the parent's command line is readable (the control).
 */
static char parent_cmdline[64];

static int
child_private_proc(void)
{
	static const char *const host[] = {
		"/proc/self/environ", "/proc/self/cmdline", "/proc/self/mountinfo",
		"/proc/self/net/unix", "/proc/net/unix", "/proc/mounts", "/proc/locks",
		"/proc/cmdline", "/proc/self/cgroup", "/proc/thread-self/environ",
		"/proc/self/task", "/proc/self/maps",
	};
	char buf[64];
	DIR *dir;
	size_t i;
	int fd;

	fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
	if (fd < 0 || read(fd, buf, sizeof(buf)) <= 0)
		return 1;
	close(fd);
	fd = open("/proc/cpuinfo", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 2;
	close(fd);
	fd = open(parent_cmdline, O_RDONLY | O_CLOEXEC);
	if (fd >= 0 || errno != EACCES)
		return 3;
	/* What runtimes read of themselves stays readable... */
	dir = opendir("/proc/self/fd");
	if (dir == NULL)
		return 4;
	closedir(dir);
	/* ...what tells of the host does not, its own entries included. */
	for (i = 0; i < sizeof(host) / sizeof(host[0]); i++) {
		fd = open(host[i], O_RDONLY | O_CLOEXEC);
		if (fd >= 0 || errno != EACCES) {
			fprintf(stderr, "%s is readable\n", host[i]);
			return 10 + (int)i;
		}
	}
	return 0;
}

static int
child_shared_proc(void)
{
	int fd = open(parent_cmdline, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return 1;
	close(fd);
	return 0;
}

static void
test_landlock_private_proc(void **state)
{
	struct sandbox_policy p = cpu_policy();
	struct child c = { .stage = STAGE_LANDLOCK, .fn = child_private_proc, .policy = &p };

	if (landlock_abi <= 0) {
		print_message("[     SKIP ] no Landlock in this kernel\n");
		skip();
	}
	snprintf(parent_cmdline, sizeof(parent_cmdline), "/proc/%d/cmdline", (int)getpid());
	p.private_proc = true;
	assert_exited(run_child(&c, NULL), 0);
	p.private_proc = false;
	c.fn = child_shared_proc;
	assert_exited(run_child(&c, NULL), 0);
}

static int listen_port;

static int
child_tcp_connect(void)
{
	struct sockaddr_in sin;
	int fd;

	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return 1;
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_port = htons((uint16_t)listen_port);
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (connect(fd, (struct sockaddr *)&sin, sizeof(sin)) == 0)
		return 2;
	return errno == EACCES ? 0 : 3;
}

/* Landlock alone (no filter): TCP connect is denied from ABI 4 on. */
static void
test_landlock_tcp(void **state)
{
	struct child c = { .stage = STAGE_LANDLOCK, .fn = child_tcp_connect };
	struct sockaddr_in sin;
	socklen_t len = sizeof(sin);
	int fd;

	if (landlock_abi < 4) {
		print_message("[     SKIP ] Landlock ABI %d < 4: no TCP rules\n",
		    landlock_abi);
		skip();
	}
	/* A listener, so that without Landlock the connect would succeed. */
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(fd >= 0);
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	assert_int_equal(listen(fd, 1), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&sin, &len), 0);
	listen_port = ntohs(sin.sin_port);
	assert_exited(run_child(&c, NULL), 0);
	close(fd);
}

static int
child_signal_scope(void)
{
	if (kill(getppid(), 0) == 0 || errno != EPERM)
		return 1;
	return kill(getpid(), 0) == 0 ? 0 : 2;
}

/* Landlock alone: no signals out of the domain from ABI 6 on. */
static void
test_landlock_signal_scope(void **state)
{
	struct child c = { .stage = STAGE_LANDLOCK, .fn = child_signal_scope };

	if (landlock_abi < 6) {
		print_message("[     SKIP ] Landlock ABI %d < 6: no scoping\n",
		    landlock_abi);
		skip();
	}
	assert_exited(run_child(&c, NULL), 0);
}

/* ------------------------------------------------------------- rlimits */

static int
check_limit(int resource, rlim_t soft, rlim_t hard)
{
	struct rlimit rl;

	return getrlimit(resource, &rl) == 0 && rl.rlim_cur == soft &&
	    rl.rlim_max == hard;
}

static struct rlimit parent_as;

static int
child_rlimits_cpu(void)
{
	if (!check_limit(RLIMIT_CORE, 0, 0))
		return 1;
	if (!check_limit(RLIMIT_NOFILE, MAX_FILES, MAX_FILES))
		return 2;
	if (!check_limit(RLIMIT_FSIZE, MAX_FILE_BYTES, MAX_FILE_BYTES))
		return 3;
	if (!check_limit(RLIMIT_AS, MEMORY_BYTES, MEMORY_BYTES))
		return 4;
	if (!check_limit(RLIMIT_CPU, CPU_SECONDS, CPU_SECONDS + 1))
		return 5;
	if (!check_limit(RLIMIT_NPROC, 65536, 65536))
		return 6;
	if (prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) != 0)
		return 7;
	return 0;
}

static int
child_rlimits_gpu(void)
{
	/* Data, not address space: the CUDA driver reserves terabytes. */
	if (!check_limit(RLIMIT_DATA, MEMORY_BYTES, MEMORY_BYTES))
		return 1;
	if (!check_limit(RLIMIT_AS, parent_as.rlim_cur, parent_as.rlim_max))
		return 2;
	return 0;
}

static void
test_rlimits(void **state)
{
	struct sandbox_policy p = cpu_policy();
	struct child c = { .policy = &p, .stage = STAGE_RLIMITS };

	c.fn = child_rlimits_cpu;
	assert_exited(run_child(&c, NULL), 0);
	assert_int_equal(getrlimit(RLIMIT_AS, &parent_as), 0);
	p.gpu = true;
	c.fn = child_rlimits_gpu;
	assert_exited(run_child(&c, NULL), 0);
}

static int
child_memory(void)
{
	void *p;

	/* mmap directly: malloc could find a smaller arena to blame. */
	p = mmap(NULL, (size_t)MEMORY_BYTES, PROT_READ | PROT_WRITE,
	    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p != MAP_FAILED)
		return 1;
	if (errno != ENOMEM)
		return 2;
	return malloc((size_t)MEMORY_BYTES * 2) == NULL ? 0 : 3;
}

static void
test_memory_limit(void **state)
{
	assert_exited(run_simple(child_memory), 0);
}

static int
write_big_file(void)
{
	char path[sizeof(work_dir) + 16], buf[64 << 10];
	int64_t done = 0;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "%s/big", work_dir);
	fd = open(path, O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return 1;
	memset(buf, 'x', sizeof(buf));
	while (done < 2 * MAX_FILE_BYTES) {
		n = write(fd, buf, sizeof(buf));
		if (n < 0)
			return errno == EFBIG && done == MAX_FILE_BYTES ? 0 : 2;
		done += n;
	}
	return 3;
}

static int
child_file_size_ignored(void)
{
	signal(SIGXFSZ, SIG_IGN);
	return write_big_file();
}

static void
test_file_size_limit(void **state)
{
	/* By default the write past the limit is a SIGXFSZ ... */
	assert_killed(run_simple(write_big_file), SIGXFSZ);
	/* ... and EFBIG at exactly the limit when the signal is ignored. */
	assert_exited(run_simple(child_file_size_ignored), 0);
}

/* ------------------------------------------------------- fail closed */

static int refuse_rc;
static const struct sandbox_policy *refuse_policy;

static void
expect_refused(const struct sandbox_policy *p, int rc)
{
	struct sandbox_report report = { .seccomp = true, .landlock_abi = 99 };
	char *cause = NULL;
	int status;
	pid_t pid;

	refuse_policy = p;
	refuse_rc = rc;
	fflush(stdout);
	fflush(stderr);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		/* In a child, in case a refusal is not one. */
		if (sandbox_enter(refuse_policy, &report, &cause) != refuse_rc)
			_exit(1);
		if (cause == NULL || cause[0] == '\0')
			_exit(2);
		if (report.landlock_abi != 99)	/* ret_* untouched */
			_exit(3);
		if (sandbox_seccomp(refuse_policy, NULL) != refuse_rc)
			_exit(4);
		/* Nothing was applied: a socket can still be made. */
		if (socket(AF_INET, SOCK_STREAM, 0) < 0)
			_exit(5);
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_exited(status, 0);
}

static void
test_refused(void **state)
{
	const char *const forbidden[] = { "getpriority", "execve", NULL };
	const char *const ptrace_too[] = { "ptrace", NULL };
	const char *const relative[] = { "usr/bin/gcc", NULL };
	const char *const root[] = { "/usr/bin/gcc", "//", NULL };
	const char *const above_work[] = { test_dir, NULL };
	char below[sizeof(work_dir) + 8];
	const char *const below_work[] = { below, NULL };
	const char *const rw[] = { "/usr/bin", NULL };
	const char *const gcc_only[] = { "/usr/bin/gcc", NULL };
	const char *const empty[] = { NULL };
	struct sandbox_policy p;

	p = cpu_policy();
	p.work_dir = NULL;
	expect_refused(&p, -EINVAL);
	p = cpu_policy();
	p.work_dir = "relative/dir";
	expect_refused(&p, -EINVAL);
	p = cpu_policy();
	p.memory_bytes = 0;
	expect_refused(&p, -EINVAL);
	p = cpu_policy();
	p.extra_syscalls = forbidden;
	expect_refused(&p, -EPERM);
	p.extra_syscalls = ptrace_too;
	expect_refused(&p, -EPERM);
	expect_refused(NULL, -EINVAL);

	/* The compiler profile: a list exactly with the flag ... */
	p = cpu_policy();
	p.exec_paths = gcc_only;
	expect_refused(&p, -EINVAL);
	p = cpu_policy();
	p.allow_exec_compilers = true;
	expect_refused(&p, -EINVAL);
	p.exec_paths = empty;
	expect_refused(&p, -EINVAL);
	/* ... of absolute paths, never all of them ... */
	p.exec_paths = relative;
	expect_refused(&p, -EINVAL);
	p.exec_paths = root;
	expect_refused(&p, -EPERM);
	/* ... and nothing writable is executable ... */
	p.exec_paths = above_work;
	expect_refused(&p, -EPERM);
	snprintf(below, sizeof(below), "%s/bin", work_dir);
	p.exec_paths = below_work;
	expect_refused(&p, -EPERM);
	p = exec_policy();
	p.rw_paths = rw;
	p.exec_paths = gcc_only;
	expect_refused(&p, -EPERM);
	/* ... and the flag is no way to add exec by name. */
	p = exec_policy();
	p.extra_syscalls = forbidden;
	expect_refused(&p, -EPERM);
}

static int
child_unreachable(void)
{
	return 0;
}

/* A work directory that is not there makes Landlock's ruleset incomplete:
 * refused, never entered half-way. */
static void
test_missing_work_dir(void **state)
{
	struct sandbox_policy p = cpu_policy();
	struct child c = { .policy = &p, .stage = STAGE_ENTER,
	    .fn = child_unreachable };
	char missing[sizeof(test_dir) + 16];

	if (landlock_abi <= 0) {
		print_message("[     SKIP ] no Landlock in this kernel\n");
		skip();
	}
	snprintf(missing, sizeof(missing), "%s/missing", test_dir);
	p.work_dir = missing;
	assert_exited(run_child(&c, NULL), ENTER_FAILED);
}

/* ------------------------------------------------------------- tables */

static void
test_tables(void **state)
{
	const char *const *common = sandbox_common_syscalls();
	const char *const *gpu = sandbox_gpu_syscalls();
	const char *const *never = sandbox_never_syscalls();
	const char *const *a, *const *b;
	size_t n = 0;

	for (a = common; *a != NULL; a++, n++) {
		for (b = a + 1; *b != NULL; b++)
			assert_string_not_equal(*a, *b);
		for (b = gpu; *b != NULL; b++)
			assert_string_not_equal(*a, *b);
	}
	assert_true(n > 50);
	/*
	 * A name that no backend may add appears in the built-in lists only
	 * under an argument condition, which has a note.
	 */
	for (a = never; *a != NULL; a++) {
		for (b = common; *b != NULL; b++)
			if (strcmp(*a, *b) == 0)
				assert_non_null(sandbox_syscall_note(*a));
		for (b = gpu; *b != NULL; b++)
			if (strcmp(*a, *b) == 0)
				assert_non_null(sandbox_syscall_note(*a));
	}
	assert_non_null(sandbox_syscall_note("clone"));
	assert_non_null(sandbox_syscall_note("clone3"));
	assert_null(sandbox_syscall_note("read"));

	/* The compiler profile adds to the built-in lists, never repeats
	 * them, and leaves out what would undo another layer. */
	n = 0;
	for (a = sandbox_exec_syscalls(); *a != NULL; a++, n++) {
		for (b = a + 1; *b != NULL; b++)
			assert_string_not_equal(*a, *b);
		for (b = common; *b != NULL; b++)
			assert_string_not_equal(*a, *b);
		for (b = gpu; *b != NULL; b++)
			assert_string_not_equal(*a, *b);
		assert_string_not_equal(*a, "execveat");
		assert_string_not_equal(*a, "socket");
		assert_string_not_equal(*a, "ptrace");
		assert_string_not_equal(*a, "setsid");
		assert_string_not_equal(*a, "clone3");
		assert_string_not_equal(*a, "chmod");
	}
	assert_true(n >= 3);
	assert_non_null(sandbox_syscall_note("chmod"));
}

/* --------------------------------------------------------------- setup */

int
write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	if (f == NULL)
		return -1;
	fputs(text, f);
	return fclose(f) == 0 ? 0 : -1;
}

/* gcc -print-prog-name=PROG as a real path, or "" (run before any sandbox). */
static void
gcc_prog(const char *prog, char *dst, size_t len)
{
	char cmd[sizeof(gcc_path) + 64], out[PATH_MAX], path[PATH_MAX + 16];
	char real[PATH_MAX], *nl;
	FILE *f;

	dst[0] = '\0';
	snprintf(cmd, sizeof(cmd), "%s -print-prog-name=%.16s 2>/dev/null",
	    gcc_path, prog);
	if ((f = popen(cmd, "r")) == NULL)
		return;
	if (fgets(out, sizeof(out), f) != NULL) {
		if ((nl = strchr(out, '\n')) != NULL)
			*nl = '\0';
		/* as, ld: a bare name, found on the PATH */
		snprintf(path, sizeof(path), "%s%s", out[0] == '/' ? "" : "/usr/bin/",
		    out);
		if (access(path, X_OK) == 0 && realpath(path, real) != NULL &&
		    strlen(real) < len)
			memcpy(dst, real, strlen(real) + 1);
	}
	pclose(f);
}

static void
find_compiler(void)
{
	const char *drivers[] = { "/usr/bin/gcc", "/usr/bin/cc", NULL };
	int i;

	for (i = 0; drivers[i] != NULL; i++)
		if (access(drivers[i], X_OK) == 0) {
			snprintf(gcc_path, sizeof(gcc_path), "%s", drivers[i]);
			break;
		}
	if (gcc_path[0] == '\0')
		return;
	gcc_prog("cc1", cc1_path, sizeof(cc1_path));
	gcc_prog("as", as_path, sizeof(as_path));
	exec_list[0] = gcc_path;
	exec_list[1] = cc1_path;
	exec_list[2] = as_path;
	exec_list[3] = NULL;
}

static int
setup(void **state)
{
	char outside[sizeof(test_dir) + 16];
	int fd;

	if (mkdtemp(test_dir) == NULL)
		return -1;
	snprintf(work_dir, sizeof(work_dir), "%s/work", test_dir);
	snprintf(outside, sizeof(outside), "%s/outside", test_dir);
	snprintf(outside_file, sizeof(outside_file), "%s/secret", outside);
	if (mkdir(work_dir, 0700) != 0 || mkdir(outside, 0700) != 0)
		return -1;
	fd = open(outside_file, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
	if (fd < 0 || write(fd, "secret", 6) != 6)
		return -1;
	close(fd);
	snprintf(outside_c, sizeof(outside_c), "%s/secret.c", outside);
	snprintf(tiny_c, sizeof(tiny_c), "%s/tiny.c", work_dir);
	snprintf(tiny_o, sizeof(tiny_o), "%s/tiny.o", work_dir);
	snprintf(own_script, sizeof(own_script), "%s/own.sh", work_dir);
	if (write_file(outside_c, "int secret(void) { return 42; }\n") != 0)
		return -1;
	find_compiler();
	landlock_abi = sandbox_landlock_abi();
	if (landlock_abi < 0)
		landlock_abi = 0;
	print_message("Landlock ABI of this kernel: %d\n", landlock_abi);
	return 0;
}

static int
teardown(void **state)
{
	char path[sizeof(test_dir) + 32];

	snprintf(path, sizeof(path), "%s/work/big", test_dir);
	unlink(path);
	unlink(tiny_c);
	unlink(tiny_o);
	unlink(own_script);
	rmdir(work_dir);
	unlink(outside_file);
	unlink(outside_c);
	snprintf(path, sizeof(path), "%s/outside", test_dir);
	rmdir(path);
	rmdir(test_dir);
	unlink("/tmp/kgym-test-sandbox-escape");
	return 0;
}

/* The library's warnings, to the test's output. */
static void
test_log(enum sandbox_log_level level, const char *msg, void *arg)
{
	if (level >= SANDBOX_LOG_WARNING)
		fprintf(stderr, "sandbox: %s\n", msg);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_tables),
		cmocka_unit_test(test_allowed),
		cmocka_unit_test(test_system_reads),
		cmocka_unit_test(test_no_capabilities),
		cmocka_unit_test(test_wipe),
		cmocka_unit_test(test_soft_denials),
		cmocka_unit_test(test_signal_self),
		cmocka_unit_test(test_arch_prctl),
		cmocka_unit_test(test_socket_inet),
		cmocka_unit_test(test_socket_unix_cpu),
		cmocka_unit_test(test_execve),
		cmocka_unit_test(test_fork),
		cmocka_unit_test(test_posix_spawn),
		cmocka_unit_test(test_ptrace),
		cmocka_unit_test(test_process_vm_readv),
		cmocka_unit_test(test_kill_parent),
		cmocka_unit_test(test_setrlimit),
		cmocka_unit_test(test_tsync),
		cmocka_unit_test(test_extra_syscalls),
		cmocka_unit_test(test_gpu_policy),
		cmocka_unit_test(test_landlock_outside),
		cmocka_unit_test(test_landlock_private_proc),
		cmocka_unit_test(test_landlock_tcp),
		cmocka_unit_test(test_landlock_signal_scope),
		cmocka_unit_test(test_landlock_thread),
		cmocka_unit_test(test_rlimits),
		cmocka_unit_test(test_memory_limit),
		cmocka_unit_test(test_file_size_limit),
		cmocka_unit_test(test_refused),
		cmocka_unit_test(test_missing_work_dir),
		cmocka_unit_test(test_landlock_no_execute),
		cmocka_unit_test(test_exec_profile_off),
		cmocka_unit_test(test_exec_compiler),
		cmocka_unit_test(test_exec_unlisted),
		cmocka_unit_test(test_exec_profile_limits),
		cmocka_unit_test(test_exec_profile_needs_landlock),
	};

	sandbox_set_log(test_log, NULL);
	return cmocka_run_group_tests(tests, setup, teardown);
}
