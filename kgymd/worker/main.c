/*
 * main.c -- kgymd-worker: one sandboxed process that runs jobs for kgymd.
 *
 * kgymd fork+execs it per worker slot with a minimal environment,
 * CUDA_VISIBLE_DEVICES already pinned, and the socketpair on fd 3.  In
 * order, it:
 *   1. reads the configuration (its [workers]/[sandbox] keys and the
 *      [plugin.*] sections its backends may ask for);
 *   2. empties its private directory and makes it HOME and the cwd;
 *   3. loads the backend plugins and lets each prepare() while the whole
 *      system is still reachable; a GPU worker also initialises CUDA;
 *   4. enters the sandbox (rlimits, Landlock, seccomp with TSYNC) -- or,
 *      if that fails, tells kgymd why and exits: it never runs a job
 *      unsandboxed (fail closed);
 *   5. says HELLO and then runs one JOB at a time, answering each with a
 *      RESULT and emptying its directory again, until BYE.
 * Whatever a job does wrong -- crash, hang, forbidden system call -- kills
 * only this process; kgymd writes the obituary and starts another.
 */
#include "config.h"

#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kgymd.h"
#include "kgym/sandbox.h"
#include "worker.h"

struct config *kgymd_config;

struct worker_args {
	const char *name;
	int gpu;			/* -1: CPU worker */
	const char *config;
};

/* A backend that could not prepare: its jobs fail with this cause. */
struct backend_state {
	struct plugin *plugin;
	char *unready;			/* NULL when ready */
};

static struct backend_state *backends;
static size_t nbackends;
static char work_dir[4096];
static char cache_dir[4096];

/* FATAL without dying: the parent replaces us after this job's RESULT. */
static void
worker_fatal_soft(const char *message)
{
	json_t *o = json_pack("{s:s}", "message", message);

	if (o != NULL)
		ipc_send(WORKER_CHANNEL_FD, IPC_FATAL, o);
	json_decref(o);
}

static void __attribute__((noreturn))
worker_die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Tell the parent why we cannot go on, then exit non-zero. */
static void __attribute__((noreturn))
worker_die(const char *fmt, ...)
{
	char msg[1024];
	json_t *o;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	o = json_pack("{s:s}", "message", msg);
	if (ipc_send(WORKER_CHANNEL_FD, IPC_FATAL, o) < 0)
		dprintf(2, "kgymd-worker: %s\n", msg);
	json_decref(o);
	log_errorx("%s", msg);
	_exit(1);
}

/* The sandbox library's messages, into the worker's log (to the parent). */
static void
worker_sandbox_log(enum sandbox_log_level level, const char *msg, void *arg)
{
	switch (level) {
	case SANDBOX_LOG_DEBUG:
		log_debug("%s", msg);
		break;
	case SANDBOX_LOG_INFO:
		log_info("%s", msg);
		break;
	default:
		log_warnx("%s", msg);
		break;
	}
}

static bool worker_wipe_failed;

static int
worker_unlink_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	if (ftw->level == 0)
		return 0;	/* keep the directory itself */
	if (flag == FTW_DNR || (remove(path) < 0 && errno != ENOENT))
		worker_wipe_failed = true;
	return 0;
}

static void worker_fatal_soft(const char *message);

/*
 * Empty the private directory: nothing of one job survives into the next.
 * What a job made that we cannot remove (a directory of mode 0: our
 * sandbox forbids chmod) makes us ask to be replaced; the parent empties
 * the directory before it starts the next worker.
 */
static void
worker_wipe(void)
{
	worker_wipe_failed = false;
	if (nftw(work_dir, worker_unlink_one, 16, FTW_DEPTH | FTW_PHYS) < 0)
		worker_wipe_failed = true;
	if (worker_wipe_failed)
		worker_fatal_soft("the private directory could not be emptied");
}

static void
worker_parse_args(int argc, char **argv, struct worker_args *args)
{
	static const struct option opts[] = {
		{ "name", required_argument, NULL, 'n' },
		{ "gpu", required_argument, NULL, 'g' },
		{ "cpu", no_argument, NULL, 'c' },
		{ "config", required_argument, NULL, 'f' },
		{ NULL, 0, NULL, 0 },
	};
	int ch;

	args->gpu = -1;
	while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (ch) {
		case 'n':
			args->name = optarg;
			break;
		case 'g':
			args->gpu = atoi(optarg);
			break;
		case 'c':
			args->gpu = -1;
			break;
		case 'f':
			args->config = optarg;
			break;
		default:
			goto usage;
		}
	}
	if (args->name != NULL && args->config != NULL && optind == argc &&
	    strspn(args->name, "abcdefghijklmnopqrstuvwxyz0123456789.") == strlen(args->name))
		return;
usage:
	fprintf(stderr, "usage: kgymd-worker --name NAME (--gpu N | --cpu) --config FILE\n"
	    "kgymd-worker is started by kgymd, which passes it fd 3; do not run it by hand.\n");
	exit(2);
}

static void
worker_load_backends(void)
{
	const struct plugin_list *list;
	struct plugin *pl;
	char *cause;
	size_t i = 0;

	/*
	 * Toolkits too: backends reach them through host->toolkit in
	 * prepare(), which comes after every plugin is loaded, so the order of
	 * the files in plugin_dir does not matter.
	 */
	plugin_only_kinds(1u << KGYM_PLUGIN_BACKEND | 1u << KGYM_PLUGIN_TOOLKIT);
	plugin_load_all(kgymd_config->plugin_dir, whost_table());
	list = plugin_loaded();
	TAILQ_FOREACH(pl, list, entry)
		nbackends += pl->p->kind == KGYM_PLUGIN_BACKEND;
	if (nbackends > 0 && (backends = calloc(nbackends, sizeof *backends)) == NULL)
		worker_die("out of memory");
	TAILQ_FOREACH(pl, list, entry) {
		if (pl->p->kind != KGYM_PLUGIN_BACKEND)
			continue;
		cause = NULL;
		backends[i].plugin = pl;
		if (pl->p->prepare(&cause) < 0) {
			backends[i].unready = cause != NULL ? cause : strdup("prepare() failed");
			log_warnx("backend %s is not usable in this worker: %s", pl->p->name,
			    backends[i].unready);
		} else {
			free(cause);
		}
		i++;
	}
}

/* The union of every backend's documented system-call additions. */
static const char **
worker_extra_syscalls(void)
{
	const char **all = NULL, *const *list;
	size_t n = 0, i, j;

	for (i = 0; i < nbackends; i++) {
		if ((list = plugin_syscalls(backends[i].plugin)) == NULL)
			continue;
		for (j = 0; list[j] != NULL; j++) {
			if ((all = realloc(all, (n + 2) * sizeof *all)) == NULL)
				worker_die("out of memory");
			all[n++] = list[j];
		}
	}
	if (all != NULL)
		all[n] = NULL;
	return all;
}

static struct backend_state *
worker_find_backend(const char *name)
{
	const char *const *s;
	size_t i;

	for (i = 0; i < nbackends; i++)
		for (s = backends[i].plugin->p->serves; *s != NULL; s++)
			if (strcmp(*s, name) == 0)
				return &backends[i];
	return NULL;
}

static void
worker_run_job(json_t *job)
{
	json_int_t id = json_integer_value(json_object_get(job, "job"));
	const char *name = json_string_value(json_object_get(job, "backend"));
	json_t *request = json_object_get(job, "request"), *job_request;
	struct backend_state *b = name != NULL ? worker_find_backend(name) : NULL;
	json_t *result = NULL, *reply;
	char *cause = NULL;
	int error;

	/*
	 * The shared cache and the job's scratch directory (this worker's
	 * private one, emptied after every job) are the worker's to name: a
	 * job cannot point them elsewhere.  A backend may confine what it runs
	 * to the scratch directory (the nvrtc compile step does).
	 */
	job_request = json_is_object(request) ? json_copy(request) : json_object();
	json_object_set_new(job_request, "cache_dir", json_string(cache_dir));
	json_object_set_new(job_request, "scratch_dir", json_string(work_dir));
	if (b == NULL) {
		reply = json_pack("{s:I, s:s, s:s+}", "job", id, "error_code", "SYSTEM_ERROR",
		    "error_message", "no backend in this worker serves ", name ?: "(none)");
	} else if (b->unready != NULL) {
		reply = json_pack("{s:I, s:s, s:s}", "job", id, "error_code", "SYSTEM_ERROR",
		    "error_message", b->unready);
	} else if ((error = b->plugin->p->run(job_request, &result, &cause)) < 0 ||
	    !json_is_object(result)) {
		reply = json_pack("{s:I, s:s, s:s}", "job", id, "error_code", "SYSTEM_ERROR",
		    "error_message", cause != NULL ? cause : "the backend failed without a reason");
		json_decref(result);
	} else {
		/* A backend that hit a sticky error asks for a fresh process. */
		if (json_is_true(json_object_get(result, "recycle_worker"))) {
			json_object_del(result, "recycle_worker");
			worker_fatal_soft("the backend hit an unrecoverable error; replace this worker");
		}
		reply = json_pack("{s:I, s:o}", "job", id, "result", result);
	}
	json_decref(job_request);
	free(cause);
	/* Empty before answering: a FATAL about it must come while we are busy. */
	worker_wipe();
	if (reply == NULL)	/* e.g. a cause that is not valid UTF-8: say so, do not die */
		reply = json_pack("{s:I, s:s, s:s}", "job", id, "error_code", "SYSTEM_ERROR",
		    "error_message", "the backend's answer could not be encoded as JSON");
	if (reply == NULL || ipc_send(WORKER_CHANNEL_FD, IPC_RESULT, reply) < 0)
		_exit(1);	/* the parent is gone or we cannot speak: nothing to do */
	json_decref(reply);
}

static json_t *
worker_hello(const struct worker_args *args, json_t *gpu, const struct sandbox_report *sb)
{
	json_t *names = json_array();
	const char *const *s;
	size_t i;

	for (i = 0; i < nbackends; i++)
		for (s = backends[i].plugin->p->serves; *s != NULL; s++)
			json_array_append_new(names, json_string(*s));
	return json_pack("{s:I, s:s, s:o, s:o, s:{s:b, s:i}}", "pid", (json_int_t)getpid(),
	    "name", args->name, "gpu", gpu != NULL ? gpu : json_null(), "backends", names,
	    "sandbox", "seccomp", sb->seccomp, "landlock_abi", sb->landlock_abi);
}

int
main(int argc, char **argv)
{
	struct worker_args args = { 0 };
	struct sandbox_report report = { 0 };
	struct sandbox_policy policy = { 0 };
	const char **extra;
	const char *cache_paths[] = { cache_dir, NULL };
	json_t *gpu = NULL, *msg;
	char *cause = NULL, why[256];
	unsigned int type;
	int error;

	worker_parse_args(argc, argv, &args);
	if (fcntl(WORKER_CHANNEL_FD, F_GETFD) < 0) {
		fprintf(stderr, "kgymd-worker: fd 3 is not open: started by hand?\n");
		return 2;
	}
	whost_log_to_parent();
	if (config_load(args.config, &kgymd_config, &cause) < 0)
		worker_die("%s", cause);
	log_init(kgymd_config->log_level, true);
	whost_set_max_message(kgymd_config->max_message_bytes);

	snprintf(work_dir, sizeof work_dir, "%s/work/%s", kgymd_config->state_dir, args.name);
	snprintf(cache_dir, sizeof cache_dir, "%s/cache", kgymd_config->state_dir);
	if (chdir(work_dir) < 0)
		worker_die("cannot enter %s: %s", work_dir, strerror(errno));
	worker_wipe();

	if (args.gpu >= 0 && (gpu = gpuinfo_init(&cause)) == NULL) {
		/* Not fatal: jobs that need no CUDA still run (tests, GPU-less hosts). */
		log_warnx("no usable GPU in this worker: %s", cause);
		free(cause);
		cause = NULL;
	}
	worker_load_backends();

	if (sandbox_version() != KGYM_SANDBOX_VERSION)
		worker_die("sandbox library version %d, header %d: a mixed build",
		    sandbox_version(), KGYM_SANDBOX_VERSION);
	sandbox_set_log(worker_sandbox_log, NULL);
	policy.work_dir = work_dir;
	policy.gpu = args.gpu >= 0;
	/* The compile cache: CPU workers fill it, GPU workers only read it. */
	if (args.gpu >= 0)
		policy.ro_paths = cache_paths;
	else
		policy.rw_paths = cache_paths;
	policy.extra_syscalls = extra = worker_extra_syscalls();
	policy.memory_bytes = kgymd_config->job_memory_bytes;
	policy.max_files = kgymd_config->job_max_files;
	policy.max_processes = kgymd_config->job_max_processes;
	policy.max_file_bytes = kgymd_config->job_max_file_bytes;
#ifdef KGYM_SANDBOX_DISABLED
	log_errorx("WARNING: built with --disable-sandbox: jobs run UNSANDBOXED");
#else
	if (!kgymd_config->sandbox_enabled) {
		log_errorx("WARNING: [sandbox] enabled = no: jobs run UNSANDBOXED");
	} else if ((error = sandbox_enter(&policy, &report, &cause)) < 0) {
		worker_die("cannot enter the sandbox, refusing to run jobs: %s",
		    cause != NULL ? cause : strerror(-error));
	}
#endif
	free(extra);

	msg = worker_hello(&args, gpu, &report);
	if (ipc_send(WORKER_CHANNEL_FD, IPC_HELLO, msg) < 0)
		return 1;
	json_decref(msg);

	for (;;) {
		error = ipc_recv(WORKER_CHANNEL_FD, kgymd_config->max_message_bytes, &type, &msg,
		    why, sizeof why);
		if (error == -EPIPE)
			return 0;	/* the parent went away: so do we */
		if (error < 0)
			worker_die("bad message from kgymd: %s", why);
		if (type == IPC_BYE) {
			json_decref(msg);
			return 0;
		}
		if (type != IPC_JOB)
			worker_die("unexpected %s from kgymd", ipc_type_name(type));
		worker_run_job(msg);
		json_decref(msg);
	}
}
