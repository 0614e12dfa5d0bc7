/*
 * test_config.c -- unit tests of config.c (cmocka).
 *
 * Each test writes a small kgymd.conf into a private temporary directory
 * and loads it.  Error tests compare the whole "file:line: reason" text, so
 * both the line number and the key name in it are checked.  The last group
 * keeps the documentation true: the shipped etc/kgymd.conf must list every
 * key of config.c's table with its default and load to the defaults, and
 * kgymd.conf(5) must describe every key.  The source tree is found through
 * KGYM_SRCDIR (set by make check), else "../..".
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "kgymd.h"

static char test_dir[] = "/tmp/kgym-test-config.XXXXXX";
static int test_file_serial;

/* ------------------------------------------------------------- helpers */

static char *
xstrdup_printf(const char *fmt, ...)
{
	va_list ap;
	char *s;
	int rc;

	va_start(ap, fmt);
	rc = vasprintf(&s, fmt, ap);
	va_end(ap);
	assert_true(rc >= 0);
	return s;
}

/* A fresh file holding `text`; the caller unlinks and frees the path. */
static char *
write_conf(const char *text)
{
	char *path;
	FILE *fp;

	path = xstrdup_printf("%s/kgymd-%d.conf", test_dir, test_file_serial++);
	fp = fopen(path, "w");
	assert_non_null(fp);
	assert_int_equal(fputs(text, fp) >= 0, 1);
	assert_int_equal(fclose(fp), 0);
	return path;
}

static void
remove_conf(char *path)
{
	unlink(path);
	free(path);
}

static char *
read_text(const char *path)
{
	char *text;
	long len;
	FILE *fp;

	fp = fopen(path, "r");
	if (fp == NULL)
		fail_msg("cannot open %s: %s", path, strerror(errno));
	assert_int_equal(fseek(fp, 0, SEEK_END), 0);
	len = ftell(fp);
	assert_true(len >= 0);
	rewind(fp);
	text = calloc(1, (size_t)len + 1);
	assert_non_null(text);
	assert_int_equal(fread(text, 1, (size_t)len, fp), (size_t)len);
	fclose(fp);
	return text;
}

static char *
srcdir_path(const char *rel)
{
	const char *srcdir = getenv("KGYM_SRCDIR");

	return xstrdup_printf("%s/%s", srcdir != NULL ? srcdir : "../..", rel);
}

static struct config *
load_ok(const char *text)
{
	struct config *config = NULL;
	char *path, *cause = NULL;
	int rc;

	path = write_conf(text);
	rc = config_load(path, &config, &cause);
	if (rc != 0)
		fail_msg("config_load failed (%d): %s", rc, cause ? cause : "?");
	assert_non_null(config);
	assert_string_equal(config->path, path);
	remove_conf(path);
	return config;
}

/*
 * Loading `text` must fail with -EINVAL and exactly "PATH" + `expect`,
 * where expect is ":LINE: reason".
 */
static void
expect_error(const char *text, const char *expect)
{
	struct config *config = (struct config *)(uintptr_t)0x1;
	char *path, *cause = NULL, *want;
	int rc;

	path = write_conf(text);
	rc = config_load(path, &config, &cause);
	want = xstrdup_printf("%s%s", path, expect);
	if (rc != -EINVAL || cause == NULL || strcmp(cause, want) != 0)
		fail_msg("for config\n%s\nwant %d \"%s\"\n got %d \"%s\"", text,
		    -EINVAL, want, rc, cause ? cause : "(null)");
	/* Out-parameters are written only on success. */
	assert_ptr_equal(config, (struct config *)(uintptr_t)0x1);
	free(want);
	free(cause);
	remove_conf(path);
}

/*
 * Every field of struct config but path; plugin_dir and the plugin
 * sections only when asked.
 */
static void
assert_config_equal(const struct config *a, const struct config *b,
    bool with_plugin_dir, bool with_plugins)
{
	size_t i, j;

	assert_string_equal(a->socket, b->socket);
	assert_int_equal(a->socket_mode, b->socket_mode);
	assert_string_equal(a->state_dir, b->state_dir);
	if (with_plugin_dir)
		assert_string_equal(a->plugin_dir, b->plugin_dir);
	assert_int_equal(a->gpus_all, b->gpus_all);
	assert_int_equal(a->ngpus, b->ngpus);
	for (i = 0; i < a->ngpus; i++)
		assert_int_equal(a->gpus[i], b->gpus[i]);
	assert_int_equal(a->workers_per_gpu, b->workers_per_gpu);
	assert_int_equal(a->max_running_tasks, b->max_running_tasks);
	assert_int_equal(a->max_queued_tasks, b->max_queued_tasks);
	assert_int_equal(a->max_request_bytes, b->max_request_bytes);
	assert_int_equal(a->max_input_bytes, b->max_input_bytes);
	assert_int_equal(a->max_connections, b->max_connections);
	assert_int_equal(a->admin_connections, b->admin_connections);
	assert_int_equal(a->idle_timeout_s, b->idle_timeout_s);
	assert_int_equal(a->max_batch_tasks, b->max_batch_tasks);
	assert_int_equal(a->max_attempts, b->max_attempts);
	assert_int_equal(a->result_ttl_s, b->result_ttl_s);
	assert_true(a->default_timeout_s == b->default_timeout_s);
	assert_true(a->max_timeout_s == b->max_timeout_s);
	assert_int_equal(a->log_level, b->log_level);
	assert_int_equal(a->store_sync_full, b->store_sync_full);
	assert_int_equal(a->nallow_uids, b->nallow_uids);
	for (i = 0; i < a->nallow_uids; i++)
		assert_int_equal(a->allow_uids[i], b->allow_uids[i]);
	assert_int_equal(a->nallow_gids, b->nallow_gids);
	for (i = 0; i < a->nallow_gids; i++)
		assert_int_equal(a->allow_gids[i], b->allow_gids[i]);
	assert_int_equal(a->nadmin_uids, b->nadmin_uids);
	for (i = 0; i < a->nadmin_uids; i++)
		assert_int_equal(a->admin_uids[i], b->admin_uids[i]);
	assert_int_equal(a->ngateway_uids, b->ngateway_uids);
	for (i = 0; i < a->ngateway_uids; i++)
		assert_int_equal(a->gateway_uids[i], b->gateway_uids[i]);
	assert_int_equal(a->sandbox_enabled, b->sandbox_enabled);
	assert_int_equal(a->job_memory_bytes, b->job_memory_bytes);
	assert_int_equal(a->job_max_files, b->job_max_files);
	assert_int_equal(a->job_max_processes, b->job_max_processes);
	assert_int_equal(a->job_max_file_bytes, b->job_max_file_bytes);
	if (!with_plugins)
		return;
	assert_int_equal(a->nplugins, b->nplugins);
	for (i = 0; i < a->nplugins; i++) {
		assert_string_equal(a->plugins[i].name, b->plugins[i].name);
		assert_int_equal(a->plugins[i].nkv, b->plugins[i].nkv);
		for (j = 0; j < a->plugins[i].nkv; j++) {
			assert_string_equal(a->plugins[i].kv[j].key,
			    b->plugins[i].kv[j].key);
			assert_string_equal(a->plugins[i].kv[j].value,
			    b->plugins[i].kv[j].value);
		}
	}
}

/* A uid that is neither root nor ours, offset by `k`. */
static uid_t
stranger_uid(unsigned int k)
{
	uid_t uid = 40000 + k;

	if (uid == geteuid())
		uid += 1000;
	return uid;
}

/* ------------------------------------------------------------- fixtures */

static int
setup_dir(void **state)
{
	(void)state;
	if (mkdtemp(test_dir) == NULL)
		return -1;
	log_init(KGYM_LOG_INFO, true);
	return 0;
}

/* Files a failed test left behind go too. */
static int
teardown_dir(void **state)
{
	struct dirent *de;
	char *path;
	DIR *dir;

	(void)state;
	if ((dir = opendir(test_dir)) != NULL) {
		while ((de = readdir(dir)) != NULL) {
			if (de->d_name[0] == '.')
				continue;
			path = xstrdup_printf("%s/%s", test_dir, de->d_name);
			unlink(path);
			free(path);
		}
		closedir(dir);
	}
	return rmdir(test_dir);
}

/* ---------------------------------------------------------------- tests */

static void
test_defaults(void **state)
{
	struct config *def, *empty;

	(void)state;
	def = config_defaults();
	assert_non_null(def);
	assert_string_equal(def->path, "(defaults)");
	assert_string_equal(def->socket, "/run/kgym/kgymd.sock");
	assert_int_equal(def->socket_mode, 0660);
	assert_string_equal(def->state_dir, "/var/lib/kgym");
	assert_string_equal(def->plugin_dir, KGYM_PLUGINDIR);
	assert_true(def->gpus_all);
	assert_int_equal(def->ngpus, 0);
	assert_int_equal(def->workers_per_gpu, CONFIG_AUTO);
	assert_int_equal(def->cpu_workers, CONFIG_AUTO);
	assert_int_equal(def->max_running_tasks, 256);
	assert_int_equal(def->max_queued_tasks, 1000000);
	assert_int_equal(def->max_request_bytes, 4194304);
	assert_int_equal(def->max_input_bytes, 67108864);
	assert_int_equal(def->max_connections, 1024);
	assert_int_equal(def->admin_connections, 8);
	assert_int_equal(def->idle_timeout_s, 300);
	assert_int_equal(def->max_batch_tasks, 10000);
	assert_int_equal(def->max_attempts, 3);
	assert_int_equal(def->result_ttl_s, 7 * 86400);
	assert_true(def->default_timeout_s == 600.0);
	assert_true(def->max_timeout_s == 3600.0);
	assert_int_equal(def->log_level, KGYM_LOG_INFO);
	assert_false(def->store_sync_full);
	assert_int_equal(def->nallow_uids, 0);
	assert_int_equal(def->nallow_gids, 0);
	assert_int_equal(def->nadmin_uids, 0);
	assert_true(def->sandbox_enabled);
	assert_int_equal(def->job_memory_bytes, INT64_C(64) << 30);
	assert_int_equal(def->job_max_files, 256);
	assert_int_equal(def->job_max_processes, 64);
	assert_int_equal(def->job_max_file_bytes, INT64_C(1) << 30);
	assert_int_equal(def->nplugins, 0);

	/* An empty file, and one with empty sections, give the defaults. */
	empty = load_ok("");
	assert_config_equal(empty, def, true, true);
	config_free(empty);
	empty = load_ok("; nothing\n[kgymd]\n\n[sandbox]\n# nothing\n");
	assert_config_equal(empty, def, true, true);
	config_free(empty);
	config_free(def);
	config_free(NULL);
}

static void
test_every_key(void **state)
{
	struct config *c;

	(void)state;
	c = load_ok(
	    "[kgymd]\n"
	    "socket = /tmp/k.sock\n"
	    "socket_mode = 0600\n"
	    "state_dir = /srv/kgym\n"
	    "plugin_dir = /opt/a:/opt/b\n"
	    "gpus = 3,1\n"
	    "workers_per_gpu = 4\n"
	    "max_running_tasks = 7\n"
	    "max_queued_tasks = 99\n"
	    "max_request_bytes = 2048\n"
	    "max_connections = 5\n"
	    "max_batch_tasks = 6\n"
	    "max_attempts = 9\n"
	    "result_ttl = 90m\n"
	    "default_timeout = 2.5\n"
	    "max_timeout = 1h\n"
	    "log_level = debug\n"
	    "store_sync = full\n"
	    "allow_uids = 1001, 1002\n"
	    "allow_gids = 2001\n"
	    "admin_uids = 1003\n"
	    "[sandbox]\n"
	    "enabled = no\n"
	    "job_memory = 128M\n"
	    "job_max_files = 32\n"
	    "job_max_processes = 8\n"
	    "job_max_file_size = 2M\n");
	assert_string_equal(c->socket, "/tmp/k.sock");
	assert_int_equal(c->socket_mode, 0600);
	assert_string_equal(c->state_dir, "/srv/kgym");
	assert_string_equal(c->plugin_dir, "/opt/a:/opt/b");
	assert_false(c->gpus_all);
	assert_int_equal(c->ngpus, 2);
	assert_int_equal(c->gpus[0], 3);
	assert_int_equal(c->gpus[1], 1);
	assert_int_equal(c->workers_per_gpu, 4);
	assert_int_equal(c->max_running_tasks, 7);
	assert_int_equal(c->max_queued_tasks, 99);
	assert_int_equal(c->max_request_bytes, 2048);
	assert_int_equal(c->max_connections, 5);
	assert_int_equal(c->max_batch_tasks, 6);
	assert_int_equal(c->max_attempts, 9);
	assert_int_equal(c->result_ttl_s, 5400);
	assert_true(c->default_timeout_s == 2.5);
	assert_true(c->max_timeout_s == 3600.0);
	assert_int_equal(c->log_level, KGYM_LOG_DEBUG);
	assert_true(c->store_sync_full);
	assert_int_equal(c->nallow_uids, 2);
	assert_int_equal(c->allow_uids[0], 1001);
	assert_int_equal(c->allow_uids[1], 1002);
	assert_int_equal(c->nallow_gids, 1);
	assert_int_equal(c->allow_gids[0], 2001);
	assert_int_equal(c->nadmin_uids, 1);
	assert_int_equal(c->admin_uids[0], 1003);
	assert_false(c->sandbox_enabled);
	assert_int_equal(c->job_memory_bytes, 128 << 20);
	assert_int_equal(c->job_max_files, 32);
	assert_int_equal(c->job_max_processes, 8);
	assert_int_equal(c->job_max_file_bytes, 2 << 20);
	config_free(c);
}

/* workers_per_gpu = auto and cpu_workers = auto: the rule of kgymd.conf(5). */
static void
test_auto_workers(void **state)
{
	const uint64_t gib = 1ULL << 30;
	struct config *c;

	(void)state;
	/* A GPU worker per 4 CPUs of the GPU's share, 1 to 4. */
	assert_int_equal(config_auto_gpu_workers(16, 1, 0), 4);
	assert_int_equal(config_auto_gpu_workers(64, 4, 0), 4);
	assert_int_equal(config_auto_gpu_workers(64, 8, 0), 2);
	assert_int_equal(config_auto_gpu_workers(2, 1, 0), 1);
	assert_int_equal(config_auto_gpu_workers(2, 8, 0), 1);
	assert_int_equal(config_auto_gpu_workers(128, 1, 0), 4);
	assert_int_equal(config_auto_gpu_workers(12, 0, 0), 3);
	/* One per 16 GiB of the smallest GPU, when known. */
	assert_int_equal(config_auto_gpu_workers(64, 1, 141 * gib), 4);
	assert_int_equal(config_auto_gpu_workers(64, 1, 40 * gib), 2);
	assert_int_equal(config_auto_gpu_workers(64, 1, 12 * gib), 1);
	/* A CPU worker per 4 CPUs, 2 to 16. */
	assert_int_equal(config_auto_cpu_workers(1), 2);
	assert_int_equal(config_auto_cpu_workers(16), 4);
	assert_int_equal(config_auto_cpu_workers(64), 16);
	assert_int_equal(config_auto_cpu_workers(256), 16);
	/* Explicit values stay as given; "auto" parses to CONFIG_AUTO. */
	c = load_ok("[kgymd]\nworkers_per_gpu = 3\n[workers]\ncpu_workers = auto\n");
	assert_int_equal(c->workers_per_gpu, 3);
	assert_int_equal(c->cpu_workers, CONFIG_AUTO);
	config_free(c);
}

static void
test_value_errors(void **state)
{
	static const struct {
		const char *text;
		const char *expect;
	} cases[] = {
		{ "[kgymd]\n\nworkers_per_gpu = abc\n",
		  ":3: workers_per_gpu: expected \"auto\" or an integer from 1 to 64, got \"abc\"" },
		{ "[kgymd]\nworkers_per_gpu = 0\n",
		  ":2: workers_per_gpu: expected \"auto\" or an integer from 1 to 64, got \"0\"" },
		{ "[kgymd]\nworkers_per_gpu = 65\n",
		  ":2: workers_per_gpu: expected \"auto\" or an integer from 1 to 64, got \"65\"" },
		{ "[kgymd]\nworkers_per_gpu = Auto\n",
		  ":2: workers_per_gpu: expected \"auto\" or an integer from 1 to 64, got \"Auto\"" },
		{ "[workers]\ncpu_workers = -1\n",
		  ":2: cpu_workers: expected \"auto\" or an integer from 0 to 1024, got \"-1\"" },
		{ "[kgymd]\nmax_connections = -1\n",
		  ":2: max_connections: expected an integer from 1 to 65536, got \"-1\"" },
		{ "[kgymd]\nmax_attempts = 99999999999999999999999\n",
		  ":2: max_attempts: expected an integer from 1 to 100, got "
		  "\"99999999999999999999999\"" },
		{ "[kgymd]\nmax_queued_tasks = 12abc\n",
		  ":2: max_queued_tasks: expected an integer from 1 to 100000000, got \"12abc\"" },
		{ "[kgymd]\nsocket = run/kgymd.sock\n",
		  ":2: socket: expected an absolute path, got \"run/kgymd.sock\"" },
		{ "[kgymd]\nstate_dir =\n",
		  ":2: state_dir: expected an absolute path, got \"\"" },
		{ "[kgymd]\nsocket_mode = 0680\n",
		  ":2: socket_mode: expected an octal mode from 0 to 0777, got \"0680\"" },
		{ "[kgymd]\nsocket_mode = 1000\n",
		  ":2: socket_mode: expected an octal mode from 0 to 0777, got \"1000\"" },
		{ "[kgymd]\nsocket_mode = rw\n",
		  ":2: socket_mode: expected an octal mode from 0 to 0777, got \"rw\"" },
		{ "[kgymd]\nplugin_dir = /a::/b\n",
		  ":2: plugin_dir: expected a colon-separated list of directories, got \"/a::/b\"" },
		{ "[kgymd]\nplugin_dir =\n",
		  ":2: plugin_dir: expected a colon-separated list of directories, got \"\"" },
		{ "[kgymd]\nmax_request_bytes = 512\n",
		  ":2: max_request_bytes: expected a size from 1K to 1G (bytes, or with "
		  "suffix K, M, G or T), got \"512\"" },
		{ "[kgymd]\nmax_request_bytes = 2G\n",
		  ":2: max_request_bytes: expected a size from 1K to 1G (bytes, or with "
		  "suffix K, M, G or T), got \"2G\"" },
		{ "[kgymd]\nmax_request_bytes = 16X\n",
		  ":2: max_request_bytes: expected a size from 1K to 1G (bytes, or with "
		  "suffix K, M, G or T), got \"16X\"" },
		{ "[kgymd]\nmax_request_bytes = 99999999999999999T\n",
		  ":2: max_request_bytes: expected a size from 1K to 1G (bytes, or with "
		  "suffix K, M, G or T), got \"99999999999999999T\"" },
		{ "[kgymd]\nresult_ttl = 0\n",
		  ":2: result_ttl: expected a duration from 1s to 3650d (seconds, or with "
		  "suffix s, m, h or d), got \"0\"" },
		{ "[kgymd]\nresult_ttl = 1.5d\n",
		  ":2: result_ttl: expected a duration from 1s to 3650d (seconds, or with "
		  "suffix s, m, h or d), got \"1.5d\"" },
		{ "[kgymd]\nresult_ttl = 3651d\n",
		  ":2: result_ttl: expected a duration from 1s to 3650d (seconds, or with "
		  "suffix s, m, h or d), got \"3651d\"" },
		{ "[kgymd]\nresult_ttl = 7w\n",
		  ":2: result_ttl: expected a duration from 1s to 3650d (seconds, or with "
		  "suffix s, m, h or d), got \"7w\"" },
		{ "[kgymd]\ndefault_timeout = 0\n",
		  ":2: default_timeout: expected a duration above 0 and at most 30d "
		  "(seconds, or with suffix s, m, h or d), got \"0\"" },
		{ "[kgymd]\nmax_timeout = 31d\n",
		  ":2: max_timeout: expected a duration above 0 and at most 30d "
		  "(seconds, or with suffix s, m, h or d), got \"31d\"" },
		{ "[kgymd]\nmax_timeout = 1.h\n",
		  ":2: max_timeout: expected a duration above 0 and at most 30d "
		  "(seconds, or with suffix s, m, h or d), got \"1.h\"" },
		{ "[kgymd]\nlog_level = loud\n",
		  ":2: log_level: expected error, warning, info or debug, got \"loud\"" },
		{ "[kgymd]\nstore_sync = sometimes\n",
		  ":2: store_sync: expected normal or full, got \"sometimes\"" },
		{ "[sandbox]\nenabled = maybe\n",
		  ":2: enabled: expected yes or no (or true, false, on, off, 1, 0), got \"maybe\"" },
		{ "[sandbox]\njob_memory = 32M\n",
		  ":2: job_memory: expected a size from 64M to 16T (bytes, or with suffix "
		  "K, M, G or T), got \"32M\"" },
		{ "[sandbox]\njob_max_file_size = 2T\n",
		  ":2: job_max_file_size: expected a size from 1M to 1T (bytes, or with "
		  "suffix K, M, G or T), got \"2T\"" },
		{ "[sandbox]\njob_max_files = 15\n",
		  ":2: job_max_files: expected an integer from 16 to 65536, got \"15\"" },
		{ "[sandbox]\njob_max_processes = 4097\n",
		  ":2: job_max_processes: expected an integer from 1 to 4096, got \"4097\"" },
		{ "[kgymd]\ngpus = 0,x\n",
		  ":2: gpus: expected all, none or a comma-separated list of GPU indices "
		  "from 0 to 63, got \"0,x\"" },
		{ "[kgymd]\ngpus = 64\n",
		  ":2: gpus: expected all, none or a comma-separated list of GPU indices "
		  "from 0 to 63, got \"64\"" },
		{ "[kgymd]\ngpus = 0,,1\n",
		  ":2: gpus: expected all, none or a comma-separated list of GPU indices "
		  "from 0 to 63, got \"0,,1\"" },
		{ "[kgymd]\ngpus =\n",
		  ":2: gpus: expected all, none or a comma-separated list of GPU indices "
		  "from 0 to 63, got \"\"" },
		{ "[kgymd]\nallow_uids = root,,1\n",
		  ":2: allow_uids: expected a comma-separated list of user names or uids, "
		  "got \"root,,1\"" },
		{ "[kgymd]\nallow_gids = 0,\n",
		  ":2: allow_gids: expected a comma-separated list of group names or gids, "
		  "got \"0,\"" },
		{ "[kgymd]\nadmin_uids = 4294967295\n",
		  ":2: admin_uids: uid 4294967295 is out of range" },
	};
	char text[256];
	size_t i;

	(void)state;
	for (i = 0; i < sizeof cases / sizeof cases[0]; i++)
		expect_error(cases[i].text, cases[i].expect);

	/* sun_path holds 108 bytes with the NUL: 107 fit, 108 do not. */
	snprintf(text, sizeof text, "[kgymd]\nsocket = /%0106d\n", 0);
	config_free(load_ok(text));
	snprintf(text, sizeof text, "[kgymd]\nsocket = /%0107d\n", 0);
	expect_error(text,
	    ":2: socket: expected a path of at most 107 bytes, got 108 bytes");
}

static void
test_structure_errors(void **state)
{
	char long_line[400];

	(void)state;
	expect_error("[kgymd]\nsocket_mode = 0600\nworkers = 2\n",
	    ":3: unknown key \"workers\" in [kgymd]");
	/* A key of the other section is unknown here. */
	expect_error("[sandbox]\ngpus = all\n",
	    ":2: unknown key \"gpus\" in [sandbox]");
	expect_error("[kgymd]\n[sandboxes]\nenabled = yes\n",
	    ":2: unknown section [sandboxes] (expected [kgymd], [workers], [sandbox], [cluster], "
	    "[http] or [plugin.NAME])");
	/* inih reports no keyless section; kgymd still refuses the name. */
	expect_error("[kgymd]\n[Kgymd]\n[sandbox]\n",
	    ":2: unknown section [Kgymd] (expected [kgymd], [workers], [sandbox], [cluster], "
	    "[http] or [plugin.NAME])");
	/* kgymd-http's section is skipped, whatever it holds. */
	{
		char *p = write_conf("[kgymd]\ngateway_uids = 1005, 0\n[http]\nlisten = 0.0.0.0:1\nwhatever = x\n");
		struct config *c = NULL;
		char *cause = NULL;

		assert_int_equal(config_load(p, &c, &cause), 0);
		assert_int_equal(c->ngateway_uids, 2);
		assert_true(config_uid_gateway(c, 1005));
		assert_true(config_uid_gateway(c, 0));
		assert_false(config_uid_gateway(c, 1006));
		config_free(c);
		remove_conf(p);
	}
	expect_error("[plugin.Nv-rtc]\n",
	    ":1: bad section name [plugin.Nv-rtc]: a plugin name is 1 to 63 "
	    "characters of a-z, 0-9 and _");
	expect_error("[plugin.]\nx = 1\n",
	    ":1: bad section name [plugin.]: a plugin name is 1 to 63 "
	    "characters of a-z, 0-9 and _");
	expect_error("[kgymd]\nsocket_mode = 0600\n\n# again\nsocket_mode = 0640\n",
	    ":5: duplicate key \"socket_mode\" in [kgymd] (first set on line 2)");
	/* A repeated section header does not make a key settable twice. */
	expect_error("[sandbox]\nenabled = no\n[kgymd]\n[sandbox]\nenabled = yes\n",
	    ":5: duplicate key \"enabled\" in [sandbox] (first set on line 2)");
	expect_error("[plugin.nvrtc]\narch = sm_80\narch = sm_90\n",
	    ":3: duplicate key \"arch\" in [plugin.nvrtc] (first set on line 2)");
	expect_error("socket = /x\n",
	    ":1: socket: key outside any section (put it under [kgymd], [sandbox] "
	    "or [plugin.NAME])");
	expect_error("[kgymd]\nlog_level = info\nthis line has no equals sign\n",
	    ":3: syntax error: expected [section], key = value or a comment");
	expect_error("[kgymd\nlog_level = info\n",
	    ":1: syntax error: expected [section], key = value or a comment");
	expect_error("[kgymd]\n= info\n",
	    ":2: syntax error: no key name before '='");

	memset(long_line, 'x', sizeof long_line);
	memcpy(long_line, "[kgymd]\n# ", 10);
	long_line[sizeof long_line - 2] = '\n';
	long_line[sizeof long_line - 1] = '\0';
	expect_error(long_line, ":2: line is longer than 198 bytes");

	/* Constraints across keys: line 0. */
	expect_error("[kgymd]\ndefault_timeout = 2h\n",
	    ":0: default_timeout (7200s) is larger than max_timeout (3600s)");
	expect_error("[kgymd]\nmax_timeout = 60\n",
	    ":0: default_timeout (600s) is larger than max_timeout (60s)");
}

static void
test_first_error_wins(void **state)
{
	(void)state;
	expect_error("[kgymd]\nworkers_per_gpu = 0\nmax_attempts = 0\nbogus = 1\n",
	    ":2: workers_per_gpu: expected \"auto\" or an integer from 1 to 64, got \"0\"");
	/* A syntax error before a bad value is the one reported... */
	expect_error("[kgymd]\nno equals\nmax_attempts = 0\n",
	    ":2: syntax error: expected [section], key = value or a comment");
	/* ...and after one, the bad value is. */
	expect_error("[kgymd]\nmax_attempts = 0\nno equals\n",
	    ":2: max_attempts: expected an integer from 1 to 100, got \"0\"");
	/* Nothing after the first error is read: no lookup of this user. */
	expect_error("[kgymd]\nmax_attempts = 0\nallow_uids = kgym_no_such_user_q7\n",
	    ":2: max_attempts: expected an integer from 1 to 100, got \"0\"");
}

static void
test_missing_file(void **state)
{
	struct config *config = NULL;
	char *path, *cause = NULL, *want;
	int rc;

	(void)state;
	path = xstrdup_printf("%s/does-not-exist.conf", test_dir);
	rc = config_load(path, &config, &cause);
	assert_int_equal(rc, -ENOENT);
	assert_null(config);
	want = xstrdup_printf("%s: No such file or directory", path);
	assert_string_equal(cause, want);
	free(want);
	free(cause);
	free(path);

	/* A directory is not a configuration file either. */
	cause = NULL;
	rc = config_load(test_dir, &config, &cause);
	assert_int_equal(rc, -EISDIR);
	assert_null(config);
	want = xstrdup_printf("%s: Is a directory", test_dir);
	assert_string_equal(cause, want);
	free(want);
	free(cause);
}

static void
test_suffixes(void **state)
{
	struct config *c;

	(void)state;
	c = load_ok("[kgymd]\nmax_request_bytes = 1024\nresult_ttl = 45s\n"
	    "default_timeout = 0.25\nmax_timeout = 1.5h\n"
	    "[sandbox]\njob_memory = 1T\njob_max_file_size = 3g\n");
	assert_int_equal(c->max_request_bytes, 1024);
	assert_int_equal(c->result_ttl_s, 45);
	assert_true(c->default_timeout_s == 0.25);
	assert_true(c->max_timeout_s == 5400.0);
	assert_int_equal(c->job_memory_bytes, INT64_C(1) << 40);
	assert_int_equal(c->job_max_file_bytes, INT64_C(3) << 30);
	config_free(c);

	c = load_ok("[kgymd]\nmax_request_bytes = 64k\nresult_ttl = 2h\n"
	    "default_timeout = 1m\nmax_timeout = 1d\n"
	    "[sandbox]\njob_memory = 100M\n");
	assert_int_equal(c->max_request_bytes, 64 * 1024);
	assert_int_equal(c->result_ttl_s, 7200);
	assert_true(c->default_timeout_s == 60.0);
	assert_true(c->max_timeout_s == 86400.0);
	assert_int_equal(c->job_memory_bytes, INT64_C(100) << 20);
	config_free(c);

	/* The limits themselves are inside the range. */
	c = load_ok("[kgymd]\nmax_request_bytes = 1G\nresult_ttl = 3650d\n"
	    "max_timeout = 30d\nsocket_mode = 0777\n"
	    "[sandbox]\njob_memory = 16T\n");
	assert_int_equal(c->max_request_bytes, 1024 * 1024 * 1024);
	assert_int_equal(c->result_ttl_s, INT64_C(3650) * 86400);
	assert_true(c->max_timeout_s == 30.0 * 86400);
	assert_int_equal(c->socket_mode, 0777);
	assert_int_equal(c->job_memory_bytes, INT64_C(16) << 40);
	config_free(c);

	c = load_ok("[kgymd]\nsocket_mode = 0\n[sandbox]\nenabled = Off\n");
	assert_int_equal(c->socket_mode, 0);
	assert_false(c->sandbox_enabled);
	config_free(c);
}

static void
test_gpus(void **state)
{
	struct config *c;

	(void)state;
	c = load_ok("[kgymd]\ngpus = 0, 2,5 ,63\n");
	assert_false(c->gpus_all);
	assert_int_equal(c->ngpus, 4);
	assert_int_equal(c->gpus[0], 0);
	assert_int_equal(c->gpus[1], 2);
	assert_int_equal(c->gpus[2], 5);
	assert_int_equal(c->gpus[3], 63);
	config_free(c);

	c = load_ok("[kgymd]\ngpus = none\n");
	assert_false(c->gpus_all);
	assert_int_equal(c->ngpus, 0);
	assert_null(c->gpus);
	config_free(c);

	c = load_ok("[kgymd]\ngpus = ALL\n");
	assert_true(c->gpus_all);
	assert_int_equal(c->ngpus, 0);
	config_free(c);

	expect_error("[kgymd]\ngpus = 1,1\n", ":2: gpus: GPU 1 is listed twice in \"1,1\"");
	expect_error("[kgymd]\ngpus = 0, 3, 2, 3\n",
	    ":2: gpus: GPU 3 is listed twice in \"0, 3, 2, 3\"");
}

static void
test_user_names(void **state)
{
	struct config *c;

	(void)state;
	c = load_ok("[kgymd]\nallow_uids = root, 1234\nallow_gids = root,77\n"
	    "admin_uids = root\n");
	assert_int_equal(c->nallow_uids, 2);
	assert_int_equal(c->allow_uids[0], 0);
	assert_int_equal(c->allow_uids[1], 1234);
	assert_int_equal(c->nallow_gids, 2);
	assert_int_equal(c->allow_gids[0], 0);
	assert_int_equal(c->allow_gids[1], 77);
	assert_int_equal(c->nadmin_uids, 1);
	assert_int_equal(c->admin_uids[0], 0);
	config_free(c);

	/* Blanks only: an empty list, as when the key is absent. */
	c = load_ok("[kgymd]\nallow_uids =   \n");
	assert_int_equal(c->nallow_uids, 0);
	config_free(c);

	expect_error("[kgymd]\nlog_level = info\nallow_uids = root, kgym_no_such_user_q7\n",
	    ":3: allow_uids: unknown user \"kgym_no_such_user_q7\"");
	expect_error("[kgymd]\nadmin_uids = kgym_no_such_user_q7\n",
	    ":2: admin_uids: unknown user \"kgym_no_such_user_q7\"");
	expect_error("[kgymd]\nallow_gids = kgym_no_such_group_q7\n",
	    ":2: allow_gids: unknown group \"kgym_no_such_group_q7\"");
}

static void
test_plugin_sections(void **state)
{
	struct config *c;

	(void)state;
	c = load_ok("[plugin.nvrtc]\narch = sm_90\nopts = -lineinfo ; a comment\n"
	    "[kgymd]\nlog_level = warning\n"
	    "[plugin.k_2]\nArch = raw Value with = and : in it\nempty =\n"
	    "[plugin.nvrtc]\nmore = 1\n");
	assert_int_equal(c->log_level, KGYM_LOG_WARN);
	assert_int_equal(c->nplugins, 2);
	assert_string_equal(config_plugin_get(c, "nvrtc", "arch"), "sm_90");
	assert_string_equal(config_plugin_get(c, "nvrtc", "opts"), "-lineinfo");
	assert_string_equal(config_plugin_get(c, "nvrtc", "more"), "1");
	assert_string_equal(config_plugin_get(c, "k_2", "Arch"),
	    "raw Value with = and : in it");
	assert_string_equal(config_plugin_get(c, "k_2", "empty"), "");
	/* Keys are per plugin, and case-sensitive. */
	assert_null(config_plugin_get(c, "k_2", "arch"));
	assert_null(config_plugin_get(c, "k_2", "more"));
	assert_null(config_plugin_get(c, "nvrtc", "Arch"));
	assert_null(config_plugin_get(c, "nope", "arch"));
	assert_null(config_plugin_get(NULL, "nvrtc", "arch"));
	/* Line numbers are kept for the plugin's own messages. */
	assert_string_equal(c->plugins[0].name, "nvrtc");
	assert_int_equal(c->plugins[0].kv[0].line, 2);
	assert_int_equal(c->plugins[0].kv[2].line, 10);
	config_free(c);
}

/* Plugin names up to KGYM_NAME_MAX - 1 bytes, longer than inih's sections. */
static void
test_plugin_long_name(void **state)
{
	char name[KGYM_NAME_MAX + 1], *text, *expect;
	struct config *c;

	(void)state;
	memset(name, 'p', KGYM_NAME_MAX - 1);
	name[KGYM_NAME_MAX - 1] = '\0';
	text = xstrdup_printf("[plugin.%s]\nk = v\n[plugin.%.*s]\nk = w\n", name,
	    40, name);
	c = load_ok(text);
	free(text);
	assert_int_equal(c->nplugins, 2);
	assert_string_equal(config_plugin_get(c, name, "k"), "v");
	name[40] = '\0';
	assert_string_equal(config_plugin_get(c, name, "k"), "w");
	config_free(c);

	memset(name, 'p', KGYM_NAME_MAX);
	name[KGYM_NAME_MAX] = '\0';
	text = xstrdup_printf("[plugin.%s]\n", name);
	expect = xstrdup_printf(":1: bad section name [plugin.%s]: a plugin name "
	    "is 1 to %d characters of a-z, 0-9 and _", name, KGYM_NAME_MAX - 1);
	expect_error(text, expect);
	free(expect);
	free(text);
}

static void
test_syntax_details(void **state)
{
	struct config *c;

	(void)state;
	/* Indented keys are keys, not continuations of the value above. */
	c = load_ok("[kgymd]\n  workers_per_gpu = 2\n\tmax_attempts = 5\n"
	    "  [sandbox]\n    enabled = no\n");
	assert_int_equal(c->workers_per_gpu, 2);
	assert_int_equal(c->max_attempts, 5);
	assert_false(c->sandbox_enabled);
	config_free(c);

	/* CRLF line ends, inline comments, a last line without a newline. */
	c = load_ok("[kgymd]\r\nmax_attempts = 7 ; seven\r\n; whole line\r\n"
	    "max_batch_tasks = 8");
	assert_int_equal(c->max_attempts, 7);
	assert_int_equal(c->max_batch_tasks, 8);
	config_free(c);

	/* A UTF-8 byte order mark before the first section. */
	c = load_ok("\xef\xbb\xbf[kgymd]\nmax_attempts = 4\n");
	assert_int_equal(c->max_attempts, 4);
	config_free(c);

	/* "#" after a value is part of the value, and so refused. */
	expect_error("[kgymd]\nmax_attempts = 7 # seven\n",
	    ":2: max_attempts: expected an integer from 1 to 100, got \"7 # seven\"");
}

static void
test_uid_logic(void **state)
{
	struct config *c, *def;
	char *text;
	uid_t u1 = stranger_uid(1), u2 = stranger_uid(2), u3 = stranger_uid(3);
	gid_t g1 = 41001, g2 = 41002;

	(void)state;
	def = config_defaults();
	assert_non_null(def);
	/* Defaults: root and our own user only. */
	assert_true(config_uid_allowed(def, 0, g2));
	assert_true(config_uid_allowed(def, geteuid(), g2));
	assert_false(config_uid_allowed(def, u1, g2));
	assert_true(config_uid_admin(def, 0));
	assert_true(config_uid_admin(def, geteuid()));
	assert_false(config_uid_admin(def, u1));
	config_free(def);

	text = xstrdup_printf("[kgymd]\nallow_uids = %u\nallow_gids = %u\n"
	    "admin_uids = %u\n", (unsigned)u1, (unsigned)g1, (unsigned)u2);
	c = load_ok(text);
	free(text);
	assert_true(config_uid_allowed(c, u1, g2));	/* by uid */
	assert_true(config_uid_allowed(c, u3, g1));	/* by group */
	assert_false(config_uid_allowed(c, u3, g2));
	assert_false(config_uid_allowed(c, u2, g2));	/* admin alone does not let in */
	assert_true(config_uid_allowed(c, 0, g2));
	assert_true(config_uid_allowed(c, geteuid(), g2));
	assert_true(config_uid_admin(c, u2));
	assert_false(config_uid_admin(c, u1));
	assert_false(config_uid_admin(c, u3));
	assert_true(config_uid_admin(c, 0));
	assert_true(config_uid_admin(c, geteuid()));
	config_free(c);
}

/*
 * kgymd's own user is trusted even when it is not root.  Run as root, the
 * test takes another effective uid for the checks, or "own user" and
 * "root" could not be told apart.
 */
static void
test_own_uid_not_root(void **state)
{
	bool switched = false, own_allowed, own_admin, root_allowed;
	bool stranger_allowed, stranger_admin;
	struct config *def;
	uid_t own;

	(void)state;
	def = config_defaults();
	assert_non_null(def);
	if (geteuid() == 0) {
		if (seteuid(stranger_uid(5)) != 0) {
			config_free(def);
			skip();
		}
		switched = true;
	}
	own = geteuid();
	own_allowed = config_uid_allowed(def, own, 41002);
	own_admin = config_uid_admin(def, own);
	root_allowed = config_uid_allowed(def, 0, 41002) && config_uid_admin(def, 0);
	stranger_allowed = config_uid_allowed(def, own + 1, 41002);
	stranger_admin = config_uid_admin(def, own + 1);
	/* Back to root before any assertion can end the test. */
	if (switched)
		assert_int_equal(seteuid(0), 0);
	config_free(def);

	assert_true(own != 0);
	assert_true(own_allowed);
	assert_true(own_admin);
	assert_true(root_allowed);
	assert_false(stranger_allowed);
	assert_false(stranger_admin);
}

/* Run config_apply_reload with stderr (the log) captured; returns the log. */
static char *
reload_capturing_log(struct config *cur, const struct config *next)
{
	char *path, *log;
	int fd, saved;

	path = xstrdup_printf("%s/reload.log", test_dir);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0);
	fflush(stderr);
	saved = dup(STDERR_FILENO);
	assert_true(saved >= 0);
	assert_true(dup2(fd, STDERR_FILENO) >= 0);
	close(fd);
	config_apply_reload(cur, next);
	fflush(stderr);
	assert_true(dup2(saved, STDERR_FILENO) >= 0);
	close(saved);
	log = read_text(path);
	unlink(path);
	free(path);
	return log;
}

static void
test_reload(void **state)
{
	struct config *cur, *next, *def;
	char *log;

	(void)state;
	cur = config_defaults();
	def = config_defaults();
	assert_non_null(cur);
	assert_non_null(def);
	next = load_ok(
	    "[kgymd]\n"
	    "socket = /tmp/other.sock\n"
	    "socket_mode = 0600\n"
	    "state_dir = /srv/other\n"
	    "plugin_dir = /opt/p\n"
	    "gpus = 1\n"
	    "workers_per_gpu = 2\n"
	    "store_sync = full\n"
	    "max_running_tasks = 11\n"
	    "max_queued_tasks = 12\n"
	    "max_request_bytes = 13K\n"
	    "max_connections = 14\n"
	    "max_batch_tasks = 15\n"
	    "max_attempts = 16\n"
	    "result_ttl = 17s\n"
	    "default_timeout = 18\n"
	    "max_timeout = 19\n"
	    "log_level = error\n"
	    "allow_uids = 1001,1002\n"
	    "allow_gids = 2001\n"
	    "admin_uids = 1003\n"
	    "[sandbox]\n"
	    "enabled = no\n"
	    "job_memory = 65M\n"
	    "job_max_files = 17\n"
	    "job_max_processes = 3\n"
	    "job_max_file_size = 5M\n"
	    "[plugin.nvrtc]\n"
	    "arch = sm_90\n");
	log = reload_capturing_log(cur, next);

	/* Reloadable: copied. */
	assert_int_equal(cur->max_running_tasks, 11);
	assert_int_equal(cur->max_queued_tasks, 12);
	assert_int_equal(cur->max_request_bytes, 13 * 1024);
	assert_int_equal(cur->max_connections, 14);
	assert_int_equal(cur->max_batch_tasks, 15);
	assert_int_equal(cur->max_attempts, 16);
	assert_int_equal(cur->result_ttl_s, 17);
	assert_true(cur->default_timeout_s == 18.0);
	assert_true(cur->max_timeout_s == 19.0);
	assert_int_equal(cur->log_level, KGYM_LOG_ERROR);
	assert_int_equal(cur->nallow_uids, 2);
	assert_int_equal(cur->allow_uids[1], 1002);
	assert_int_equal(cur->nallow_gids, 1);
	assert_int_equal(cur->allow_gids[0], 2001);
	assert_int_equal(cur->nadmin_uids, 1);
	assert_int_equal(cur->admin_uids[0], 1003);
	assert_string_equal(config_plugin_get(cur, "nvrtc", "arch"), "sm_90");
	/* The copies are cur's own, not next's. */
	assert_ptr_not_equal(cur->allow_uids, next->allow_uids);
	assert_ptr_not_equal(config_plugin_get(cur, "nvrtc", "arch"),
	    config_plugin_get(next, "nvrtc", "arch"));

	/* Not reloadable: kept, and each named in the log. */
	assert_string_equal(cur->path, "(defaults)");
	assert_string_equal(cur->socket, def->socket);
	assert_int_equal(cur->socket_mode, def->socket_mode);
	assert_string_equal(cur->state_dir, def->state_dir);
	assert_string_equal(cur->plugin_dir, def->plugin_dir);
	assert_true(cur->gpus_all);
	assert_int_equal(cur->ngpus, 0);
	assert_int_equal(cur->workers_per_gpu, def->workers_per_gpu);
	assert_int_equal(cur->store_sync_full, def->store_sync_full);
	assert_int_equal(cur->sandbox_enabled, def->sandbox_enabled);
	assert_int_equal(cur->job_memory_bytes, def->job_memory_bytes);
	assert_int_equal(cur->job_max_files, def->job_max_files);
	assert_int_equal(cur->job_max_processes, def->job_max_processes);
	assert_int_equal(cur->job_max_file_bytes, def->job_max_file_bytes);
	assert_non_null(strstr(log, "socket changed; restart kgymd to apply"));
	assert_non_null(strstr(log, "socket_mode changed; restart kgymd to apply"));
	assert_non_null(strstr(log, "state_dir changed; restart kgymd to apply"));
	assert_non_null(strstr(log, "plugin_dir changed; restart kgymd to apply"));
	assert_non_null(strstr(log, "gpus changed; restart kgymd to apply"));
	assert_non_null(strstr(log, "workers_per_gpu changed; restart kgymd to apply"));
	assert_non_null(strstr(log, "store_sync changed; restart kgymd to apply"));
	assert_non_null(strstr(log, "sandbox.enabled changed; restart kgymd to apply"));
	assert_non_null(strstr(log, "sandbox.job_memory changed; restart kgymd to apply"));
	assert_non_null(strstr(log, "sandbox.job_max_file_size changed; restart"));
	assert_null(strstr(log, "max_running_tasks changed; restart"));
	assert_null(strstr(log, "allow_uids changed; restart"));
	free(log);

	/*
	 * Reloading the same again copies nothing, but still says that the
	 * restart is pending.
	 */
	log = reload_capturing_log(cur, next);
	assert_null(strstr(log, "max_running_tasks changed"));
	assert_null(strstr(log, "[plugin.*] sections changed"));
	assert_non_null(strstr(log, "socket changed; restart kgymd to apply"));
	free(log);

	/* Back to the defaults: lists and plugin sections go away. */
	log = reload_capturing_log(cur, def);
	free(log);
	assert_int_equal(cur->nallow_uids, 0);
	assert_int_equal(cur->nallow_gids, 0);
	assert_int_equal(cur->nadmin_uids, 0);
	assert_int_equal(cur->nplugins, 0);
	assert_null(config_plugin_get(cur, "nvrtc", "arch"));
	assert_config_equal(cur, def, true, true);

	config_free(next);
	config_free(def);
	config_free(cur);
}

/* [cluster]: single node by default; each key checked, errors name what was expected. */
static void
test_cluster(void **state)
{
	struct cluster_addr a;
	struct config *c;
	char *reason = NULL;

	(void)state;
	c = load_ok("[kgymd]\n");
	assert_string_equal(c->cluster_redis, "");
	assert_string_equal(c->cluster_node_id, "");
	assert_int_equal(c->cluster_lease_s, 30);
	assert_int_equal(c->cluster_max_attempts, 3);
	assert_int_equal(c->cluster_result_ttl_s, 86400);
	assert_string_equal(c->cluster_password_file, "");
	config_free(c);

	c = load_ok("[cluster]\nredis = redis://127.0.0.1:6380/2\nnode_id = gpu-a.1\n"
	    "lease = 2m\nmax_attempts = 5\nresult_ttl = 2h\npassword_file = /etc/kgym/redis.pw\n");
	assert_string_equal(c->cluster_redis, "redis://127.0.0.1:6380/2");
	assert_string_equal(c->cluster_node_id, "gpu-a.1");
	assert_int_equal(c->cluster_lease_s, 120);
	assert_int_equal(c->cluster_max_attempts, 5);
	assert_int_equal(c->cluster_result_ttl_s, 7200);
	assert_string_equal(c->cluster_password_file, "/etc/kgym/redis.pw");
	config_free(c);
	c = load_ok("[cluster]\nredis = /run/redis/redis.sock\n");
	assert_string_equal(c->cluster_redis, "/run/redis/redis.sock");
	config_free(c);

	assert_int_equal(cluster_url_parse("redis://[::1]:7000/3", &a, &reason), 0);
	assert_string_equal(a.host, "::1");
	assert_int_equal(a.port, 7000);
	assert_int_equal(a.db, 3);
	assert_int_equal(cluster_url_parse("redis://redis-host", &a, &reason), 0);
	assert_string_equal(a.host, "redis-host");
	assert_int_equal(a.port, 6379);
	assert_int_equal(a.db, 0);
	assert_int_equal(cluster_url_parse("/tmp/r.sock", &a, &reason), 0);
	assert_string_equal(a.path, "/tmp/r.sock");
	assert_string_equal(a.host, "");

	expect_error("[cluster]\nredis = http://x\n",
	    ":2: redis: expected redis://HOST[:PORT][/DB] or the absolute path of a Unix "
	    "socket, got \"http://x\" (neither a redis:// URL nor a path)");
	expect_error("[cluster]\nredis = redis://h:0\n",
	    ":2: redis: expected redis://HOST[:PORT][/DB] or the absolute path of a Unix "
	    "socket, got \"redis://h:0\" (the port must be 1 to 65535)");
	expect_error("[cluster]\nredis = redis://h:6379/x\n",
	    ":2: redis: expected redis://HOST[:PORT][/DB] or the absolute path of a Unix "
	    "socket, got \"redis://h:6379/x\" (the database must be a number)");
	expect_error("[cluster]\nredis = redis://:secret@h\n",
	    ":2: redis: expected redis://HOST[:PORT][/DB] or the absolute path of a Unix "
	    "socket, got \"redis://:secret@h\" (a password goes in password_file)");
	expect_error("[cluster]\nnode_id = a b\n",
	    ":2: node_id: expected 1 to 64 characters of A-Z, a-z, 0-9, '.', '_' and '-' "
	    "(or nothing for the host name), got \"a b\"");
	expect_error("[cluster]\nlease = 0\n",
	    ":2: lease: expected a duration from 1s to 1h (seconds, or with suffix s, m, h "
	    "or d), got \"0\"");
	expect_error("[cluster]\nmax_attempts = 0\n",
	    ":2: max_attempts: expected an integer from 1 to 100, got \"0\"");
	expect_error("[cluster]\npassword_file = pw\n",
	    ":2: password_file: expected an absolute path or none, got \"pw\"");
}

static void
test_key_table(void **state)
{
	struct config_key_info a, b;
	size_t i, j, n;

	(void)state;
	for (n = 0; config_key_info(n, &a) == 0; n++) {
		assert_true(strcmp(a.section, "kgymd") == 0 ||
		    strcmp(a.section, "workers") == 0 ||
		    strcmp(a.section, "sandbox") == 0 ||
		    strcmp(a.section, "cluster") == 0);
		assert_non_null(a.default_value);
		assert_true(strlen(a.doc) > 0);
	}
	assert_true(n >= 25);
	assert_int_equal(config_key_info(n, &a), -ENOENT);
	for (i = 0; i < n; i++) {
		config_key_info(i, &a);
		for (j = i + 1; j < n; j++) {
			config_key_info(j, &b);
			assert_false(strcmp(a.section, b.section) == 0 &&
			    strcmp(a.name, b.name) == 0);
		}
	}
}

/*
 * The value of "# key = value" in `section` of the shipped file, or NULL.
 * Only real (uncommented) section headers change the section.
 */
static char *
shipped_default(const char *text, const char *section, const char *key)
{
	const char *line = text, *eol;
	char cur[64] = "", prefix[128];
	size_t plen;

	snprintf(prefix, sizeof prefix, "# %s =", key);
	plen = strlen(prefix);
	for (; *line != '\0'; line = *eol ? eol + 1 : eol) {
		eol = strchr(line, '\n');
		if (eol == NULL)
			eol = line + strlen(line);
		if (line[0] == '[') {
			snprintf(cur, sizeof cur, "%.*s", (int)(eol - line), line);
			continue;
		}
		if (strncmp(cur + 1, section, strlen(section)) != 0 ||
		    cur[strlen(section) + 1] != ']')
			continue;
		if ((size_t)(eol - line) >= plen && strncmp(line, prefix, plen) == 0) {
			line += plen;
			if (*line == ' ')
				line++;
			return strndup(line, (size_t)(eol - line));
		}
	}
	return NULL;
}

static void
test_shipped_conf_lists_every_key(void **state)
{
	struct config_key_info info;
	char *path, *text, *value;
	size_t i;

	(void)state;
	path = srcdir_path("etc/kgymd.conf");
	text = read_text(path);
	for (i = 0; config_key_info(i, &info) == 0; i++) {
		value = shipped_default(text, info.section, info.name);
		if (value == NULL)
			fail_msg("%s: no \"# %s = %s\" line in [%s]", path,
			    info.name, info.default_value, info.section);
		/* plugin_dir's and the worker path's defaults are chosen at build time. */
		if (strcmp(info.name, "plugin_dir") != 0 &&
		    !(strcmp(info.section, "workers") == 0 && strcmp(info.name, "path") == 0) &&
		    strcmp(value, info.default_value) != 0)
			fail_msg("%s: [%s] %s: the file says \"%s\", the code \"%s\"",
			    path, info.section, info.name, value, info.default_value);
		free(value);
	}
	free(text);
	free(path);
}

static void
test_shipped_conf_is_defaults(void **state)
{
	struct config *shipped = NULL, *def;
	char *path, *cause = NULL;
	int rc;

	(void)state;
	path = srcdir_path("etc/kgymd.conf");
	rc = config_load(path, &shipped, &cause);
	if (rc != 0)
		fail_msg("%s", cause);
	def = config_defaults();
	assert_non_null(def);
	assert_config_equal(shipped, def, true, true);
	config_free(def);
	config_free(shipped);
	free(path);
}

/*
 * Uncomment every "# key = value" and "# [section]" line of the shipped
 * file: every documented key must exist and its documented default must
 * load to the same value as the code's (plugin_dir aside).
 */
static void
test_shipped_conf_uncommented(void **state)
{
	struct config *c, *def;
	char *path, *text, *out, *o;
	const char *line, *eol, *k;

	(void)state;
	path = srcdir_path("etc/kgymd.conf");
	text = read_text(path);
	out = calloc(1, strlen(text) + 1);
	assert_non_null(out);
	o = out;
	for (line = text; *line != '\0'; line = *eol ? eol + 1 : eol) {
		eol = strchr(line, '\n');
		if (eol == NULL)
			eol = line + strlen(line);
		if (strncmp(line, "# ", 2) == 0) {
			for (k = line + 2; (*k >= 'a' && *k <= 'z') || *k == '_'; k++)
				;
			/* "# [plugin.nvrtc]", not "# [plugin.NAME] sections: ..." */
			if ((k > line + 2 && strncmp(k, " =", 2) == 0) ||
			    (line[2] == '[' && eol[-1] == ']' &&
			    memchr(line + 2, ' ', (size_t)(eol - line - 2)) == NULL))
				line += 2;
		}
		memcpy(o, line, (size_t)(eol - line));
		o += eol - line;
		*o++ = '\n';
	}
	*o = '\0';

	c = load_ok(out);
	def = config_defaults();
	assert_non_null(def);
	/* The example plugin sections are there now. */
	assert_int_equal(c->nplugins, 3);
	assert_string_equal(c->plugins[0].name, "nvrtc");
	assert_string_equal(config_plugin_get(c, "nvrtc", "guard"), "yes");
	assert_string_equal(c->plugins[1].name, "kernelbench");
	assert_string_equal(config_plugin_get(c, "kernelbench", "arch"), "sm_90");
	assert_string_equal(c->plugins[2].name, "python");
	assert_string_equal(config_plugin_get(c, "python", "interpreter"), "/usr/bin/python3");
	assert_config_equal(c, def, false, false);
	config_free(c);
	config_free(def);
	free(out);
	free(text);
	free(path);
}

static void
test_man_page_lists_every_key(void **state)
{
	struct config_key_info info;
	char *path, *text, *entry;
	size_t i;

	(void)state;
	path = srcdir_path("man/kgymd.conf.5");
	text = read_text(path);
	for (i = 0; config_key_info(i, &info) == 0; i++) {
		entry = xstrdup_printf("\n.BI \"%s = \"", info.name);
		if (strstr(text, entry) == NULL)
			fail_msg("%s: no entry %s", path, entry + 1);
		free(entry);
	}
	free(text);
	free(path);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_every_key),
		cmocka_unit_test(test_auto_workers),
		cmocka_unit_test(test_value_errors),
		cmocka_unit_test(test_structure_errors),
		cmocka_unit_test(test_first_error_wins),
		cmocka_unit_test(test_missing_file),
		cmocka_unit_test(test_suffixes),
		cmocka_unit_test(test_gpus),
		cmocka_unit_test(test_user_names),
		cmocka_unit_test(test_plugin_sections),
		cmocka_unit_test(test_plugin_long_name),
		cmocka_unit_test(test_syntax_details),
		cmocka_unit_test(test_uid_logic),
		cmocka_unit_test(test_own_uid_not_root),
		cmocka_unit_test(test_reload),
		cmocka_unit_test(test_key_table),
		cmocka_unit_test(test_cluster),
		cmocka_unit_test(test_shipped_conf_lists_every_key),
		cmocka_unit_test(test_shipped_conf_is_defaults),
		cmocka_unit_test(test_shipped_conf_uncommented),
		cmocka_unit_test(test_man_page_lists_every_key),
	};

	return cmocka_run_group_tests(tests, setup_dir, teardown_dir);
}
