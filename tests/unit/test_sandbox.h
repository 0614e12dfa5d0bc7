/*
 * test_sandbox.h -- what the sandbox library's unit tests share: the test
 * directory, the compiler profile's programs, and the fork-and-watch
 * helpers (test_sandbox.c), used by test_sandbox_exec.c's cases of the
 * compiler profile.  One test program; the split only keeps files short.
 */
#ifndef KGYM_TEST_SANDBOX_H
#define KGYM_TEST_SANDBOX_H

#include <stddef.h>

#include "kgym/sandbox.h"

#define MEMORY_BYTES	(512LL << 20)
#define MAX_FILE_BYTES	(1LL << 20)
#define MAX_FILES	64
#define CPU_SECONDS	60
#define ENTER_FAILED	100	/* the child could not enter the sandbox */

#define TEST_DIR_TEMPLATE	"/tmp/kgym-test-sandbox.XXXXXX"

extern char test_dir[sizeof(TEST_DIR_TEMPLATE)];
extern char work_dir[sizeof(TEST_DIR_TEMPLATE) + 16];
extern char outside_file[sizeof(TEST_DIR_TEMPLATE) + 32];
extern char outside_c[sizeof(TEST_DIR_TEMPLATE) + 32];	/* valid C, unreadable inside */
extern char tiny_c[sizeof(TEST_DIR_TEMPLATE) + 32];	/* valid C in the work directory */
extern char tiny_o[sizeof(TEST_DIR_TEMPLATE) + 32];
extern char own_script[sizeof(TEST_DIR_TEMPLATE) + 32];	/* executable, written by us */
extern int landlock_abi;	/* the kernel's, 0 when it has none */

/* The compiler profile's programs: gcc's driver, cc1, as ("" if absent). */
extern char gcc_path[4096], cc1_path[4096], as_path[4096];
extern const char *exec_list[4];

extern char **environ;

enum stage {
	STAGE_ENTER,		/* sandbox_enter(): all of it */
	STAGE_RLIMITS,		/* sandbox_rlimits() alone */
	STAGE_LANDLOCK,		/* sandbox_landlock() alone */
};

struct child {
	const struct sandbox_policy *policy;	/* NULL: the default one */
	enum stage stage;
	void (*before)(void);			/* runs before the sandbox */
	int (*fn)(void);			/* runs inside; its return = exit code */
};

/* A CPU worker's policy; the same under the compiler profile, gcc listed. */
struct sandbox_policy cpu_policy(void);
struct sandbox_policy exec_policy(void);
/*
 * Fork, sandbox the child at c->stage, run c->fn there; return the child's
 * wait status (*ret_report: the child's report, STAGE_ENTER only).
 */
int	run_child(const struct child *c, struct sandbox_report *ret_report);
void	assert_exited(int status, int code);
void	assert_killed(int status, int sig);
int	write_file(const char *path, const char *text);
/* The whole sandbox, the default policy. */
int	run_simple(int (*fn)(void));
/* Children that must be killed under either profile (or, fork, not). */
int	child_fork(void);
int	child_posix_spawn(void);
int	child_process_vm_readv(void);
int	child_ptrace(void);
int	child_socket_inet(void);
int	child_socket_unix(void);

/* test_sandbox_exec.c: the compiler profile. */
void	test_landlock_no_execute(void **state);
void	test_exec_profile_off(void **state);
void	test_exec_compiler(void **state);
void	test_exec_unlisted(void **state);
void	test_exec_profile_limits(void **state);
void	test_exec_profile_needs_landlock(void **state);

/* test_sandbox_thread.c: one thread narrowed (sandbox_landlock_thread()). */
void	test_landlock_thread(void **state);

#endif /* KGYM_TEST_SANDBOX_H */
