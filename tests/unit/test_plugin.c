/*
 * test_plugin.c -- unit tests of the plugin loader (kgymd/plugin.c).
 *
 * Loads the test-only plugins of tests/plugins/ (bad_plugins.c, built as
 * bad_*.so, dup_selftest.so, dup_serves.so and old_toolkit.so, and
 * toolkit_selftest.so) with a stub host table and checks that each
 * is refused for its own reason, that unsafe files and directories are
 * refused before dlopen(), that duplicates are refused, that a good
 * plugin loads, is found, is described and is unloaded with fini(), and
 * that host->toolkit (plugin_toolkit) finds a toolkit's API or says why not.
 *
 * The plugins come from $KGYM_BUILDDIR/tests/plugins/.libs (default ../..,
 * the build root seen from tests/unit).  Each test copies what it needs into
 * a private temporary directory first, with the modes it wants, so that the
 * build tree's own permissions (umask) cannot change the outcome.
 */
#include "config.h"

#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "kgymd.h"

static char plugin_src[PATH_MAX];	/* where the built .so files are */
static char tmproot[PATH_MAX];		/* this run's private directory */
static int ntmp;

/* --- the stub host: records what the plugin did through it */

static int nlog_init, nlog_fini;
static const struct kgym_plugin_handle *log_self, *config_self;
static bool config_fail_init;

static void stub_log(const struct kgym_plugin_handle *self, enum kgym_log_level level,
    const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void
stub_log(const struct kgym_plugin_handle *self, enum kgym_log_level level,
    const char *fmt, ...)
{
	char buf[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	log_self = self;
	if (strcmp(buf, "init") == 0)
		nlog_init++;
	else if (strcmp(buf, "fini") == 0)
		nlog_fini++;
}

static const char *
stub_config_get(const struct kgym_plugin_handle *self, const char *key)
{
	config_self = self;
	if (config_fail_init && strcmp(key, "fail_init") == 0)
		return "yes";
	return NULL;
}

static const char *
stub_task_id(const struct kgym_task *task)
{
	return NULL;
}

static const json_t *
stub_task_payload(const struct kgym_task *task)
{
	return NULL;
}

static void
stub_task_set_data(struct kgym_task *task, void *data)
{
}

static void *
stub_task_get_data(const struct kgym_task *task)
{
	return NULL;
}

static int
stub_task_timer(struct kgym_task *task, unsigned int ms, void (*cb)(struct kgym_task *))
{
	return 0;
}

static int
stub_task_finish(struct kgym_task *task, json_t *result)
{
	json_decref(result);
	return 0;
}

static const struct kgym_host stub_host = {
	.abi_major = KGYM_PLUGIN_ABI_MAJOR,
	.abi_minor = KGYM_PLUGIN_ABI_MINOR,
	.struct_size = sizeof(struct kgym_host),
	.log = stub_log,
	.alloc = malloc,
	.free = free,
	.config_get = stub_config_get,
	.task_id = stub_task_id,
	.task_payload = stub_task_payload,
	.task_set_data = stub_task_set_data,
	.task_get_data = stub_task_get_data,
	.task_timer = stub_task_timer,
	.task_finish = stub_task_finish,
};

/* --- helpers */

static void fmt_path(char *buf, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* snprintf that fails the test rather than truncate a path. */
static void
fmt_path(char *buf, size_t len, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, len, fmt, ap);
	va_end(ap);
	assert_true(n >= 0 && (size_t)n < len);
}

/* A fresh directory under tmproot, with `mode`; its path in buf. */
static void
make_dir(char *buf, size_t len, mode_t mode)
{
	fmt_path(buf, len, "%s/d%d", tmproot, ntmp++);
	assert_int_equal(mkdir(buf, 0700), 0);
	assert_int_equal(chmod(buf, mode), 0);
}

/* Copy the built plugin `name`.so into dir with `mode`; its path in buf. */
static void
copy_plugin(const char *name, const char *dir, mode_t mode, char *buf, size_t len)
{
	char src[PATH_MAX + 64], data[65536];
	ssize_t n;
	int in, out;

	fmt_path(src, sizeof src, "%s/%s.so", plugin_src, name);
	fmt_path(buf, len, "%s/%s.so", dir, name);
	in = open(src, O_RDONLY);
	if (in == -1)
		fail_msg("cannot open %s (build it, or set KGYM_BUILDDIR): %s", src,
		    strerror(errno));
	out = open(buf, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	assert_true(out != -1);
	while ((n = read(in, data, sizeof data)) > 0)
		assert_int_equal(write(out, data, n), n);
	assert_int_equal(n, 0);
	close(in);
	close(out);
	assert_int_equal(chmod(buf, mode), 0);
}

static size_t
nloaded(void)
{
	const struct plugin *pl;
	size_t n = 0;

	TAILQ_FOREACH(pl, plugin_loaded(), entry)
		n++;
	return n;
}

static size_t
nrefused(void)
{
	const struct plugin_refusal *r;
	size_t n = 0;

	TAILQ_FOREACH(r, plugin_refused(), entry)
		n++;
	return n;
}

/*
 * Load `path`, expect refusal with `rc` and a cause containing `substr`,
 * and expect it recorded as the latest refusal.
 */
static void
expect_refused(const char *path, int rc, const char *substr)
{
	const struct plugin_refusal *r;
	size_t before = nrefused(), loaded = nloaded();
	char *cause = NULL;

	assert_int_equal(plugin_load(path, &stub_host, &cause), rc);
	assert_non_null(cause);
	if (strstr(cause, substr) == NULL)
		fail_msg("%s: cause \"%s\" lacks \"%s\"", path, cause, substr);
	assert_int_equal(nrefused(), before + 1);
	assert_int_equal(nloaded(), loaded);
	r = TAILQ_LAST(plugin_refused(), plugin_refusal_list);
	assert_string_equal(r->path, path);
	assert_string_equal(r->reason, cause);
	free(cause);
}

/* --- fixtures */

static int
setup(void **state)
{
	nlog_init = nlog_fini = 0;
	log_self = config_self = NULL;
	config_fail_init = false;
	return 0;
}

static int
teardown(void **state)
{
	plugin_unload_all();
	return 0;
}

/* --- tests */

static void
test_bad_plugins(void **state)
{
	static const struct {
		const char *name;
		int rc;
		const char *reason;
	} cases[] = {
		{ "bad_abi_major", -EPROTO, "built for ABI 99." },
		{ "bad_toolkit_api", -EINVAL, "toolkit plugin 'bad_toolkit_api' lacks operation "
		    "'toolkit_api'" },
		{ "bad_abi_minor", -EPROTO, "built for ABI 1.999, newer than kgymd's 1." },
		{ "bad_size", -EPROTO, "struct_size 8 is smaller than ABI 1.0's" },
		{ "bad_signature", -EPROTO, "build signature 'wrong' does not match" },
		{ "bad_missing_op", -EINVAL,
		    "workflow plugin 'bad_missing_op' lacks operation 'start'" },
		{ "bad_no_symbol", -ENOEXEC, "does not export kgym_plugin" },
		{ "bad_kind", -EINVAL, "plugin 'bad_kind' has unknown kind 42" },
	};
	char dir[PATH_MAX], path[PATH_MAX];
	size_t i;

	make_dir(dir, sizeof dir, 0755);
	for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		copy_plugin(cases[i].name, dir, 0644, path, sizeof path);
		expect_refused(path, cases[i].rc, cases[i].reason);
	}
	/* None of them got as far as init. */
	assert_int_equal(nlog_init, 0);
	assert_null(config_self);
}

static void
test_good_plugin(void **state)
{
	char dir[PATH_MAX], path[PATH_MAX];
	struct plugin *pl;
	char *cause = NULL;
	json_t *desc, *want;

	make_dir(dir, sizeof dir, 0755);
	copy_plugin("dup_selftest", dir, 0755, path, sizeof path);
	assert_int_equal(plugin_load(path, &stub_host, &cause), 0);
	assert_null(cause);
	assert_int_equal(nloaded(), 1);
	assert_int_equal(nrefused(), 0);

	pl = plugin_find("selftest");
	assert_non_null(pl);
	assert_true(pl->initialised);
	assert_string_equal(pl->path, path);
	assert_true(pl->size >= offsetof(struct kgym_plugin, run));
	assert_ptr_equal(plugin_find_workflow("selftest_dup"), pl);
	assert_null(plugin_find_workflow("selftest"));
	assert_null(plugin_find_backend("selftest_dup"));
	assert_null(plugin_find("nope"));

	/* init saw the handle that maps back to this record. */
	assert_int_equal(nlog_init, 1);
	assert_ptr_equal(config_self, plugin_handle(pl));
	assert_ptr_equal(log_self, plugin_handle(pl));
	assert_ptr_equal(plugin_from_handle(plugin_handle(pl)), pl);

	desc = plugin_describe();
	assert_non_null(desc);
	want = json_pack("[{s:s, s:s, s:s, s:[s], s:s}]", "name", "selftest",
	    "kind", "workflow", "version", "0.1.0", "serves", "selftest_dup",
	    "path", path);
	assert_non_null(want);
	if (!json_equal(desc, want))
		fail_msg("plugin_describe: %s", json_dumps(desc, JSON_COMPACT));
	json_decref(want);
	json_decref(desc);

	plugin_unload_all();
	assert_int_equal(nlog_fini, 1);
	assert_int_equal(nloaded(), 0);
	assert_null(plugin_find("selftest"));
	desc = plugin_describe();
	assert_int_equal(json_array_size(desc), 0);
	json_decref(desc);
}

static void
test_duplicate_name(void **state)
{
	char dir1[PATH_MAX], dir2[PATH_MAX], path1[PATH_MAX], path2[PATH_MAX];
	char want[2 * PATH_MAX];

	make_dir(dir1, sizeof dir1, 0755);
	make_dir(dir2, sizeof dir2, 0755);
	copy_plugin("dup_selftest", dir1, 0644, path1, sizeof path1);
	copy_plugin("dup_selftest", dir2, 0644, path2, sizeof path2);
	assert_int_equal(plugin_load(path1, &stub_host, NULL), 0);
	fmt_path(want, sizeof want,
	    "duplicate plugin name 'selftest' (already loaded from %s)", path1);
	expect_refused(path2, -EEXIST, want);
	/* The same file again is a duplicate too, and does not unload the first. */
	expect_refused(path1, -EEXIST, "duplicate plugin name 'selftest'");
	assert_int_equal(nloaded(), 1);
	assert_int_equal(nlog_init, 1);
	assert_string_equal(plugin_find("selftest")->path, path1);
}

/* Two plugins of one kind may not serve the same name. */
static void
test_duplicate_serves(void **state)
{
	char dir[PATH_MAX], path1[PATH_MAX], path2[PATH_MAX], want[2 * PATH_MAX];

	make_dir(dir, sizeof dir, 0755);
	copy_plugin("dup_selftest", dir, 0644, path1, sizeof path1);
	copy_plugin("dup_serves", dir, 0644, path2, sizeof path2);
	assert_int_equal(plugin_load(path1, &stub_host, NULL), 0);
	fmt_path(want, sizeof want, "workflow 'selftest_dup' of plugin 'dup_serves' is "
	    "already served by plugin 'selftest' (loaded from %s)", path1);
	expect_refused(path2, -EEXIST, want);
	assert_null(plugin_find("dup_serves"));
	assert_string_equal(plugin_find_workflow("selftest_dup")->path, path1);
	/* Unloaded, the name is free again. */
	plugin_unload_all();
	assert_int_equal(plugin_load(path2, &stub_host, NULL), 0);
	assert_string_equal(plugin_find_workflow("selftest_dup")->path, path2);
}

static void
test_writable_file(void **state)
{
	char dir[PATH_MAX], path[PATH_MAX], want[PATH_MAX + 64];

	make_dir(dir, sizeof dir, 0755);
	copy_plugin("dup_selftest", dir, 0664, path, sizeof path);
	fmt_path(want, sizeof want, "refused: %s is writable by group or others (mode 0664)",
	    path);
	expect_refused(path, -EPERM, want);
	assert_int_equal(chmod(path, 0646), 0);
	expect_refused(path, -EPERM, "writable by group or others (mode 0646)");
	/* Refused before dlopen(): init never ran. */
	assert_int_equal(nlog_init, 0);
	/* Once safe, the same file loads. */
	assert_int_equal(chmod(path, 0644), 0);
	assert_int_equal(plugin_load(path, &stub_host, NULL), 0);
}

static void
test_writable_dir(void **state)
{
	char dir[PATH_MAX], path[PATH_MAX];

	make_dir(dir, sizeof dir, 0755);
	copy_plugin("dup_selftest", dir, 0644, path, sizeof path);
	assert_int_equal(chmod(dir, 0777), 0);
	expect_refused(path, -EPERM, "is writable by group or others without the sticky bit");
	assert_int_equal(chmod(dir, 0775), 0);
	expect_refused(path, -EPERM, "(mode 0775)");
	/* Sticky, like /tmp: others cannot replace our file. */
	assert_int_equal(chmod(dir, 01777), 0);
	assert_int_equal(plugin_load(path, &stub_host, NULL), 0);
	assert_int_equal(nlog_init, 1);
}

static void
test_foreign_owner(void **state)
{
	char dir[PATH_MAX], path[PATH_MAX];

	if (geteuid() != 0)
		skip();		/* only root can give a file away */
	make_dir(dir, sizeof dir, 0755);
	copy_plugin("dup_selftest", dir, 0644, path, sizeof path);
	assert_int_equal(chown(path, 65534, 65534), 0);
	expect_refused(path, -EPERM, "is owned by uid 65534, not by root or kgymd");
	assert_int_equal(chown(path, 0, 0), 0);
	assert_int_equal(chown(dir, 65534, 65534), 0);
	expect_refused(path, -EPERM, "is owned by uid 65534");
	assert_int_equal(chown(dir, 0, 0), 0);
	assert_int_equal(plugin_load(path, &stub_host, NULL), 0);
}

static void
test_not_a_plugin(void **state)
{
	char dir[PATH_MAX], path[PATH_MAX + 16];
	int fd;

	make_dir(dir, sizeof dir, 0755);
	fmt_path(path, sizeof path, "%s/missing.so", dir);
	expect_refused(path, -ENOENT, "No such file");
	fmt_path(path, sizeof path, "%s/subdir.so", dir);
	assert_int_equal(mkdir(path, 0755), 0);
	expect_refused(path, -EINVAL, "is not a regular file");
	/* Not an ELF object: dlopen() fails and its message is the reason. */
	fmt_path(path, sizeof path, "%s/junk.so", dir);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	assert_true(fd != -1);
	assert_int_equal(write(fd, "not a shared object\n", 20), 20);
	close(fd);
	expect_refused(path, -ENOEXEC, "junk.so");
}

static void
test_init_fails(void **state)
{
	char dir[PATH_MAX], path[PATH_MAX];

	make_dir(dir, sizeof dir, 0755);
	copy_plugin("dup_selftest", dir, 0644, path, sizeof path);
	config_fail_init = true;
	expect_refused(path, -EINVAL,
	    "plugin 'selftest' failed to initialise: fail_init is set");
	assert_non_null(config_self);	/* init ran */
	plugin_unload_all();
	assert_int_equal(nlog_fini, 0);	/* and fini did not, for a refused plugin */
	/* Nothing of it stayed behind: with init fixed it loads. */
	config_fail_init = false;
	assert_int_equal(plugin_load(path, &stub_host, NULL), 0);
}

static void
test_load_all(void **state)
{
	static const char *const bad[] = {
		/* in the order the loader must meet them: alphasort */
		"bad_abi_major", "bad_abi_minor", "bad_kind", "bad_missing_op",
		"bad_no_symbol", "bad_signature", "bad_size",
	};
	char dira[PATH_MAX], dirb[PATH_MAX], path[PATH_MAX], good[PATH_MAX];
	char dirs[4 * PATH_MAX], other[PATH_MAX + 16];
	const struct plugin_refusal *r;
	size_t i;
	int fd;

	make_dir(dira, sizeof dira, 0755);
	make_dir(dirb, sizeof dirb, 0755);
	/* Copied in reverse, so directory order is not already sorted. */
	for (i = sizeof bad / sizeof bad[0]; i-- > 0;)
		copy_plugin(bad[i], dira, 0644, path, sizeof path);
	copy_plugin("dup_selftest", dira, 0644, good, sizeof good);
	copy_plugin("dup_selftest", dirb, 0644, path, sizeof path);
	/* Neither of these is "*.so": a loader that tried them would refuse them. */
	fmt_path(other, sizeof other, "%s/README", dira);
	assert_true((fd = open(other, O_WRONLY | O_CREAT, 0644)) != -1);
	close(fd);
	fmt_path(other, sizeof other, "%s/.hidden.so", dira);
	assert_true((fd = open(other, O_WRONLY | O_CREAT, 0644)) != -1);
	close(fd);

	/* Empty entries and a missing directory are skipped. */
	fmt_path(dirs, sizeof dirs, ":%s::%s/does-not-exist:%s:", dira, tmproot, dirb);
	plugin_load_all(dirs, &stub_host);

	assert_int_equal(nloaded(), 1);
	assert_string_equal(TAILQ_FIRST(plugin_loaded())->path, good);
	assert_int_equal(nrefused(), sizeof bad / sizeof bad[0] + 1);
	r = TAILQ_FIRST(plugin_refused());
	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		fmt_path(other, sizeof other, "%s/%s.so", dira, bad[i]);
		assert_string_equal(r->path, other);
		r = TAILQ_NEXT(r, entry);
	}
	assert_string_equal(r->path, path);
	assert_non_null(strstr(r->reason, "duplicate plugin name 'selftest'"));

	plugin_unload_all();
	assert_int_equal(nloaded(), 0);
	assert_int_equal(nrefused(), 0);
	assert_int_equal(nlog_fini, 1);

	/* Nothing at all to load is not an error either. */
	plugin_load_all("", &stub_host);
	plugin_load_all(NULL, &stub_host);
	assert_int_equal(nloaded() + nrefused(), 0);
}

/* host->toolkit: found, too old, missing, listed but not given, too small. */
static void
test_toolkit_lookup(void **state)
{
	struct selftest_api {
		struct kgym_toolkit_api head;
		int (*add)(int a, int b);
	};
	const struct selftest_api *api;
	const struct kgym_toolkit_api *head;
	char dir[PATH_MAX], path[PATH_MAX];
	char *cause = NULL;

	/* Nothing loaded: missing, and the cause names the API. */
	assert_null(plugin_toolkit("selftest_api", 1, &cause));
	assert_non_null(cause);
	assert_non_null(strstr(cause, "no toolkit serves the 'selftest_api' API"));
	free(cause);
	cause = NULL;

	make_dir(dir, sizeof dir, 0755);
	copy_plugin("toolkit_selftest", dir, 0755, path, sizeof path);
	assert_int_equal(plugin_load(path, &stub_host, &cause), 0);
	assert_null(cause);

	/* Found, at any version up to its own; the head protects the rest. */
	head = plugin_toolkit("selftest_api", 3, &cause);
	assert_non_null(head);
	assert_null(cause);
	assert_int_equal(head->version, 3);
	api = (const struct selftest_api *)(const void *)head;
	assert_true(KGYM_TOOLKIT_HAS(api, add));
	assert_int_equal(api->add(2, 3), 5);
	assert_ptr_equal(plugin_toolkit("selftest_api", 0, NULL), head);

	/* Too old for the caller: refused, saying both versions. */
	assert_null(plugin_toolkit("selftest_api", 4, &cause));
	assert_non_null(cause);
	if (strstr(cause, "at version 3; version 4 or later is needed") == NULL)
		fail_msg("cause: %s", cause);
	free(cause);
	cause = NULL;

	/* Listed in serves, but no struct behind it; and a struct too small. */
	assert_null(plugin_toolkit("selftest_none", 1, &cause));
	assert_non_null(strstr(cause, "lists the 'selftest_none' API but gives none"));
	free(cause);
	cause = NULL;
	assert_null(plugin_toolkit("selftest_small", 1, &cause));
	assert_non_null(strstr(cause, "smaller than its head"));
	free(cause);
	cause = NULL;

	/* Missing, with the toolkit loaded; and a NULL ret_cause is allowed. */
	assert_null(plugin_toolkit("nosuch", 1, &cause));
	assert_non_null(strstr(cause, "'nosuch'"));
	free(cause);
	cause = NULL;
	assert_null(plugin_toolkit("nosuch", 1, NULL));

	/* A toolkit is no backend or workflow. */
	assert_null(plugin_find_backend("selftest_api"));
	assert_null(plugin_find_workflow("selftest_api"));

	/* A toolkit built for ABI 1.2 still loads, and offers nothing. */
	copy_plugin("old_toolkit", dir, 0755, path, sizeof path);
	if (plugin_load(path, &stub_host, &cause) != 0)
		fail_msg("old_toolkit refused: %s", cause);
	assert_null(cause);
	assert_null(plugin_toolkit("old_api", 0, &cause));
	assert_non_null(strstr(cause, "toolkit 'old_toolkit' lists the 'old_api' API but gives none"));
	free(cause);
}

static void
test_kind_names(void **state)
{
	assert_string_equal(plugin_kind_name(KGYM_PLUGIN_BACKEND), "backend");
	assert_string_equal(plugin_kind_name(KGYM_PLUGIN_TOOLKIT), "toolkit");
	assert_string_equal(plugin_kind_name(KGYM_PLUGIN_WORKFLOW), "workflow");
	assert_string_equal(plugin_kind_name((enum kgym_plugin_kind)42), "unknown");
}

static int
rm_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	return remove(path);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_bad_plugins, setup, teardown),
		cmocka_unit_test_setup_teardown(test_good_plugin, setup, teardown),
		cmocka_unit_test_setup_teardown(test_duplicate_name, setup, teardown),
		cmocka_unit_test_setup_teardown(test_duplicate_serves, setup, teardown),
		cmocka_unit_test_setup_teardown(test_writable_file, setup, teardown),
		cmocka_unit_test_setup_teardown(test_writable_dir, setup, teardown),
		cmocka_unit_test_setup_teardown(test_foreign_owner, setup, teardown),
		cmocka_unit_test_setup_teardown(test_not_a_plugin, setup, teardown),
		cmocka_unit_test_setup_teardown(test_init_fails, setup, teardown),
		cmocka_unit_test_setup_teardown(test_load_all, setup, teardown),
		cmocka_unit_test_setup_teardown(test_toolkit_lookup, setup, teardown),
		cmocka_unit_test(test_kind_names),
	};
	const char *builddir = getenv("KGYM_BUILDDIR");
	const char *tmp = getenv("TMPDIR");
	int failed, n;

	n = snprintf(plugin_src, sizeof plugin_src, "%s/tests/plugins/.libs",
	    builddir != NULL ? builddir : "../..");
	if (n < 0 || (size_t)n >= sizeof plugin_src)
		return 1;
	n = snprintf(tmproot, sizeof tmproot, "%s/kgym-test-plugin.XXXXXX",
	    tmp != NULL ? tmp : "/tmp");
	if (n < 0 || (size_t)n >= sizeof tmproot)
		return 1;
	if (mkdtemp(tmproot) == NULL) {
		perror(tmproot);
		return 1;
	}
	/* Refusals are logged by design; keep them out of the test output. */
	log_init(KGYM_LOG_ERROR, true);
	failed = cmocka_run_group_tests(tests, NULL, NULL);
	nftw(tmproot, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	return failed;
}
