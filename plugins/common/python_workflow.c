/*
 * python_workflow.c -- the kernelbench workflow's flow for KernelBench-format
 * payloads: validate KernelGYM's fields, run one sandboxed job of the python
 * backend, keep a cache of reference timings, shape the result.
 *
 * A task is one job on the backend its payload names ("torch", "triton" or
 * "cuda", all served by plugins/python): on a CPU worker when the payload
 * says "device":"cpu" (torch candidates only: the path CI runs), else on a
 * GPU slot.  The job starts in phase "compile"; the harness announces
 * "correctness" and "timing" itself.  Its result is kgymd-protocol(7)'s and becomes
 * the task's; a job that dies (an obituary) fails the task with the
 * obituary's code.
 *
 * Seeds: each task gets a fresh secret seed (getrandom) from which the
 * harness derives the correctness trials' seeds.  The timed calls' inputs
 * come from a second seed made once per daemon life, so that a problem's
 * reference timing can be cached: the cache key is SHA-256 over the
 * reference code, the entry point, that timing seed and trial count, the
 * device class, the device's name, reference_backend and the torch version.
 * The daemon learns the last two from results (metadata.reference_timing_
 * env) and sends a cached timing with the environment it was measured in;
 * a harness whose torch or device differs measures the reference again, so
 * a stale entry costs time, never a wrong speedup.  force_refresh skips the
 * lookup.  Reference *outputs* are never cached: they live only in the
 * harness's trusted reference process.
 *
 * An entry can only go down.  A reference timed while something else
 * loaded the machine (another job's candidate burning the CPUs, which the
 * GPU lock does not stop) is slow, and a slow cached reference inflates
 * every later speedup against it -- a reward a candidate could buy for
 * the next ones.  So a new measurement replaces an entry only when its
 * median is lower, and one hit in reference_recheck, chosen at random
 * (getrandom: no one can tell which), is measured again instead of
 * served: an inflated entry lasts a few tasks, not the daemon's life.
 * The cost is a bias the other way: the cached median is the lowest of
 * several, so speedups against it are, if anything, a little low.
 *
 * Deadlines: the task's, which the daemon owns (host->task_time_left), goes
 * down to the harness as request.timeout_s, less a margin for the result's
 * way back (the payload's own "timeout" when that is shorter); the
 * backend adds its phase limits.  So a candidate that runs too long ends
 * as the harness's TIMEOUT_ERROR naming the phase, not as the daemon's
 * "the task ran past its timeout" (ARCHITECTURE.md, "Who owns which clock").
 *
 * Unlike native tasks (interleaved ABAB timing), a cached
 * reference timing is another moment's measurement: that is KernelGYM's
 * semantics, which its users expect, and the result says which it was
 * (metadata.reference_timing_cached).
 */
#include "config.h"

#include <sys/queue.h>
#include <sys/random.h>

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/evp.h>

#include "json_lru.h"
#include "python_workflow.h"
#include "plugin_util.h"

#define PW_DEFAULT_CACHE	1024
#define PW_DEFAULT_RECHECK	8	/* one cache hit in 8 measures again */
#define PW_DEFAULT_SOURCE	(1u << 20)
#define PW_MIN_CORRECT_TRIALS	5	/* kgymd-protocol(7), RESULTS */
#define PW_ERRLEN		2048
/*
 * What the job's clock keeps back from the task's time left: the harness's
 * verdict must travel back (and a job may wait for a worker) before the
 * daemon's own deadline for the task fires.  A quarter of a short timeout.
 */
#define PW_DEADLINE_MARGIN_S	5.0

static const struct kgym_host *host;
static const struct kgym_plugin_handle *self;

static struct {
	size_t cache_entries;
	unsigned recheck;		/* 1 in n hits measured again; 0: never */
	size_t max_source;
	double timing_rel_precision;	/* 0: the harness's default */
} cfg;

/* The timed calls' seed, one per daemon life (see the top comment). */
static char pw_perf_seed[40];

/* The environment the harness last reported per device class. */
enum { PW_CPU, PW_CUDA, PW_NCLASS };
static struct {
	char *torch;
	char *device;
} pw_env[PW_NCLASS];

/* Reference timings: {"env":{torch,device}, "stats":{...}} by key. */
static struct json_lru *pw_cache;

struct pw_task {
	struct route route;		/* first: route_of_task() */
	int cls;			/* PW_CPU or PW_CUDA */
	json_t *meta;
	double t_job;
};

/* ------------------------------------------------------------ helpers */

static int
pw_random_hex(char *buf, size_t len)
{
	unsigned char raw[16];
	ssize_t n;
	size_t i;

	do
		n = getrandom(raw, sizeof raw, 0);
	while (n < 0 && errno == EINTR);
	if (n != (ssize_t)sizeof raw)
		return n < 0 ? -errno : -EIO;
	for (i = 0; i < sizeof raw && 2 * i + 2 < len; i++)
		snprintf(buf + 2 * i, 3, "%02x", raw[i]);
	return 0;
}

/* ------------------------------------------------------------ payload */

enum pw_type { PW_STRING, PW_BOOL, PW_INT, PW_NUMBER };

/* KernelGYM's request fields that mean something here; others are ignored. */
static const struct pw_field {
	const char *name;
	enum pw_type type;
	double min, max;
} pw_fields[] = {
	{ "reference_code", PW_STRING, 1, 0 },
	{ "kernel_code", PW_STRING, 1, 0 },
	{ "entry_point", PW_STRING, 1, 64 },
	{ "device", PW_STRING, 1, 32 },
	{ "reference_backend", PW_STRING, 1, 16 },
	{ "num_correct_trials", PW_INT, 1, 1000 },
	{ "num_perf_trials", PW_INT, 1, 100000 },
	{ "num_warmup", PW_INT, 0, 1000 },
	{ "run_correctness", PW_BOOL, 0, 0 },
	{ "run_performance", PW_BOOL, 0, 0 },
	{ "enable_profiling", PW_BOOL, 0, 0 },
	{ "force_refresh", PW_BOOL, 0, 0 },
	{ "timeout", PW_NUMBER, 0.001, 86400 },
	{ "atol", PW_NUMBER, 0, 1e6 },
	{ "rtol", PW_NUMBER, 0, 1e6 },
	{ "timing_rel_precision", PW_NUMBER, 1e-6, 1 },
	{ "min_custom_share", PW_NUMBER, 0, 1 },
};

/* payload.X when present and not null, else NULL. */
static const json_t *
pw_get(const json_t *payload, const char *name)
{
	const json_t *v = json_object_get(payload, name);

	return v == NULL || json_is_null(v) ? NULL : v;
}

static bool
pw_identifier(const char *s)
{
	if (!isalpha((unsigned char)*s) && *s != '_')
		return false;
	for (s++; *s != '\0'; s++)
		if (!isalnum((unsigned char)*s) && *s != '_')
			return false;
	return true;
}

/* "cpu", "cuda" or "cuda:N" (N is ignored: placement is the daemon's). */
static int
pw_device_class(const json_t *payload)
{
	const char *d = json_string_value(pw_get(payload, "device"));

	if (d == NULL || strcmp(d, "cuda") == 0)
		return PW_CUDA;
	if (strcmp(d, "cpu") == 0)
		return PW_CPU;
	if (strncmp(d, "cuda:", 5) == 0 && d[5] != '\0' && strspn(d + 5, "0123456789") ==
	    strlen(d + 5))
		return PW_CUDA;
	return -1;
}

static int
pw_check(const json_t *payload, const struct route *route, char *err, size_t errlen)
{
	const struct pw_field *f;
	const char *backend, *s;
	const json_t *v;
	size_t i;
	double d;

	if (!json_is_object(payload))
		return pu_err(err, errlen, "payload: expected an object");
	backend = route->backend;
	for (i = 0; i < sizeof pw_fields / sizeof pw_fields[0]; i++) {
		f = &pw_fields[i];
		if ((v = pw_get(payload, f->name)) == NULL) {
			if (strcmp(f->name, "reference_code") == 0 || strcmp(f->name, "kernel_code") == 0)
				return pu_err(err, errlen, "%s: required (a string of Python) for "
				    "backend '%s'", f->name, backend);
			continue;
		}
		switch (f->type) {
		case PW_STRING:
			if (!json_is_string(v))
				return pu_err(err, errlen, "%s: expected a string", f->name);
			if (json_string_length(v) < (size_t)f->min)
				return pu_err(err, errlen, "%s: must not be empty", f->name);
			if (f->max > 0 && json_string_length(v) > (size_t)f->max)
				return pu_err(err, errlen, "%s: longer than %.0f characters", f->name,
				    f->max);
			if (f->max == 0 && json_string_length(v) > cfg.max_source)
				return pu_err(err, errlen, "%s: %zu bytes, more than max_source_bytes "
				    "= %zu", f->name, json_string_length(v), cfg.max_source);
			if (strlen(json_string_value(v)) != json_string_length(v))
				return pu_err(err, errlen, "%s: contains a NUL character", f->name);
			break;
		case PW_BOOL:
			if (!json_is_boolean(v))
				return pu_err(err, errlen, "%s: expected true or false", f->name);
			break;
		case PW_INT:
			if (!json_is_integer(v) || (d = (double)json_integer_value(v)) < f->min ||
			    d > f->max)
				return pu_err(err, errlen, "%s: expected an integer from %.0f to %.0f",
				    f->name, f->min, f->max);
			break;
		case PW_NUMBER:
			if (!json_is_number(v) || !isfinite(d = json_number_value(v)) ||
			    d < f->min || d > f->max)
				return pu_err(err, errlen, "%s: expected a number from %g to %g",
				    f->name, f->min, f->max);
			break;
		}
	}
	if ((s = json_string_value(pw_get(payload, "entry_point"))) != NULL && !pw_identifier(s))
		return pu_err(err, errlen, "entry_point: expected a Python identifier such as "
		    "\"Model\", got '%s'", s);
	if ((s = json_string_value(pw_get(payload, "reference_backend"))) != NULL &&
	    strcmp(s, "eager") != 0 && strcmp(s, "compile") != 0)
		return pu_err(err, errlen, "reference_backend: expected \"eager\" or \"compile\", "
		    "got '%s'", s);
	if (pw_device_class(payload) < 0)
		return pu_err(err, errlen, "device: expected \"cpu\" or \"cuda\", got '%s'",
		    json_string_value(pw_get(payload, "device")));
	if (pw_device_class(payload) == PW_CPU && strcmp(backend, "torch") != 0)
		return pu_err(err, errlen, "device: \"cpu\" runs only backend 'torch' candidates "
		    "(backend '%s' needs a GPU)", backend);
	return 0;
}

int
pw_validate(const json_t *payload, const struct route *route, char **ret_cause)
{
	char err[PW_ERRLEN];

	if (pw_check(payload, route, err, sizeof err) < 0) {
		*ret_cause = pu_strdup_host(host, err);
		return *ret_cause != NULL ? -EINVAL : -ENOMEM;
	}
	return 0;
}

/* ------------------------------------------------------------ reference timing cache */

static json_t *
pw_cache_find(const unsigned char key[32])
{
	return pw_cache != NULL ? json_lru_get(pw_cache, key) : NULL;
}

static void
pw_cache_put(const unsigned char key[32], json_t *timing)
{
	/* Timings are small: only their number is bounded. */
	if (pw_cache != NULL)
		json_lru_put(pw_cache, key, timing, 0, cfg.cache_entries, UINT64_MAX);
}

static int
pw_hash_field(EVP_MD_CTX *ctx, const char *s)
{
	unsigned char len[8];
	size_t n = s != NULL ? strlen(s) : 0;
	int i;

	/* Length-prefixed: no two splits of the fields collide. */
	for (i = 0; i < 8; i++)
		len[i] = (unsigned char)((uint64_t)n >> (8 * i));
	return EVP_DigestUpdate(ctx, len, sizeof len) && EVP_DigestUpdate(ctx, s != NULL ? s : "", n);
}

/*
 * request.timeout_s: what is left of the task's deadline, less the margin,
 * or payload.timeout when that is shorter.  The harness ends every phase
 * by it.
 */
static int
pw_set_timeout(struct kgym_task *task, const json_t *payload, json_t *request)
{
	const json_t *v = pw_get(payload, "timeout");
	double left, margin;

	if (host->task_time_left == NULL)	/* a host table without it: the payload's alone */
		return 0;
	left = host->task_time_left(task);
	margin = left / 4 < PW_DEADLINE_MARGIN_S ? left / 4 : PW_DEADLINE_MARGIN_S;
	left -= margin;
	if (left < 0.001)
		left = 0.001;
	if (v != NULL && json_number_value(v) < left)
		return 0;
	return json_object_set_new(request, "timeout_s", json_real(left)) == 0 ? 0 : -ENOMEM;
}

/* SHA-256 of n length-prefixed fields (pw_hash_field). */
static int
pw_digest(const char *const *fields, size_t n, unsigned char key[32])
{
	unsigned int len = 0;
	EVP_MD_CTX *ctx;
	size_t i;
	int ok;

	if ((ctx = EVP_MD_CTX_new()) == NULL)
		return -ENOMEM;
	ok = EVP_DigestInit_ex(ctx, EVP_sha256(), NULL);
	for (i = 0; i < n && ok; i++)
		ok = pw_hash_field(ctx, fields[i]);
	ok = ok && EVP_DigestFinal_ex(ctx, key, &len) && len == 32;
	EVP_MD_CTX_free(ctx);
	return ok ? 0 : -EIO;
}

/* The cache key of a payload's reference timing in environment (torch, device). */
static int
pw_key(const json_t *payload, int cls, const char *torch, const char *device,
    unsigned char key[32])
{
	const char *entry = json_string_value(pw_get(payload, "entry_point"));
	const char *rb = json_string_value(pw_get(payload, "reference_backend"));
	const json_t *trials = pw_get(payload, "num_perf_trials");
	char ntrials[32];
	const char *fields[] = { "kgym-python-reference-timing-1",
	    json_string_value(pw_get(payload, "reference_code")), entry != NULL ? entry : "Model",
	    pw_perf_seed, ntrials, cls == PW_CPU ? "cpu" : "cuda", device,
	    rb != NULL ? rb : "eager", torch };

	snprintf(ntrials, sizeof ntrials, "%lld", trials != NULL ?
	    (long long)json_integer_value(trials) : 100LL);
	return pw_digest(fields, sizeof fields / sizeof fields[0], key);
}

/*
 * The job's affinity (kgym_job_spec.affinity), as hex: what a zygote's
 * judge server is bound to -- the reference, its entry point and backend,
 * the device class -- so that the pool sends the candidates of one problem
 * to the worker that already has that reference's judge and executor up
 * (kgym_supervisor.reference_key decides for itself; a worse guess here
 * costs only speed).
 */
static int
pw_affinity(const json_t *payload, int cls, char hex[65])
{
	const char *entry = json_string_value(pw_get(payload, "entry_point"));
	const char *rb = json_string_value(pw_get(payload, "reference_backend"));
	const char *fields[] = { "kgym-python-affinity-1",
	    json_string_value(pw_get(payload, "reference_code")), entry != NULL ? entry : "Model",
	    rb != NULL ? rb : "eager", cls == PW_CPU ? "cpu" : "cuda" };
	unsigned char key[32];
	unsigned int i;
	int error;

	if ((error = pw_digest(fields, sizeof fields / sizeof fields[0], key)) < 0)
		return error;
	for (i = 0; i < 32; i++)
		snprintf(hex + 2 * i, 3, "%02x", key[i]);
	return 0;
}

/* Whether this cache hit is one to measure again (1 in cfg.recheck). */
static bool
pw_recheck_now(void)
{
	uint32_t r;

	if (cfg.recheck == 0)
		return false;
	if (cfg.recheck == 1)
		return true;
	if (getrandom(&r, sizeof r, 0) != (ssize_t)sizeof r)
		return true;	/* measuring again is never wrong */
	return r % cfg.recheck == 0;
}

static double
pw_median_ms(const json_t *entry)
{
	return json_number_value(json_object_get(json_object_get(entry, "stats"), "median_ms"));
}

/* A measured reference timing from `result`, into the cache (only down). */
static void
pw_learn(const json_t *payload, int cls, const json_t *result)
{
	const json_t *meta = json_object_get(result, "metadata");
	const json_t *env = json_object_get(meta, "reference_timing_env");
	const json_t *stats = json_object_get(json_object_get(result, "timing"), "reference");
	const char *torch = json_string_value(json_object_get(env, "torch"));
	const char *device = json_string_value(json_object_get(env, "device"));
	unsigned char key[32];
	json_t *entry, *old;

	if (torch == NULL || device == NULL)
		return;
	if (pw_env[cls].torch == NULL || strcmp(pw_env[cls].torch, torch) != 0 ||
	    strcmp(pw_env[cls].device, device) != 0) {
		free(pw_env[cls].torch);
		free(pw_env[cls].device);
		pw_env[cls].torch = strdup(torch);
		pw_env[cls].device = strdup(device);
		if (pw_env[cls].torch == NULL || pw_env[cls].device == NULL) {
			free(pw_env[cls].torch);
			free(pw_env[cls].device);
			pw_env[cls].torch = pw_env[cls].device = NULL;
			return;
		}
	}
	if (json_is_true(json_object_get(meta, "reference_timing_cached")) ||
	    !json_is_object(stats) || !json_is_number(json_object_get(stats, "median_ms")))
		return;
	if (pw_key(payload, cls, torch, device, key) < 0)
		return;
	old = pw_cache_find(key);
	if (old != NULL && pw_median_ms(old) <= json_number_value(json_object_get(stats, "median_ms")))
		return;
	entry = json_pack("{s:{s:s, s:s}, s:O}", "env", "torch", torch, "device", device,
	    "stats", stats);
	if (entry != NULL)
		pw_cache_put(key, entry);
	json_decref(entry);
}

/* ------------------------------------------------------------ task */

static void
pw_task_free(struct pw_task *t)
{
	if (t == NULL)
		return;
	json_decref(t->meta);
	free(t);
}

static void
pw_finish(struct kgym_task *task, json_t *result)
{
	struct pw_task *t = host->task_get_data(task);
	json_t *meta, *v;
	const char *k;

	if (result != NULL && t != NULL) {
		if (!json_is_object(meta = json_object_get(result, "metadata"))) {
			meta = json_object();
			json_object_set_new(result, "metadata", meta);
		}
		json_object_foreach(t->meta, k, v)
			json_object_set(meta, k, v);
	}
	host->task_set_data(task, NULL);
	pw_task_free(t);
	host->task_finish(task, result);
}

static void pw_fail(struct kgym_task *task, bool compiled, const char *code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static void
pw_fail(struct kgym_task *task, bool compiled, const char *code, const char *fmt, ...)
{
	json_t *result;
	va_list ap;
	char *msg;

	va_start(ap, fmt);
	if (vasprintf(&msg, fmt, ap) < 0)
		msg = NULL;
	va_end(ap);
	result = json_pack("{s:s, s:b, s:b, s:b, s:f, s:f, s:f, s:s, s:s, s:{}}",
	    "status", "failed", "compiled", compiled, "correctness", 0, "decoy_kernel", 0,
	    "kernel_runtime", -1.0, "reference_runtime", -1.0, "speedup", -1.0,
	    "error_code", code, "error_message", msg != NULL ? msg : code, "metadata");
	free(msg);
	pw_finish(task, result);
}

static void
pw_done(struct kgym_task *task, const struct kgym_job_outcome *o)
{
	struct pw_task *t = host->task_get_data(task);
	const json_t *payload = host->task_payload(task);
	const char *status;
	json_t *result, *meta;

	if (t == NULL) {
		pw_fail(task, false, "SYSTEM_ERROR", "kernelbench: the task lost its state");
		return;
	}
	json_object_set_new(t->meta, "job_ms", json_real(pu_now_ms() - t->t_job));
	json_object_set_new(t->meta, "worker", o->worker != NULL ? json_string(o->worker) :
	    json_null());
	if (!o->ok) {
		json_object_set_new(t->meta, "phase", o->phase != NULL ? json_string(o->phase) :
		    json_null());
		/* Past "compile", the candidate had loaded. */
		pw_fail(task, o->phase != NULL && strcmp(o->phase, "compile") != 0,
		    o->error_code != NULL ? o->error_code : "SYSTEM_ERROR", "%s",
		    o->error_message != NULL ? o->error_message : "the job ended without a reason");
		return;
	}
	if (!json_is_object(o->result) || (result = json_deep_copy(o->result)) == NULL) {
		pw_fail(task, false, "SYSTEM_ERROR", "the job returned no result object");
		return;
	}
	json_object_del(result, "recycle_worker");
	status = json_string_value(json_object_get(result, "status"));
	if (status == NULL || (strcmp(status, "completed") != 0 && strcmp(status, "failed") != 0)) {
		json_object_set_new(result, "status", json_string("failed"));
		json_object_set_new(result, "error_code", json_string("SYSTEM_ERROR"));
		json_object_set_new(result, "error_message",
		    json_string("the job's result has no status"));
	}
	if (!json_is_object(meta = json_object_get(result, "metadata"))) {
		meta = json_object();
		json_object_set_new(result, "metadata", meta);
	}
	pw_learn(payload, t->cls, result);
	pw_finish(task, result);
}

int
pw_start(struct kgym_task *task, const struct route *route, char **ret_cause)
{
	const json_t *payload = host->task_payload(task);
	struct kgym_job_spec js = { .struct_size = sizeof js };
	char err[PW_ERRLEN], seed[40], affinity[65];
	unsigned char key[32];
	const char *cache_state;
	const json_t *v;
	json_t *request, *cached = NULL;
	struct pw_task *t;
	size_t i;
	int r;

	if ((t = calloc(1, sizeof *t)) == NULL || (t->meta = json_object()) == NULL) {
		free(t);
		return -ENOMEM;
	}
	t->route = *route;
	host->task_set_data(task, t);
	json_object_set_new(t->meta, "workflow", json_string("kernelbench"));
	if (pw_check(payload, &t->route, err, sizeof err) < 0) {
		pw_fail(task, false, "VALIDATION_ERROR", "%s", err);
		return 0;
	}
	if ((r = pw_random_hex(seed, sizeof seed)) < 0) {
		pw_fail(task, false, "SYSTEM_ERROR", "getrandom: %s", strerror(-r));
		return 0;
	}
	t->cls = pw_device_class(payload);
	if (!json_is_true(pw_get(payload, "force_refresh")) && pw_env[t->cls].torch != NULL &&
	    pw_key(payload, t->cls, pw_env[t->cls].torch, pw_env[t->cls].device, key) == 0)
		cached = pw_cache_find(key);
	if (cached != NULL && pw_recheck_now()) {
		cached = NULL;
		cache_state = "recheck";
	} else
		cache_state = cached != NULL ? "hit" :
		    json_is_true(pw_get(payload, "force_refresh")) ? "refresh" : "miss";
	json_object_set_new(t->meta, "reference_timing_cache", json_string(cache_state));

	request = json_pack("{s:s, s:s, s:s, s:O, s:O, s:s, s:s, s:s, s:s, s:O?}",
	    "op", "evaluate", "backend", t->route.backend,
	    "device", t->cls == PW_CPU ? "cpu" : "cuda",
	    "reference_code", pw_get(payload, "reference_code"),
	    "kernel_code", pw_get(payload, "kernel_code"),
	    "entry_point", json_string_value(pw_get(payload, "entry_point")) ?: "Model",
	    "reference_backend", json_string_value(pw_get(payload, "reference_backend")) ?: "eager",
	    "seed", seed, "perf_seed", pw_perf_seed, "reference_timing", cached);
	if (request == NULL) {
		host->task_set_data(task, NULL);
		pw_task_free(t);
		return -ENOMEM;
	}
	/* Copied as given; the harness applies the floors (5 correctness trials). */
	for (i = 0; i < sizeof pw_fields / sizeof pw_fields[0]; i++) {
		if (pw_fields[i].type == PW_STRING ||
		    (v = pw_get(payload, pw_fields[i].name)) == NULL)
			continue;
		json_object_set(request, strcmp(pw_fields[i].name, "timeout") == 0 ? "timeout_s" :
		    pw_fields[i].name, (json_t *)v);
	}
	if ((r = pw_set_timeout(task, payload, request)) < 0) {
		json_decref(request);
		host->task_set_data(task, NULL);
		pw_task_free(t);
		return r;
	}
	if ((v = pw_get(payload, "num_correct_trials")) == NULL ||
	    json_integer_value(v) < PW_MIN_CORRECT_TRIALS)
		json_object_set_new(request, "num_correct_trials", json_integer(PW_MIN_CORRECT_TRIALS));
	if (pw_get(payload, "timing_rel_precision") == NULL && cfg.timing_rel_precision > 0)
		json_object_set_new(request, "timing_rel_precision",
		    json_real(cfg.timing_rel_precision));

	js.backend = t->route.backend;
	js.where = t->cls == PW_CPU ? KGYM_JOB_CPU : KGYM_JOB_GPU;
	if (pw_affinity(payload, t->cls, affinity) == 0)
		js.affinity = affinity;
	js.request = request;
	js.phase = "compile";
	t->t_job = pu_now_ms();
	r = host->job_run(task, &js, pw_done, ret_cause);
	json_decref(request);
	if (r < 0) {
		/* The host fails the task with our cause (RESOURCE_ERROR for -E2BIG). */
		host->task_set_data(task, NULL);
		pw_task_free(t);
	}
	return r;
}

void
pw_cancel(struct kgym_task *task)
{
	struct pw_task *t = host->task_get_data(task);

	host->task_set_data(task, NULL);
	pw_task_free(t);
}

/* ------------------------------------------------------------ life cycle */

/* A count of ours, 0 to 1000000, into *out when the key is set. */
static int
pw_config_count(const char *key, unsigned long long *out, char **ret_cause)
{
	const char *v = host->config_get(self, key);
	char *end;
	unsigned long long u;

	if (v == NULL)
		return 0;
	errno = 0;
	u = strtoull(v, &end, 10);
	if (errno != 0 || end == v || *end != '\0' || u > 1000000)
		return pu_cause(host, ret_cause, -EINVAL, "%s = %s: expected a number from 0 to 1000000",
		    key, v);
	*out = u;
	return 0;
}

static int
pw_read_config(char **ret_cause)
{
	const char *v;
	char *end;
	unsigned long long u;
	double d;

	cfg.max_source = PW_DEFAULT_SOURCE;
	cfg.timing_rel_precision = 0;
	u = PW_DEFAULT_CACHE;
	if (pw_config_count("reference_cache_entries", &u, ret_cause) < 0)
		return -EINVAL;
	cfg.cache_entries = (size_t)u;
	u = PW_DEFAULT_RECHECK;
	if (pw_config_count("reference_recheck", &u, ret_cause) < 0)
		return -EINVAL;
	cfg.recheck = (unsigned)u;
	if ((v = host->config_get(self, "max_source_bytes")) != NULL) {
		errno = 0;
		u = strtoull(v, &end, 10);
		if (*end == 'K' || *end == 'k')
			u <<= 10, end++;
		else if (*end == 'M' || *end == 'm')
			u <<= 20, end++;
		if (errno != 0 || end == v || *end != '\0' || u == 0 || u > (1u << 30))
			return pu_cause(host, ret_cause, -EINVAL, "max_source_bytes = %s: expected a "
			    "size such as 1M", v);
		cfg.max_source = (size_t)u;
	}
	if ((v = host->config_get(self, "timing_rel_precision")) != NULL) {
		errno = 0;
		d = strtod(v, &end);
		if (errno != 0 || end == v || *end != '\0' || !isfinite(d) || d < 1e-6 || d > 1)
			return pu_cause(host, ret_cause, -EINVAL, "timing_rel_precision = %s: expected a "
			    "number from 1e-6 to 1", v);
		cfg.timing_rel_precision = d;
	}
	return 0;
}

int
pw_init(const struct kgym_host *h, const struct kgym_plugin_handle *s, char **ret_cause)
{
	int r;

	host = h;
	self = s;
	if ((r = pw_read_config(ret_cause)) < 0)
		return r;
	if (pw_perf_seed[0] == '\0' && (r = pw_random_hex(pw_perf_seed, sizeof pw_perf_seed)) < 0)
		return pu_cause(host, ret_cause, r, "getrandom: %s", strerror(-r));
	if (pw_cache == NULL && (pw_cache = json_lru_new()) == NULL)
		return pu_cause(host, ret_cause, -ENOMEM, "out of memory");
	json_lru_trim(pw_cache, cfg.cache_entries, UINT64_MAX);
	return 0;
}

void
pw_fini(void)
{
	int i;

	json_lru_free(pw_cache);
	pw_cache = NULL;
	for (i = 0; i < PW_NCLASS; i++) {
		free(pw_env[i].torch);
		free(pw_env[i].device);
		pw_env[i].torch = pw_env[i].device = NULL;
	}
}
