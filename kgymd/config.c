/*
 * config.c -- kgymd.conf: parsing, checking, defaults and reload.
 *
 * inih splits the file into (section, key, value); everything else is
 * driven by one table, config_keys[], that says for every key its section,
 * its default (as text, parsed by the same code as the file), its parser and
 * range, where it lands in struct config, and whether SIGHUP may change it.
 * config_defaults() and config_apply_reload() walk the same table, and the
 * unit tests compare it with etc/kgymd.conf and kgymd.conf(5), so the code
 * and the documentation cannot drift apart.
 *
 * A configuration is checked whole before anyone sees it: config_load()
 * stops at the first error and reports it as "file:line: key: reason", and
 * a running daemon keeps its old configuration when a reload fails.
 * [plugin.NAME] sections are not interpreted here; their keys are kept raw
 * and handed to that plugin only (config_plugin_get()).
 */
#include "config.h"

#include <sys/socket.h>
#include <sys/un.h>

#include <errno.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <ini.h>

#include "kgymd.h"

#ifndef KGYM_PLUGINDIR
#define KGYM_PLUGINDIR "/usr/lib/kgymd/plugins"
#endif

#define CONFIG_MAX_GPUS		64
#define CONFIG_KIB		INT64_C(1024)
#define CONFIG_MIB		(CONFIG_KIB * 1024)
#define CONFIG_GIB		(CONFIG_MIB * 1024)
#define CONFIG_TIB		(CONFIG_GIB * 1024)
#define CONFIG_DAY		INT64_C(86400)
#define CONFIG_SUN_PATH_MAX	sizeof(((struct sockaddr_un *)0)->sun_path)

/* How a value is held in struct config: drives compare, copy and free. */
enum config_store {
	CS_STR,			/* char * */
	CS_INT,			/* int */
	CS_SIZE,		/* size_t */
	CS_I64,			/* int64_t */
	CS_DOUBLE,		/* double */
	CS_BOOL,		/* bool */
	CS_GPUS,		/* gpus_all, gpus, ngpus */
	CS_IDS,			/* uid_t or gid_t * at offset, size_t at count_offset */
};

struct config_key {
	const char *section;
	const char *name;
	const char *def;		/* default, in the file's syntax */
	/*
	 * Parse `value` and store it in `config`; on failure -EINVAL with
	 * what was expected in *ret_reason (without the key name, the
	 * caller adds it), or -ENOMEM.
	 */
	int (*parse)(const struct config_key *key, const char *value,
	    struct config *config, char **ret_reason);
	enum config_store store;
	size_t offset;
	size_t count_offset;		/* CS_IDS */
	int64_t min, max;		/* inclusive; meaning set by the parser */
	bool reloadable;
	const char *doc;
};

static int config_parse_path(const struct config_key *, const char *,
    struct config *, char **);
static int config_parse_pathlist(const struct config_key *, const char *,
    struct config *, char **);
static int config_parse_octal(const struct config_key *, const char *,
    struct config *, char **);
static int config_parse_count(const struct config_key *, const char *,
    struct config *, char **);
static int config_parse_int(const struct config_key *, const char *,
    struct config *, char **);
static int config_parse_bytes(const struct config_key *, const char *,
    struct config *, char **);
static int config_parse_seconds(const struct config_key *, const char *,
    struct config *, char **);
static int config_parse_timeout(const struct config_key *, const char *,
    struct config *, char **);
static int config_parse_log_level(const struct config_key *, const char *,
    struct config *, char **);
static int config_parse_store_sync(const struct config_key *, const char *,
    struct config *, char **);
static int config_parse_bool(const struct config_key *, const char *,
    struct config *, char **);
static int config_parse_gpus(const struct config_key *, const char *,
    struct config *, char **);
static int config_parse_users(const struct config_key *, const char *,
    struct config *, char **);
static int config_parse_groups(const struct config_key *, const char *,
    struct config *, char **);
static int config_parse_redis(const struct config_key *, const char *,
    struct config *, char **);
static int config_parse_node_id(const struct config_key *, const char *,
    struct config *, char **);
static int config_parse_optional_path(const struct config_key *, const char *,
    struct config *, char **);

#define OFF(field)	offsetof(struct config, field)

/*
 * Order is the order of etc/kgymd.conf and kgymd.conf(5).  For durations
 * min/max are seconds; for paths max is the longest length (0: no limit).
 */
/* clang-format off */
static const struct config_key config_keys[] = {
	{ "kgymd", "socket", "/run/kgym/kgymd.sock", config_parse_path, CS_STR,
	    OFF(socket), 0, 0, CONFIG_SUN_PATH_MAX - 1, false,
	    "path of the control socket" },
	{ "kgymd", "socket_mode", "0660", config_parse_octal, CS_INT,
	    OFF(socket_mode), 0, 0, 0777, false,
	    "permissions of the control socket (octal)" },
	{ "kgymd", "state_dir", "/var/lib/kgym", config_parse_path, CS_STR,
	    OFF(state_dir), 0, 0, 0, false,
	    "directory of the task store" },
	{ "kgymd", "plugin_dir", KGYM_PLUGINDIR, config_parse_pathlist, CS_STR,
	    OFF(plugin_dir), 0, 0, 0, false,
	    "colon-separated list of directories scanned for plugins" },
	{ "kgymd", "gpus", "all", config_parse_gpus, CS_GPUS,
	    0, 0, 0, CONFIG_MAX_GPUS - 1, false,
	    "GPUs to use: all, none or a list of indices" },
	{ "kgymd", "workers_per_gpu", "auto", config_parse_count, CS_INT,
	    OFF(workers_per_gpu), 0, 1, 64, false,
	    "worker processes per GPU (auto: from the CPUs and GPU memory)" },
	{ "kgymd", "max_running_tasks", "256", config_parse_int, CS_INT,
	    OFF(max_running_tasks), 0, 1, 100000, true,
	    "tasks dispatched at once" },
	{ "kgymd", "max_queued_tasks", "1000000", config_parse_int, CS_INT,
	    OFF(max_queued_tasks), 0, 1, 100000000, true,
	    "queued tasks beyond which submit answers queue_full" },
	{ "kgymd", "max_request_bytes", "4M", config_parse_bytes, CS_SIZE,
	    OFF(max_request_bytes), 0, CONFIG_KIB, CONFIG_GIB, true,
	    "longest request line; a longer one closes the connection" },
	{ "kgymd", "max_input_bytes", "64M", config_parse_bytes, CS_SIZE,
	    OFF(max_input_bytes), 0, CONFIG_KIB, 64 * CONFIG_GIB, true,
	    "unfinished request bytes held for all connections together; past it: busy" },
	{ "kgymd", "max_reply_backlog", "64M", config_parse_bytes, CS_SIZE,
	    OFF(max_reply_backlog), 0, CONFIG_MIB, 16 * CONFIG_GIB, true,
	    "unsent reply bytes after which a client that does not read is dropped" },
	{ "kgymd", "max_connections", "1024", config_parse_int, CS_INT,
	    OFF(max_connections), 0, 1, 65536, true,
	    "client connections at once" },
	{ "kgymd", "admin_connections", "8", config_parse_int, CS_INT,
	    OFF(admin_connections), 0, 0, 65536, true,
	    "connections of max_connections kept for admin peers" },
	{ "kgymd", "idle_timeout", "5m", config_parse_seconds, CS_I64,
	    OFF(idle_timeout_s), 0, 1, CONFIG_DAY, true,
	    "a connection that sends no request and waits for nothing this long is closed" },
	{ "kgymd", "max_batch_tasks", "10000", config_parse_int, CS_INT,
	    OFF(max_batch_tasks), 0, 1, 1000000, true,
	    "tasks in one submit request" },
	{ "kgymd", "max_attempts", "3", config_parse_int, CS_INT,
	    OFF(max_attempts), 0, 1, 100, true,
	    "dispatches of a task before it fails with SYSTEM_ERROR" },
	{ "kgymd", "result_ttl", "7d", config_parse_seconds, CS_I64,
	    OFF(result_ttl_s), 0, 1, 3650 * CONFIG_DAY, true,
	    "how long finished tasks are kept" },
	{ "kgymd", "default_timeout", "600", config_parse_timeout, CS_DOUBLE,
	    OFF(default_timeout_s), 0, 0, 30 * CONFIG_DAY, true,
	    "timeout of a task that sets none" },
	{ "kgymd", "max_timeout", "3600", config_parse_timeout, CS_DOUBLE,
	    OFF(max_timeout_s), 0, 0, 30 * CONFIG_DAY, true,
	    "largest timeout_s a task may ask for" },
	{ "kgymd", "shutdown_grace", "30s", config_parse_seconds, CS_I64,
	    OFF(shutdown_grace_s), 0, 0, 3600, true,
	    "at shutdown, how long running tasks may go on before they are requeued" },
	{ "kgymd", "log_level", "info", config_parse_log_level, CS_INT,
	    OFF(log_level), 0, 0, 0, true,
	    "error, warning, info or debug" },
	{ "kgymd", "store_sync", "normal", config_parse_store_sync, CS_BOOL,
	    OFF(store_sync_full), 0, 0, 0, false,
	    "normal or full: fsync of the task store at every commit" },
	{ "kgymd", "allow_uids", "", config_parse_users, CS_IDS,
	    OFF(allow_uids), OFF(nallow_uids), 0, 0, true,
	    "users allowed to connect besides root and kgymd's own user" },
	{ "kgymd", "allow_gids", "", config_parse_groups, CS_IDS,
	    OFF(allow_gids), OFF(nallow_gids), 0, 0, true,
	    "groups whose members may connect" },
	{ "kgymd", "admin_uids", "", config_parse_users, CS_IDS,
	    OFF(admin_uids), OFF(nadmin_uids), 0, 0, true,
	    "users allowed drain and shutdown besides root and kgymd's own user" },
	{ "kgymd", "gateway_uids", "", config_parse_users, CS_IDS,
	    OFF(gateway_uids), OFF(ngateway_uids), 0, 0, true,
	    "users whose requests may name an on_behalf_of principal (kgymd-http)" },
	{ "workers", "path", KGYM_LIBEXECDIR "/kgymd-worker", config_parse_path, CS_STR,
	    OFF(worker_path), 0, 0, 0, false,
	    "the kgymd-worker program" },
	{ "workers", "cpu_workers", "auto", config_parse_count, CS_INT,
	    OFF(cpu_workers), 0, 0, 1024, false,
	    "CPU-only workers (compile jobs, CPU jobs; auto: from the CPUs)" },
	{ "workers", "gpu_memory", "0", config_parse_bytes, CS_I64,
	    OFF(gpu_memory_bytes), 0, 0, 64 * CONFIG_TIB, false,
	    "GPU memory jobs may declare per GPU (0: what each GPU reports)" },
	{ "workers", "max_jobs_per_worker", "100", config_parse_int, CS_INT,
	    OFF(max_jobs_per_worker), 0, 1, 1000000, true,
	    "jobs a worker runs before it is replaced" },
	{ "workers", "max_message_bytes", "64M", config_parse_bytes, CS_SIZE,
	    OFF(max_message_bytes), 0, CONFIG_MIB, CONFIG_GIB, true,
	    "largest message (a job's result) a worker may send" },
	{ "workers", "compile_deadline", "240", config_parse_timeout, CS_DOUBLE,
	    OFF(compile_deadline_s), 0, 0, CONFIG_DAY, true,
	    "deadline of a job's compile phase" },
	{ "workers", "correctness_deadline", "120", config_parse_timeout, CS_DOUBLE,
	    OFF(correctness_deadline_s), 0, 0, CONFIG_DAY, true,
	    "deadline of a job's correctness phase" },
	{ "workers", "timing_deadline", "300", config_parse_timeout, CS_DOUBLE,
	    OFF(timing_deadline_s), 0, 0, CONFIG_DAY, true,
	    "deadline of a job's timing phase (counted once the exclusive lock is held)" },
	{ "workers", "job_deadline", "120", config_parse_timeout, CS_DOUBLE,
	    OFF(job_deadline_s), 0, 0, CONFIG_DAY, true,
	    "deadline of any other phase" },
	{ "workers", "kill_grace", "2", config_parse_timeout, CS_DOUBLE,
	    OFF(kill_grace_s), 0, 0, 3600, true,
	    "time between SIGTERM and SIGKILL for a job past its deadline" },
	{ "workers", "start_timeout", "120", config_parse_timeout, CS_DOUBLE,
	    OFF(worker_start_timeout_s), 0, 0, 3600, true,
	    "time a new worker has to initialise and say hello" },
	{ "sandbox", "enabled", "yes", config_parse_bool, CS_BOOL,
	    OFF(sandbox_enabled), 0, 0, 0, false,
	    "run jobs under rlimits, seccomp and Landlock" },
	{ "sandbox", "job_memory", "64G", config_parse_bytes, CS_I64,
	    OFF(job_memory_bytes), 0, 64 * CONFIG_MIB, 16 * CONFIG_TIB, false,
	    "address space of a job (RLIMIT_AS)" },
	{ "sandbox", "job_max_files", "256", config_parse_int, CS_INT,
	    OFF(job_max_files), 0, 16, 65536, false,
	    "open files of a job (RLIMIT_NOFILE)" },
	{ "sandbox", "job_max_processes", "64", config_parse_int, CS_INT,
	    OFF(job_max_processes), 0, 1, 4096, false,
	    "processes and threads of a job (RLIMIT_NPROC)" },
	{ "sandbox", "job_max_file_size", "1G", config_parse_bytes, CS_I64,
	    OFF(job_max_file_bytes), 0, CONFIG_MIB, CONFIG_TIB, false,
	    "largest file a job may write (RLIMIT_FSIZE)" },
	{ "cluster", "redis", "none", config_parse_redis, CS_STR,
	    OFF(cluster_redis), 0, 0, 0, false,
	    "the shared queue: redis://HOST[:PORT][/DB], a socket path, or none" },
	{ "cluster", "node_id", "", config_parse_node_id, CS_STR,
	    OFF(cluster_node_id), 0, 0, 0, false,
	    "this node's name in the shared queue (empty: the host name)" },
	{ "cluster", "lease", "30", config_parse_seconds, CS_I64,
	    OFF(cluster_lease_s), 0, 1, 3600, false,
	    "a claimed task not renewed this long is reclaimed by another node" },
	{ "cluster", "max_attempts", "3", config_parse_int, CS_INT,
	    OFF(cluster_max_attempts), 0, 1, 100, false,
	    "claims of one task before it fails with SYSTEM_ERROR" },
	{ "cluster", "result_ttl", "1d", config_parse_seconds, CS_I64,
	    OFF(cluster_result_ttl_s), 0, 60, 365 * CONFIG_DAY, false,
	    "how long Redis keeps a task once it has ended" },
	{ "cluster", "password_file", "none", config_parse_optional_path, CS_STR,
	    OFF(cluster_password_file), 0, 0, 0, false,
	    "file holding the Redis password (AUTH), or none" },
};
/* clang-format on */

#define CONFIG_NKEYS	(sizeof config_keys / sizeof config_keys[0])

/* State of one config_load() while inih runs. */
struct config_parse {
	const char *path;
	FILE *fp;
	struct config *config;
	int lineno;			/* line the reader handed to inih last */
	char section[256];		/* current section, whole (see reader) */
	int seen[CONFIG_NKEYS];		/* line a key was set on, 0: not yet */
	int error;			/* first error: -errno, 0 while none */
	char *cause;			/* its "path:line: reason" */
	int cause_line;
	int read_errno;
};

#define FIELD(config, key, type)	((type *)((char *)(config) + (key)->offset))
#define CFIELD(config, key, type) \
	((const type *)((const char *)(config) + (key)->offset))

/* ------------------------------------------------------------ messages */

static char *
config_printf(const char *fmt, ...)
{
	va_list ap;
	char *s;
	int rc;

	va_start(ap, fmt);
	rc = vasprintf(&s, fmt, ap);
	va_end(ap);
	return rc < 0 ? NULL : s;
}

/* -EINVAL with *ret_reason set, or -ENOMEM when even that fails. */
static int
config_reason(char **ret_reason, const char *fmt, ...)
{
	va_list ap;
	char *s;
	int rc;

	va_start(ap, fmt);
	rc = vasprintf(&s, fmt, ap);
	va_end(ap);
	if (rc < 0)
		return -ENOMEM;
	*ret_reason = s;
	return -EINVAL;
}

/* 1048576 -> "1M": the largest suffix that divides exactly. */
static void
config_format_bytes(int64_t v, char *buf, size_t len)
{
	static const char suffix[] = "TGMK";
	int64_t unit = CONFIG_TIB;
	size_t i;

	for (i = 0; i < 4; i++, unit /= 1024) {
		if (v != 0 && v % unit == 0) {
			snprintf(buf, len, "%lld%c", (long long)(v / unit), suffix[i]);
			return;
		}
	}
	snprintf(buf, len, "%lld", (long long)v);
}

/* 604800 -> "7d". */
static void
config_format_seconds(int64_t v, char *buf, size_t len)
{
	static const struct {
		int64_t unit;
		char suffix;
	} units[] = { { CONFIG_DAY, 'd' }, { 3600, 'h' }, { 60, 'm' } };
	size_t i;

	for (i = 0; i < sizeof units / sizeof units[0]; i++) {
		if (v != 0 && v % units[i].unit == 0) {
			snprintf(buf, len, "%lld%c", (long long)(v / units[i].unit),
			    units[i].suffix);
			return;
		}
	}
	snprintf(buf, len, "%llds", (long long)v);
}

/* ------------------------------------------------------------- numbers */

static bool
config_all_digits(const char *s, size_t len)
{
	size_t i;

	if (len == 0)
		return false;
	for (i = 0; i < len; i++)
		if (s[i] < '0' || s[i] > '9')
			return false;
	return true;
}

/*
 * A decimal integer of `len` characters, nothing else (no sign, no blanks:
 * strtoll alone would take " -1" and "12abc").  -ERANGE past INT64_MAX.
 */
static int
config_decimal(const char *s, size_t len, int64_t *ret)
{
	int64_t v = 0;
	size_t i;

	if (!config_all_digits(s, len))
		return -EINVAL;
	for (i = 0; i < len; i++) {
		if (v > (INT64_MAX - (s[i] - '0')) / 10)
			return -ERANGE;
		v = v * 10 + (s[i] - '0');
	}
	*ret = v;
	return 0;
}

/* An int in the key's range; `alternative` names what else was accepted. */
static int
config_int_in_range(const struct config_key *key, const char *value,
    struct config *config, const char *alternative, char **ret_reason)
{
	int64_t v;

	if (config_decimal(value, strlen(value), &v) < 0 || v < key->min ||
	    v > key->max)
		return config_reason(ret_reason,
		    "expected %san integer from %lld to %lld, got \"%s\"", alternative,
		    (long long)key->min, (long long)key->max, value);
	*FIELD(config, key, int) = (int)v;
	return 0;
}

static int
config_parse_int(const struct config_key *key, const char *value,
    struct config *config, char **ret_reason)
{
	return config_int_in_range(key, value, config, "", ret_reason);
}

/* An integer in range, or "auto" (CONFIG_AUTO, resolved when the pool starts). */
static int
config_parse_count(const struct config_key *key, const char *value,
    struct config *config, char **ret_reason)
{
	if (strcmp(value, "auto") == 0) {
		*FIELD(config, key, int) = CONFIG_AUTO;
		return 0;
	}
	return config_int_in_range(key, value, config, "\"auto\" or ", ret_reason);
}

int
config_auto_gpu_workers(int cpus, size_t ngpus, uint64_t gpu_memory_bytes)
{
	int n = cpus / (int)(ngpus > 0 ? ngpus : 1) / 4;

	if (gpu_memory_bytes > 0 && (uint64_t)n > gpu_memory_bytes / (16ULL << 30))
		n = (int)(gpu_memory_bytes / (16ULL << 30));
	return n < 1 ? 1 : n > 4 ? 4 : n;
}

int
config_auto_cpu_workers(int cpus)
{
	int n = cpus / 4;

	return n < 2 ? 2 : n > 16 ? 16 : n;
}

static int
config_parse_octal(const struct config_key *key, const char *value,
    struct config *config, char **ret_reason)
{
	size_t len = strlen(value), i;
	int64_t v = 0;

	for (i = 0; i < len && len <= 4; i++) {
		if (value[i] < '0' || value[i] > '7')
			break;
		v = v * 8 + (value[i] - '0');
	}
	if (len == 0 || len > 4 || i != len || v < key->min || v > key->max)
		return config_reason(ret_reason,
		    "expected an octal mode from 0 to 0%llo, got \"%s\"",
		    (long long)key->max, value);
	*FIELD(config, key, int) = (int)v;
	return 0;
}

/* "64G": an integer with an optional K, M, G or T suffix (powers of 1024). */
static int
config_parse_bytes(const struct config_key *key, const char *value,
    struct config *config, char **ret_reason)
{
	size_t len = strlen(value);
	int64_t v, unit = 1;
	char lo[32], hi[32];

	if (len > 0) {
		switch (value[len - 1]) {
		case 'K': case 'k': unit = CONFIG_KIB; break;
		case 'M': case 'm': unit = CONFIG_MIB; break;
		case 'G': case 'g': unit = CONFIG_GIB; break;
		case 'T': case 't': unit = CONFIG_TIB; break;
		}
		if (unit != 1)
			len--;
	}
	if (config_decimal(value, len, &v) < 0 || v > INT64_MAX / unit ||
	    v * unit < key->min || v * unit > key->max) {
		config_format_bytes(key->min, lo, sizeof lo);
		config_format_bytes(key->max, hi, sizeof hi);
		return config_reason(ret_reason,
		    "expected a size from %s to %s (bytes, or with suffix K, M, G "
		    "or T), got \"%s\"", lo, hi, value);
	}
	v *= unit;
	if (key->store == CS_SIZE)
		*FIELD(config, key, size_t) = (size_t)v;
	else
		*FIELD(config, key, int64_t) = v;
	return 0;
}

static int64_t
config_duration_unit(char c)
{
	switch (c) {
	case 's': return 1;
	case 'm': return 60;
	case 'h': return 3600;
	case 'd': return CONFIG_DAY;
	}
	return 0;
}

/*
 * "7d", "90m", "600": a number of seconds or one with suffix s, m, h or d.
 * With `fraction`, "1.5h" and "0.25" too.  The result is in seconds.
 */
static int
config_duration(const char *value, bool fraction, double *ret)
{
	size_t len = strlen(value), dot, ndigits, i;
	int64_t unit = 1, whole, part;
	double v, div = 1;

	if (len > 0 && config_duration_unit(value[len - 1]) != 0)
		unit = config_duration_unit(value[--len]);
	for (dot = 0; dot < len && value[dot] != '.'; dot++)
		;
	if (config_decimal(value, dot, &whole) < 0)
		return -EINVAL;
	v = (double)whole;
	if (dot < len) {
		/* At most 9 digits after the point: `part` cannot overflow. */
		ndigits = len - dot - 1;
		if (!fraction || ndigits > 9 ||
		    config_decimal(value + dot + 1, ndigits, &part) < 0)
			return -EINVAL;
		for (i = 0; i < ndigits; i++)
			div *= 10;
		v += (double)part / div;
	}
	*ret = v * (double)unit;
	return 0;
}

static int
config_parse_seconds(const struct config_key *key, const char *value,
    struct config *config, char **ret_reason)
{
	char lo[32], hi[32];
	double v;

	if (config_duration(value, false, &v) < 0 || v < (double)key->min ||
	    v > (double)key->max) {
		config_format_seconds(key->min, lo, sizeof lo);
		config_format_seconds(key->max, hi, sizeof hi);
		return config_reason(ret_reason,
		    "expected a duration from %s to %s (seconds, or with suffix "
		    "s, m, h or d), got \"%s\"", lo, hi, value);
	}
	*FIELD(config, key, int64_t) = (int64_t)v;
	return 0;
}

/* A timeout: fractions allowed, above 0 (a zero timeout would mean none). */
static int
config_parse_timeout(const struct config_key *key, const char *value,
    struct config *config, char **ret_reason)
{
	char hi[32];
	double v;

	if (config_duration(value, true, &v) < 0 || !(v > 0) ||
	    v > (double)key->max) {
		config_format_seconds(key->max, hi, sizeof hi);
		return config_reason(ret_reason,
		    "expected a duration above 0 and at most %s (seconds, or with "
		    "suffix s, m, h or d), got \"%s\"", hi, value);
	}
	*FIELD(config, key, double) = v;
	return 0;
}

/* --------------------------------------------------------------- words */

static int
config_parse_log_level(const struct config_key *key, const char *value,
    struct config *config, char **ret_reason)
{
	int level;

	level = log_level_parse(value);
	if (level < 0)
		return config_reason(ret_reason,
		    "expected error, warning, info or debug, got \"%s\"", value);
	*FIELD(config, key, int) = level;
	return 0;
}

static int
config_parse_store_sync(const struct config_key *key, const char *value,
    struct config *config, char **ret_reason)
{
	bool full;

	if (strcasecmp(value, "full") == 0)
		full = true;
	else if (strcasecmp(value, "normal") == 0)
		full = false;
	else
		return config_reason(ret_reason,
		    "expected normal or full, got \"%s\"", value);
	*FIELD(config, key, bool) = full;
	return 0;
}

static int
config_parse_bool(const struct config_key *key, const char *value,
    struct config *config, char **ret_reason)
{
	static const char *const yes[] = { "yes", "true", "on", "1" };
	static const char *const no[] = { "no", "false", "off", "0" };
	size_t i;

	for (i = 0; i < sizeof yes / sizeof yes[0]; i++) {
		if (strcasecmp(value, yes[i]) == 0) {
			*FIELD(config, key, bool) = true;
			return 0;
		}
		if (strcasecmp(value, no[i]) == 0) {
			*FIELD(config, key, bool) = false;
			return 0;
		}
	}
	return config_reason(ret_reason,
	    "expected yes or no (or true, false, on, off, 1, 0), got \"%s\"", value);
}

/* --------------------------------------------------------------- paths */

static int
config_parse_path(const struct config_key *key, const char *value,
    struct config *config, char **ret_reason)
{
	char **field = FIELD(config, key, char *);
	char *copy;

	if (value[0] != '/')
		return config_reason(ret_reason,
		    "expected an absolute path, got \"%s\"", value);
	/* A socket path must fit sun_path with its terminating NUL. */
	if (key->max > 0 && strlen(value) > (size_t)key->max)
		return config_reason(ret_reason,
		    "expected a path of at most %lld bytes, got %zu bytes",
		    (long long)key->max, strlen(value));
	if ((copy = strdup(value)) == NULL)
		return -ENOMEM;
	free(*field);
	*field = copy;
	return 0;
}

/* An absolute path, or "none" (held as ""). */
static int
config_parse_optional_path(const struct config_key *key, const char *value,
    struct config *config, char **ret_reason)
{
	char **field = FIELD(config, key, char *);
	char *copy;

	if (strcmp(value, "none") == 0)
		value = "";
	else if (value[0] != '/')
		return config_reason(ret_reason,
		    "expected an absolute path or none, got \"%s\"", value);
	if ((copy = strdup(value)) == NULL)
		return -ENOMEM;
	free(*field);
	*field = copy;
	return 0;
}

/* none (held as ""), redis://HOST[:PORT][/DB] or a socket path. */
static int
config_parse_redis(const struct config_key *key, const char *value,
    struct config *config, char **ret_reason)
{
	struct cluster_addr addr;
	char **field = FIELD(config, key, char *);
	char *copy;
	int rc;

	if (strcmp(value, "none") == 0)
		value = "";
	else if ((rc = cluster_url_parse(value, &addr, ret_reason)) < 0)
		return rc;
	if ((copy = strdup(value)) == NULL)
		return -ENOMEM;
	free(*field);
	*field = copy;
	return 0;
}

/* Empty (the host name at start), or 1 to 64 of [A-Za-z0-9._-]. */
static int
config_parse_node_id(const struct config_key *key, const char *value,
    struct config *config, char **ret_reason)
{
	char **field = FIELD(config, key, char *);
	size_t len = strlen(value);
	char *copy;

	if (len > 64 || strspn(value, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	    "0123456789._-") != len)
		return config_reason(ret_reason, "expected 1 to 64 characters of A-Z, a-z, "
		    "0-9, '.', '_' and '-' (or nothing for the host name), got \"%s\"", value);
	if ((copy = strdup(value)) == NULL)
		return -ENOMEM;
	free(*field);
	*field = copy;
	return 0;
}

static int
config_parse_pathlist(const struct config_key *key, const char *value,
    struct config *config, char **ret_reason)
{
	char **field = FIELD(config, key, char *);
	size_t len = strlen(value);
	char *copy;

	/* An empty entry would mean the current directory: refuse it. */
	if (len == 0 || value[0] == ':' || value[len - 1] == ':' ||
	    strstr(value, "::") != NULL)
		return config_reason(ret_reason,
		    "expected a colon-separated list of directories, got \"%s\"",
		    value);
	if ((copy = strdup(value)) == NULL)
		return -ENOMEM;
	free(*field);
	*field = copy;
	return 0;
}

/* ---------------------------------------------------------------- lists */

/*
 * Next entry of a comma-separated list, blanks around it trimmed.  Once
 * the list is used up *cursor is NULL.  An empty list has one empty entry.
 */
static bool
config_list_next(const char **cursor, const char **ret_entry, size_t *ret_len)
{
	const char *s = *cursor, *end;

	if (s == NULL)
		return false;
	if ((end = strchr(s, ',')) != NULL) {
		*cursor = end + 1;
	} else {
		end = s + strlen(s);
		*cursor = NULL;
	}
	while (s < end && (*s == ' ' || *s == '\t'))
		s++;
	while (end > s && (end[-1] == ' ' || end[-1] == '\t'))
		end--;
	*ret_entry = s;
	*ret_len = (size_t)(end - s);
	return true;
}

static size_t
config_list_count(const char *value)
{
	size_t n = 1;

	for (; *value != '\0'; value++)
		if (*value == ',')
			n++;
	return n;
}

static int
config_parse_gpus(const struct config_key *key, const char *value,
    struct config *config, char **ret_reason)
{
	bool listed[CONFIG_MAX_GPUS] = { false };
	const char *cursor = value, *entry;
	size_t len, n = 0;
	int64_t index;
	int *gpus = NULL;

	if (strcasecmp(value, "all") == 0 || strcasecmp(value, "none") == 0) {
		free(config->gpus);
		config->gpus = NULL;
		config->ngpus = 0;
		config->gpus_all = strcasecmp(value, "all") == 0;
		return 0;
	}
	if ((gpus = calloc(config_list_count(value), sizeof *gpus)) == NULL)
		return -ENOMEM;
	while (config_list_next(&cursor, &entry, &len)) {
		if (config_decimal(entry, len, &index) < 0 || index < key->min ||
		    index > key->max) {
			free(gpus);
			return config_reason(ret_reason,
			    "expected all, none or a comma-separated list of GPU "
			    "indices from %lld to %lld, got \"%s\"",
			    (long long)key->min, (long long)key->max, value);
		}
		if (listed[index]) {
			free(gpus);
			return config_reason(ret_reason,
			    "GPU %lld is listed twice in \"%s\"", (long long)index,
			    value);
		}
		listed[index] = true;
		gpus[n++] = (int)index;
	}
	free(config->gpus);
	config->gpus = gpus;
	config->ngpus = n;
	config->gpus_all = false;
	return 0;
}

/* getpwnam_r(3) and getgrnam_r(3) say "not found" in several ways. */
static bool
config_lookup_missing(int rc)
{
	return rc == 0 || rc == ENOENT || rc == ESRCH || rc == EBADF || rc == EPERM;
}

/* Resolve a user (or, with `group`, a group) name.  -ENOENT when unknown. */
static int
config_lookup_id(const char *name, bool group, unsigned int *ret_id)
{
	struct passwd pw, *pwp = NULL;
	struct group gr, *grp = NULL;
	long hint = sysconf(group ? _SC_GETGR_R_SIZE_MAX : _SC_GETPW_R_SIZE_MAX);
	size_t size = hint > 0 ? (size_t)hint : 1024;
	char *buf = NULL, *grown;
	bool found;
	int rc;

	for (;;) {
		if ((grown = realloc(buf, size)) == NULL) {
			free(buf);
			return -ENOMEM;
		}
		buf = grown;
		if (group)
			rc = getgrnam_r(name, &gr, buf, size, &grp);
		else
			rc = getpwnam_r(name, &pw, buf, size, &pwp);
		/* A group with many members needs a large buffer. */
		if (rc != ERANGE || size >= 16 * 1024 * 1024)
			break;
		size *= 2;
	}
	found = group ? grp != NULL : pwp != NULL;
	if (rc == 0 && found)
		*ret_id = group ? gr.gr_gid : pw.pw_uid;
	free(buf);
	if (rc == 0 && found)
		return 0;
	if (config_lookup_missing(rc))
		return -ENOENT;
	return -rc;
}

/*
 * "root, 1000, kgym": user names or numeric uids (group names or gids with
 * `group`); empty is an empty list.  Names are resolved now, so a typo
 * fails at load time rather than locking someone out later.
 */
static int
config_parse_ids(const struct config_key *key, const char *value, bool group,
    struct config *config, char **ret_reason)
{
	const char *what = group ? "group" : "user";
	const char *cursor = value, *entry;
	unsigned int *ids = NULL;
	size_t len, n = 0;
	int64_t num;
	char *name;
	int rc;

	/* uid_t and gid_t are the same unsigned int on every Linux ABI. */
	_Static_assert(sizeof(uid_t) == sizeof(unsigned int) &&
	    sizeof(gid_t) == sizeof(unsigned int), "uid_t/gid_t size");

	if (value[strspn(value, " \t")] == '\0') {
		cursor = NULL;
	} else if ((ids = calloc(config_list_count(value), sizeof *ids)) == NULL) {
		return -ENOMEM;
	}
	while (config_list_next(&cursor, &entry, &len)) {
		if (len == 0) {
			rc = config_reason(ret_reason, "expected a comma-separated "
			    "list of %s names or %cids, got \"%s\"", what, what[0],
			    value);
			goto free_ids;
		}
		if (config_all_digits(entry, len)) {
			/* (uid_t)-1 means "no id" to chown(2) and setreuid(2). */
			if (config_decimal(entry, len, &num) < 0 ||
			    num >= (int64_t)UINT_MAX) {
				rc = config_reason(ret_reason, "%cid %.*s is out of "
				    "range", what[0], (int)len, entry);
				goto free_ids;
			}
			ids[n++] = (unsigned int)num;
			continue;
		}
		if ((name = strndup(entry, len)) == NULL) {
			rc = -ENOMEM;
			goto free_ids;
		}
		rc = config_lookup_id(name, group, &ids[n]);
		if (rc == -ENOENT)
			rc = config_reason(ret_reason, "unknown %s \"%s\"", what, name);
		else if (rc < 0 && rc != -ENOMEM)
			rc = config_reason(ret_reason, "cannot look up %s \"%s\": %s",
			    what, name, strerror(-rc));
		free(name);
		if (rc < 0)
			goto free_ids;
		n++;
	}
	free(*FIELD(config, key, unsigned int *));
	*FIELD(config, key, unsigned int *) = ids;
	*(size_t *)((char *)config + key->count_offset) = n;
	return 0;

free_ids:
	free(ids);
	return rc;
}

static int
config_parse_users(const struct config_key *key, const char *value,
    struct config *config, char **ret_reason)
{
	return config_parse_ids(key, value, false, config, ret_reason);
}

static int
config_parse_groups(const struct config_key *key, const char *value,
    struct config *config, char **ret_reason)
{
	return config_parse_ids(key, value, true, config, ret_reason);
}

/* ------------------------------------------------- values, generically */

static size_t *
config_count(struct config *config, const struct config_key *key)
{
	return (size_t *)((char *)config + key->count_offset);
}

static size_t
config_ccount(const struct config *config, const struct config_key *key)
{
	return *(const size_t *)((const char *)config + key->count_offset);
}

static void
config_value_clear(const struct config_key *key, struct config *config)
{
	switch (key->store) {
	case CS_STR:
		free(*FIELD(config, key, char *));
		*FIELD(config, key, char *) = NULL;
		break;
	case CS_GPUS:
		free(config->gpus);
		config->gpus = NULL;
		config->ngpus = 0;
		break;
	case CS_IDS:
		free(*FIELD(config, key, unsigned int *));
		*FIELD(config, key, unsigned int *) = NULL;
		*config_count(config, key) = 0;
		break;
	default:
		break;
	}
}

static bool
config_value_equal(const struct config_key *key, const struct config *a,
    const struct config *b)
{
	size_t n;

	switch (key->store) {
	case CS_STR:
		return strcmp(*CFIELD(a, key, char *), *CFIELD(b, key, char *)) == 0;
	case CS_INT:
		return *CFIELD(a, key, int) == *CFIELD(b, key, int);
	case CS_SIZE:
		return *CFIELD(a, key, size_t) == *CFIELD(b, key, size_t);
	case CS_I64:
		return *CFIELD(a, key, int64_t) == *CFIELD(b, key, int64_t);
	case CS_DOUBLE:
		return *CFIELD(a, key, double) == *CFIELD(b, key, double);
	case CS_BOOL:
		return *CFIELD(a, key, bool) == *CFIELD(b, key, bool);
	case CS_GPUS:
		return a->gpus_all == b->gpus_all && a->ngpus == b->ngpus &&
		    (a->ngpus == 0 ||
		    memcmp(a->gpus, b->gpus, a->ngpus * sizeof *a->gpus) == 0);
	case CS_IDS:
		n = config_ccount(a, key);
		return n == config_ccount(b, key) && (n == 0 ||
		    memcmp(*CFIELD(a, key, unsigned int *),
		    *CFIELD(b, key, unsigned int *), n * sizeof(unsigned int)) == 0);
	}
	return false;
}

static void *
config_memdup(const void *src, size_t size)
{
	void *copy;

	if (size == 0)
		return NULL;
	if ((copy = malloc(size)) != NULL)
		memcpy(copy, src, size);
	return copy;
}

/* Copy key's value from src into dst.  0 or -ENOMEM (dst unchanged). */
static int
config_value_copy(const struct config_key *key, struct config *dst,
    const struct config *src)
{
	unsigned int *ids;
	size_t n;
	char *s;
	int *gpus;

	switch (key->store) {
	case CS_STR:
		if ((s = strdup(*CFIELD(src, key, char *))) == NULL)
			return -ENOMEM;
		free(*FIELD(dst, key, char *));
		*FIELD(dst, key, char *) = s;
		break;
	case CS_INT:
		*FIELD(dst, key, int) = *CFIELD(src, key, int);
		break;
	case CS_SIZE:
		*FIELD(dst, key, size_t) = *CFIELD(src, key, size_t);
		break;
	case CS_I64:
		*FIELD(dst, key, int64_t) = *CFIELD(src, key, int64_t);
		break;
	case CS_DOUBLE:
		*FIELD(dst, key, double) = *CFIELD(src, key, double);
		break;
	case CS_BOOL:
		*FIELD(dst, key, bool) = *CFIELD(src, key, bool);
		break;
	case CS_GPUS:
		gpus = config_memdup(src->gpus, src->ngpus * sizeof *src->gpus);
		if (src->ngpus > 0 && gpus == NULL)
			return -ENOMEM;
		free(dst->gpus);
		dst->gpus = gpus;
		dst->ngpus = src->ngpus;
		dst->gpus_all = src->gpus_all;
		break;
	case CS_IDS:
		n = config_ccount(src, key);
		ids = config_memdup(*CFIELD(src, key, unsigned int *),
		    n * sizeof *ids);
		if (n > 0 && ids == NULL)
			return -ENOMEM;
		free(*FIELD(dst, key, unsigned int *));
		*FIELD(dst, key, unsigned int *) = ids;
		*config_count(dst, key) = n;
		break;
	}
	return 0;
}

/* ------------------------------------------------------------- parsing */

/* The section names kgymd.conf may have. */
static int
config_section_check(const char *section, size_t len, char **ret_reason)
{
	static const char plugin[] = "plugin.";
	size_t i;

	for (i = 0; i < CONFIG_NKEYS; i++)
		if (strlen(config_keys[i].section) == len &&
		    strncmp(config_keys[i].section, section, len) == 0)
			return 0;
	if (len >= sizeof plugin - 1 &&
	    strncmp(section, plugin, sizeof plugin - 1) == 0) {
		if (config_plugin_name_valid(section + sizeof plugin - 1,
		    len - (sizeof plugin - 1)))
			return 0;
		return config_reason(ret_reason, "bad section name [%.*s]: a "
		    "plugin name is 1 to %d characters of a-z, 0-9 and _",
		    (int)len, section, KGYM_NAME_MAX - 1);
	}
	/* kgymd-http's section of the shared file: its keys are its own to check. */
	if (len == 4 && strncmp(section, "http", 4) == 0)
		return 0;
	return config_reason(ret_reason, "unknown section [%.*s] (expected "
	    "[kgymd], [workers], [sandbox], [cluster], [http] or [plugin.NAME])", (int)len, section);
}

/*
 * Record the first error as "path:line: [key: ]reason" (consumes reason)
 * and return rc.  Later errors are not looked for.
 */
static int
config_fail(struct config_parse *ps, const char *key, int rc, char *reason)
{
	const char *text = reason != NULL ? reason : strerror(-rc);

	if (ps->error == 0) {
		ps->error = rc;
		ps->cause_line = ps->lineno;
		if (key != NULL)
			ps->cause = config_printf("%s:%d: %s: %s", ps->path,
			    ps->lineno, key, text);
		else
			ps->cause = config_printf("%s:%d: %s", ps->path,
			    ps->lineno, text);
	}
	free(reason);
	return rc;
}

/*
 * inih's line reader.  Reading the lines ourselves gives every handler call
 * its line number (the library is built without INI_HANDLER_LINENO), lets
 * us stop at the first error, refuse lines too long for inih's buffer
 * (which it would otherwise split silently) and check section names even
 * of sections without keys (inih reports only keys).  It also keeps the
 * whole section name: inih cuts the one it hands the handler at 49 bytes,
 * shorter than [plugin.NAME] may be.
 */
static char *
config_ini_reader(char *buf, int size, void *arg)
{
	struct config_parse *ps = arg;
	char *start, *end, *reason = NULL;
	size_t len;
	int c, rc;

	if (ps->error != 0)
		return NULL;
	errno = 0;
	if (fgets(buf, size, ps->fp) == NULL) {
		if (ferror(ps->fp))
			ps->read_errno = errno != 0 ? errno : EIO;
		return NULL;
	}
	ps->lineno++;
	len = strlen(buf);
	if (len > 0 && buf[len - 1] != '\n' && (c = getc(ps->fp)) != EOF) {
		ungetc(c, ps->fp);
		config_fail(ps, NULL, -EINVAL, config_printf("line is longer than "
		    "%d bytes", size - 2));
		return NULL;
	}
	/*
	 * inih takes an indented line for the continuation of the value
	 * before it; kgymd.conf has no multi-line values, and an indented key
	 * silently glued to the previous value would be a trap.  A UTF-8 byte
	 * order mark goes too, so that section lines look the same to inih
	 * and to us.
	 */
	start = buf;
	if (ps->lineno == 1 && strncmp(start, "\xef\xbb\xbf", 3) == 0)
		start += 3;
	start += strspn(start, " \t");
	if (start != buf)
		memmove(buf, start, strlen(start) + 1);
	if (buf[0] == '[' && (end = strchr(buf, ']')) != NULL) {
		len = (size_t)(end - buf - 1);
		rc = config_section_check(buf + 1, len, &reason);
		if (rc < 0) {
			config_fail(ps, NULL, rc, reason);
			return NULL;
		}
		/* A name that passed the check fits (at most 70 bytes). */
		snprintf(ps->section, sizeof ps->section, "%.*s", (int)len, buf + 1);
	}
	return buf;
}

static int
config_set(struct config_parse *ps, const char *section, const char *name,
    const char *value)
{
	const struct config_key *key = NULL;
	char *reason = NULL;
	size_t i;
	int rc, first;

	if (ps->error != 0)
		return ps->error;
	/* inih's section is ours cut short when the name is long. */
	if (strncmp(ps->section, section, strlen(section)) == 0)
		section = ps->section;
	if (*name == '\0')
		return config_fail(ps, NULL, -EINVAL, config_printf("syntax error: "
		    "no key name before '='"));
	if (*section == '\0')
		return config_fail(ps, name, -EINVAL, config_printf("key outside "
		    "any section (put it under [kgymd], [sandbox] or "
		    "[plugin.NAME])"));
	if ((rc = config_section_check(section, strlen(section), &reason)) < 0)
		return config_fail(ps, NULL, rc, reason);

	if (strcmp(section, "http") == 0)
		return 0;		/* kgymd-http(8) reads and checks [http] */
	if (strncmp(section, "plugin.", 7) == 0) {
		rc = config_plugin_add(ps->config, section + 7, name, value,
		    ps->lineno, &first);
		if (rc == -EEXIST)
			rc = config_reason(&reason, "duplicate key \"%s\" in [%s] "
			    "(first set on line %d)", name, section, first);
		return rc < 0 ? config_fail(ps, NULL, rc, reason) : 0;
	}

	for (i = 0; i < CONFIG_NKEYS; i++) {
		if (strcmp(config_keys[i].section, section) == 0 &&
		    strcmp(config_keys[i].name, name) == 0) {
			key = &config_keys[i];
			break;
		}
	}
	if (key == NULL)
		return config_fail(ps, NULL, -EINVAL, config_printf("unknown key "
		    "\"%s\" in [%s]", name, section));
	if (ps->seen[i] != 0)
		return config_fail(ps, NULL, -EINVAL, config_printf("duplicate key "
		    "\"%s\" in [%s] (first set on line %d)", name, section,
		    ps->seen[i]));
	if ((rc = key->parse(key, value, ps->config, &reason)) < 0)
		return config_fail(ps, name, rc, reason);
	ps->seen[i] = ps->lineno;
	return 0;
}

/* inih's handler: its convention is nonzero for success. */
static int
config_ini_handler(void *user, const char *section, const char *name,
    const char *value)
{
	return config_set(user, section, name, value) == 0;
}

/* Constraints between keys, checked once the whole file is read. */
static int
config_check(const struct config *config, char **ret_reason)
{
	if (config->default_timeout_s > config->max_timeout_s)
		return config_reason(ret_reason, "default_timeout (%gs) is larger "
		    "than max_timeout (%gs)", config->default_timeout_s,
		    config->max_timeout_s);
	return 0;
}

int
config_load(const char *path, struct config **ret_config, char **ret_cause)
{
	struct config_parse ps;
	struct config *config;
	char *cause = NULL, *reason = NULL;
	int rc, line;

	memset(&ps, 0, sizeof ps);
	ps.path = path;
	if ((config = config_defaults()) == NULL) {
		rc = -ENOMEM;
		goto fail;
	}
	free(config->path);
	if ((config->path = strdup(path)) == NULL) {
		rc = -ENOMEM;
		goto free_config;
	}
	if ((ps.fp = fopen(path, "re")) == NULL) {
		rc = -errno;
		cause = config_printf("%s: %s", path, strerror(-rc));
		goto free_config;
	}
	ps.config = config;
	line = ini_parse_stream(config_ini_reader, &ps, config_ini_handler, &ps);
	fclose(ps.fp);

	/*
	 * inih returns 0, the first line it could not parse or whose handler
	 * failed, or -2 when out of memory.  Our own errors (handler and
	 * reader) are in ps; the earlier of the two is the one to report.
	 */
	if (line > 0 && (ps.error == 0 || line < ps.cause_line)) {
		rc = -EINVAL;
		cause = config_printf("%s:%d: syntax error: expected [section], "
		    "key = value or a comment", path, line);
		goto free_cause;
	}
	if (ps.error != 0) {
		rc = ps.error;
		cause = ps.cause;
		ps.cause = NULL;
		goto free_config;
	}
	if (line == -2) {
		rc = -ENOMEM;
		goto free_config;
	}
	if (ps.read_errno != 0) {
		rc = -ps.read_errno;
		cause = config_printf("%s: %s", path, strerror(ps.read_errno));
		goto free_config;
	}
	if ((rc = config_check(config, &reason)) < 0) {
		if (reason != NULL)
			cause = config_printf("%s:0: %s", path, reason);
		free(reason);
		goto free_config;
	}
	*ret_config = config;
	return 0;

free_cause:
	free(ps.cause);
free_config:
	config_free(config);
fail:
	if (cause == NULL)
		cause = config_printf("%s: %s", path, strerror(-rc));
	*ret_cause = cause;
	return rc;
}

struct config *
config_defaults(void)
{
	const struct config_key *key;
	struct config *config;
	char *reason = NULL;
	size_t i;
	int rc;

	if ((config = calloc(1, sizeof *config)) == NULL)
		return NULL;
	if ((config->path = strdup("(defaults)")) == NULL)
		goto free_config;
	for (i = 0; i < CONFIG_NKEYS; i++) {
		key = &config_keys[i];
		rc = key->parse(key, key->def, config, &reason);
		if (rc == -ENOMEM)
			goto free_config;
		if (rc < 0)
			fatalx("config: the default of %s is invalid: %s",
			    key->name, reason != NULL ? reason : "?");
	}
	return config;

free_config:
	config_free(config);
	return NULL;
}

void
config_free(struct config *config)
{
	size_t i;

	if (config == NULL)
		return;
	for (i = 0; i < CONFIG_NKEYS; i++)
		config_value_clear(&config_keys[i], config);
	config_plugins_free(config->plugins, config->nplugins);
	free(config->path);
	free(config);
}

/* Root and kgymd's own user are always let in: they could do anything anyway. */
static bool
config_uid_trusted(uid_t uid)
{
	return uid == 0 || uid == geteuid();
}

bool
config_uid_allowed(const struct config *config, uid_t uid, gid_t gid)
{
	size_t i;

	if (config_uid_trusted(uid))
		return true;
	for (i = 0; i < config->nallow_uids; i++)
		if (config->allow_uids[i] == uid)
			return true;
	for (i = 0; i < config->nallow_gids; i++)
		if (config->allow_gids[i] == gid)
			return true;
	return false;
}

bool
config_uid_admin(const struct config *config, uid_t uid)
{
	size_t i;

	if (config_uid_trusted(uid))
		return true;
	for (i = 0; i < config->nadmin_uids; i++)
		if (config->admin_uids[i] == uid)
			return true;
	return false;
}

/* Not even root is a gateway unless listed: on_behalf_of drops rights, and is asked for. */
bool
config_uid_gateway(const struct config *config, uid_t uid)
{
	size_t i;

	for (i = 0; i < config->ngateway_uids; i++)
		if (config->gateway_uids[i] == uid)
			return true;
	return false;
}

void
config_apply_reload(struct config *cur, const struct config *next)
{
	const struct config_key *key;
	struct config plugins;
	const char *prefix;
	size_t i;

	for (i = 0; i < CONFIG_NKEYS; i++) {
		key = &config_keys[i];
		if (config_value_equal(key, cur, next))
			continue;
		prefix = strcmp(key->section, "kgymd") == 0 ? "" : key->section;
		if (!key->reloadable) {
			log_warnx("%s%s%s changed; restart kgymd to apply", prefix,
			    *prefix != '\0' ? "." : "", key->name);
			continue;
		}
		if (config_value_copy(key, cur, next) < 0) {
			log_warnx("%s changed but out of memory: keeping the old "
			    "value", key->name);
			continue;
		}
		log_info("%s changed", key->name);
	}

	if (!config_plugins_equal(cur, next)) {
		/* Build the copy aside, so that a failure leaves cur whole. */
		memset(&plugins, 0, sizeof plugins);
		if (config_plugins_copy(&plugins, next) < 0) {
			config_plugins_free(plugins.plugins, plugins.nplugins);
			log_warnx("[plugin.*] changed but out of memory: keeping "
			    "the old sections");
			return;
		}
		config_plugins_free(cur->plugins, cur->nplugins);
		cur->plugins = plugins.plugins;
		cur->nplugins = plugins.nplugins;
		log_info("[plugin.*] sections changed");
	}
}

int
config_key_info(size_t i, struct config_key_info *ret_info)
{
	if (i >= CONFIG_NKEYS)
		return -ENOENT;
	ret_info->section = config_keys[i].section;
	ret_info->name = config_keys[i].name;
	ret_info->default_value = config_keys[i].def;
	ret_info->reloadable = config_keys[i].reloadable;
	ret_info->doc = config_keys[i].doc;
	return 0;
}
