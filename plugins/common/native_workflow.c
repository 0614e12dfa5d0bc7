/*
 * native_workflow.c -- the task flow of the native workflows (kernelbench,
 * kernel_simple): validate, compile job, evaluate job, result.
 *
 * A task goes through two sandboxed jobs of the nvrtc backend:
 *
 *   1. "compile" on a CPU worker: the reference and the candidate are
 *      compiled by NVRTC for the GPUs' architecture (host->gpu_arch, else
 *      the `arch` config key).  A candidate that does not compile ends the
 *      task here, failed with COMPILATION_ERROR and NVRTC's log; a
 *      reference that does not compile is the problem's fault
 *      (VALIDATION_ERROR).
 *   2. "evaluate" on a GPU slot, admitted with the device memory spec.c
 *      estimates: correctness trials on inputs drawn from a secret seed
 *      made here (getrandom, never shown to the candidate), then timing.
 *      Its result becomes the task's, with the compile figures added to
 *      metadata.  A job that dies (an obituary) fails the task with the
 *      obituary's error code.
 *
 * Reference cubins are kept in memory (an LRU keyed by SHA-256 of the
 * architecture, the reference source and its options), so the many
 * candidates of one problem that RL training sends compile only their own
 * source; force_refresh bypasses it, and asks the compile job to bypass the
 * workers' shared cubin cache too (units[].force; the worker names that
 * cache's directory itself, under state_dir, so no job can point it
 * elsewhere).
 * Reference *timings* are deliberately not cached: kgymd-protocol(7) wants the
 * reference and the candidate timed interleaved (ABAB) in the same worker
 * under the same clocks and L2 state, and a cached number would compare
 * the candidate with another moment's GPU.  The result says so
 * (metadata.reference_timing_cached = false).
 */
#include "config.h"

#include <sys/queue.h>
#include <sys/random.h>

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/evp.h>

#include "json_lru.h"
#include "native_workflow.h"
#include "parse_memo.h"
#include "plugin_util.h"
#include "route.h"

#define NW_DEFAULT_ARCH		"sm_90"
#define NW_DEFAULT_REF_ENTRIES	1024
#define NW_DEFAULT_REF_BYTES	(UINT64_C(64) << 20)
/* As much as the daemon keeps of queued tasks' payloads (sched.c). */
#define NW_DEFAULT_MEMO_BYTES	(UINT64_C(4) << 20)
/* What a parsed payload costs beyond its sources (the spec's own structs). */
#define NW_MEMO_OVERHEAD	4096
/* kgymd-protocol(7): correctness is judged on at least this many trials. */
#define NW_MIN_CORRECT_TRIALS	5
/*
 * Timed pairs: the nvrtc backend's bounds.  Fewer than 10 give no 95%
 * interval of the median worth the name, so KernelGYM's num_perf_trials
 * (often small) is raised to that; it is the budget, the adaptive stop
 * (timing_rel_precision) usually ends sooner.
 */
#define NW_MIN_TIMING_TRIALS	10
#define NW_MAX_TIMING_TRIALS	100000
#define NW_ERRLEN		2048

static const struct nw_kind *nw;
static const struct kgym_host *host;
static const struct kgym_plugin_handle *self;

static struct {
	char arch[32];
	struct spec_limits limits;
	size_t ref_entries;
	uint64_t ref_bytes;
	double timing_rel_precision;	/* 0: the backend's default */
	json_int_t max_timing_trials;	/* 0: the backend's default */
	double max_timing_ms;		/* 0: the backend's default */
	uint64_t memo_bytes;		/* parsed_payload_bytes */
} cfg;

/* Compiled reference cubins ({"cubin_key"} or {"cubin_b64"}, nw_cubin_of()). */
static struct json_lru *nw_refs;

/*
 * A payload parsed and evaluated: what nw_validate() makes of it at
 * submit, kept (parse_memo.h) until the task's nw_start() takes it, so a
 * task the daemon kept in memory is parsed once in the daemon.
 */
struct nw_parsed {
	struct spec *spec;
	uint64_t device_bytes;		/* the most demanding size set's */
};
static struct parse_memo *nw_memo;
/* nw_parse() calls in this process (nw_parse_count()). */
static unsigned long nw_nparses;

/* Per task, from start() until the task ends. */
struct nw_task {
	struct route route;		/* first: route_of_task() */
	struct spec *spec;
	uint64_t device_bytes;
	char arch[32];
	bool force;
	bool has_ref_key;
	unsigned char ref_key[32];
	json_t *ref_cubin;		/* nw_cubin_of()'s, or NULL: no reference / not yet */
	const char *ref_source;		/* "memory", "disk" or "compiled" */
	json_t *meta;			/* metadata gathered on the way */
	double t_job;			/* when the current job was asked for */
};

/* ------------------------------------------------------------ helpers */

/* ------------------------------------------------------------ config */

/* sm_NN with an optional letter (sm_90a): what NVRTC's -arch takes. */
static bool
nw_arch_valid(const char *a)
{
	size_t n = strlen(a), i = 3;

	if (n < 5 || n >= sizeof cfg.arch || strncmp(a, "sm_", 3) != 0)
		return false;
	while (i < n && isdigit((unsigned char)a[i]))
		i++;
	if (i < 5)
		return false;
	if (i < n && islower((unsigned char)a[i]))
		i++;
	return i == n;
}

static int
nw_read_config(char **ret_cause)
{
	const char *v;
	uint64_t u;

	memset(&cfg, 0, sizeof cfg);
	snprintf(cfg.arch, sizeof cfg.arch, "%s", NW_DEFAULT_ARCH);
	cfg.ref_entries = NW_DEFAULT_REF_ENTRIES;
	cfg.ref_bytes = NW_DEFAULT_REF_BYTES;
	cfg.memo_bytes = NW_DEFAULT_MEMO_BYTES;

	if ((v = host->config_get(self, "arch")) != NULL) {
		if (!nw_arch_valid(v))
			return pu_cause(host, ret_cause, -EINVAL, "arch = %s: expected an NVRTC "
			    "architecture such as sm_90", v);
		snprintf(cfg.arch, sizeof cfg.arch, "%s", v);
	}
	if ((v = host->config_get(self, "max_source_bytes")) != NULL) {
		if (pu_parse_size(v, &u) < 0 || u == 0 || u > SIZE_MAX)
			return pu_cause(host, ret_cause, -EINVAL, "max_source_bytes = %s: expected "
			    "a size such as 1M", v);
		cfg.limits.max_source_bytes = (size_t)u;
	}
	if ((v = host->config_get(self, "max_tensor_bytes")) != NULL) {
		if (pu_parse_size(v, &u) < 0 || u == 0)
			return pu_cause(host, ret_cause, -EINVAL, "max_tensor_bytes = %s: expected "
			    "a size such as 16G", v);
		cfg.limits.max_tensor_bytes = u;
	}
	if ((v = host->config_get(self, "reference_cache_entries")) != NULL) {
		if (pu_parse_size(v, &u) < 0 || u > 1000000)
			return pu_cause(host, ret_cause, -EINVAL, "reference_cache_entries = %s: "
			    "expected a number from 0 to 1000000", v);
		cfg.ref_entries = (size_t)u;
	}
	if ((v = host->config_get(self, "reference_cache_bytes")) != NULL) {
		if (pu_parse_size(v, &u) < 0)
			return pu_cause(host, ret_cause, -EINVAL, "reference_cache_bytes = %s: "
			    "expected a size such as 64M", v);
		cfg.ref_bytes = u;
	}
	if ((v = host->config_get(self, "parsed_payload_bytes")) != NULL) {
		if (pu_parse_size(v, &u) < 0)
			return pu_cause(host, ret_cause, -EINVAL, "parsed_payload_bytes = %s: "
			    "expected a size such as 4M", v);
		cfg.memo_bytes = u;
	}
	if ((v = host->config_get(self, "timing_rel_precision")) != NULL &&
	    pu_parse_double(v, 1e-6, 1.0, &cfg.timing_rel_precision) < 0)
		return pu_cause(host, ret_cause, -EINVAL, "timing_rel_precision = %s: expected a "
		    "number from 1e-6 to 1, such as 0.005", v);
	if ((v = host->config_get(self, "max_timing_ms")) != NULL &&
	    pu_parse_double(v, 1.0, 3600e3, &cfg.max_timing_ms) < 0)
		return pu_cause(host, ret_cause, -EINVAL, "max_timing_ms = %s: expected "
		    "milliseconds from 1 to 3600000", v);
	if ((v = host->config_get(self, "max_timing_trials")) != NULL) {
		if (pu_parse_size(v, &u) < 0 || u < NW_MIN_TIMING_TRIALS ||
		    u > NW_MAX_TIMING_TRIALS)
			return pu_cause(host, ret_cause, -EINVAL, "max_timing_trials = %s: "
			    "expected a number from %d to %d", v, NW_MIN_TIMING_TRIALS,
			    NW_MAX_TIMING_TRIALS);
		cfg.max_timing_trials = (json_int_t)u;
	}
	return 0;
}

/* ------------------------------------------------------------ reference cubin cache */

static json_t *
nw_ref_find(const unsigned char key[32])
{
	return nw_refs != NULL ? json_lru_get(nw_refs, key) : NULL;
}

/*
 * A compiled unit's cubin as the evaluate job takes it: {"cubin_key": hex}
 * when the compile job left it in the workers' shared cache, which GPU
 * workers read (so the cubin itself never passes through this process),
 * else {"cubin_b64": ...}.  NULL when the unit has neither.
 */
static json_t *
nw_cubin_of(const json_t *unit)
{
	const json_t *key = json_object_get(unit, "cubin_key");
	const json_t *b64 = json_object_get(unit, "cubin_b64");

	if (json_is_string(key))
		return json_pack("{s:O}", "cubin_key", key);
	if (json_is_string(b64))
		return json_pack("{s:O}", "cubin_b64", b64);
	return NULL;
}

/* Copy a cubin of nw_cubin_of() into the evaluate request as
 * <what>_cubin_key or <what>_cubin_b64. */
static void
nw_cubin_set(json_t *request, const char *what, const json_t *cubin)
{
	const char *k;
	json_t *v;
	char name[64];

	json_object_foreach((json_t *)cubin, k, v) {
		snprintf(name, sizeof name, "%s_%s", what, k);
		json_object_set(request, name, v);
	}
}

static void
nw_ref_put(const unsigned char key[32], json_t *cubin)
{
	const char *k;
	json_t *v;
	uint64_t bytes = 64;

	json_object_foreach(cubin, k, v)
		bytes += json_string_length(v);
	if (nw_refs != NULL)
		json_lru_put(nw_refs, key, cubin, bytes, cfg.ref_entries, cfg.ref_bytes);
}

static int
nw_ref_key(const char *arch, const struct spec_program *p, unsigned char key[32])
{
	static const char tag[] = "kgym-reference-cubin-1";
	unsigned int len = 0;
	EVP_MD_CTX *ctx;
	int ok;
	size_t i;

	if ((ctx = EVP_MD_CTX_new()) == NULL)
		return -ENOMEM;
	ok = EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) &&
	    EVP_DigestUpdate(ctx, tag, sizeof tag) &&
	    EVP_DigestUpdate(ctx, arch, strlen(arch) + 1) &&
	    EVP_DigestUpdate(ctx, p->source, p->source_len) &&
	    EVP_DigestUpdate(ctx, "", 1);
	for (i = 0; ok && i < p->noptions; i++)
		ok = EVP_DigestUpdate(ctx, p->options[i], strlen(p->options[i]) + 1);
	ok = ok && EVP_DigestFinal_ex(ctx, key, &len) && len == 32;
	EVP_MD_CTX_free(ctx);
	return ok ? 0 : -EIO;
}

/* ------------------------------------------------------------ validation */

enum nw_field_type { NW_BOOL, NW_INT, NW_NUMBER };

/* KernelGYM's request fields that mean something for a native task. */
static const struct nw_field {
	const char *name;
	enum nw_field_type type;
	double min, max;
} nw_fields[] = {
	{ "num_correct_trials", NW_INT, 1, 1000 },
	{ "num_perf_trials", NW_INT, 1, NW_MAX_TIMING_TRIALS },
	{ "num_warmup", NW_INT, 0, 1000 },
	{ "run_correctness", NW_BOOL, 0, 0 },
	{ "run_performance", NW_BOOL, 0, 0 },
	{ "enable_profiling", NW_BOOL, 0, 0 },
	{ "force_refresh", NW_BOOL, 0, 0 },
	{ "timing_rel_precision", NW_NUMBER, 1e-6, 1 },
};

static int
nw_check_fields(const json_t *payload, char *err, size_t errlen)
{
	const struct nw_field *f;
	const json_t *v;
	double d;
	size_t i;

	for (i = 0; i < sizeof nw_fields / sizeof nw_fields[0]; i++) {
		f = &nw_fields[i];
		if ((v = json_object_get(payload, f->name)) == NULL || json_is_null(v))
			continue;
		switch (f->type) {
		case NW_BOOL:
			if (!json_is_boolean(v))
				return pu_err(err, errlen, "%s: expected true or false", f->name);
			break;
		case NW_INT:
			if (!json_is_integer(v) || (d = (double)json_integer_value(v)) < f->min ||
			    d > f->max)
				return pu_err(err, errlen, "%s: expected an integer from %.0f "
				    "to %.0f", f->name, f->min, f->max);
			break;
		case NW_NUMBER:
			if (!json_is_number(v) || (d = json_number_value(v)) < f->min ||
			    d > f->max)
				return pu_err(err, errlen, "%s: expected a number from %g to %g",
				    f->name, f->min, f->max);
			break;
		}
	}
	return 0;
}

/*
 * Everything a payload must satisfy: at submit, and at start only when
 * the submit's result was not kept for it (nw_start(): a task recovered
 * from the store, a payload the daemon did not keep, a reload since).
 * On success the spec and its evaluation are the caller's.
 */
static int
nw_parse(const json_t *payload, struct spec **ret_spec, struct spec_eval **ret_ev,
    char *err, size_t errlen)
{
	struct spec_eval *ev = NULL;
	struct spec *spec = NULL;
	int r;

	/* payload.backend is the route's (route_decide()), decided before. */
	nw_nparses++;
	if ((r = nw_check_fields(payload, err, errlen)) < 0)
		return r;
	if ((r = spec_parse(payload, &cfg.limits, nw->spec_flags, &spec, err, errlen)) < 0)
		return r;
	if ((r = spec_evaluate(spec, NULL, &cfg.limits, &ev, err, errlen)) < 0 ||
	    (nw->validate != NULL && (r = nw->validate(payload, spec, ev, err, errlen)) < 0)) {
		spec_eval_free(ev);
		spec_free(spec);
		return r;
	}
	*ret_spec = spec;
	*ret_ev = ev;
	return 0;
}

static void
nw_parsed_free(void *p)
{
	struct nw_parsed *np = p;

	if (np == NULL)
		return;
	spec_free(np->spec);
	free(np);
}

/*
 * nw_parse() and the device memory estimate: everything start() needs of
 * the payload.  -EINVAL (the payload's fault) or another -errno, with a
 * message in err; *ret_stage says which step failed (0: the parse).
 */
static int
nw_prepare(const json_t *payload, struct nw_parsed **ret, int *ret_stage, char *err,
    size_t errlen)
{
	struct nw_parsed *np;
	struct spec_eval *ev = NULL;
	int r;

	*ret_stage = 0;
	if ((np = calloc(1, sizeof *np)) == NULL)
		return -ENOMEM;
	if ((r = nw_parse(payload, &np->spec, &ev, err, errlen)) < 0) {
		free(np);
		return r;
	}
	spec_eval_free(ev);
	/* The most demanding size set: the worker holds one set's tensors at a
	 * time.  Every set evaluated in nw_parse(), so only memory can fail. */
	*ret_stage = 1;
	if ((r = spec_device_bytes(np->spec, &cfg.limits, &np->device_bytes, err, errlen)) < 0) {
		nw_parsed_free(np);
		return r;
	}
	*ret = np;
	return 0;
}

int
nw_validate(const json_t *payload, char **ret_cause)
{
	struct route route;
	char err[NW_ERRLEN];

	if (route_decide(payload, ROUTE_NATIVE, nw->name, &route, err, sizeof err) < 0) {
		*ret_cause = pu_strdup_host(host, err);
		return -EINVAL;
	}
	return nw_validate_on(payload, &route, ret_cause);
}

int
nw_validate_on(const json_t *payload, const struct route *route, char **ret_cause)
{
	struct nw_parsed *np;
	char err[NW_ERRLEN];
	uint64_t bytes;
	int r, stage;

	(void)route;		/* the native flow has one backend */
	if ((r = nw_prepare(payload, &np, &stage, err, sizeof err)) < 0) {
		if (r == -ENOMEM)
			return r;
		*ret_cause = pu_strdup_host(host, err);
		return -EINVAL;
	}
	/* Kept for the task's start: the same payload object comes back. */
	bytes = NW_MEMO_OVERHEAD + np->spec->solution.source_len +
	    (np->spec->problem.has_reference ? np->spec->problem.reference.source_len : 0);
	parse_memo_put(nw_memo, payload, np, bytes, cfg.memo_bytes);
	return 0;
}

unsigned long
nw_parse_count(void)
{
	return nw_nparses;
}

/* ------------------------------------------------------------ task state and results */

static void
nw_task_free(struct nw_task *t)
{
	if (t == NULL)
		return;
	spec_free(t->spec);
	json_decref(t->ref_cubin);
	json_decref(t->meta);
	free(t);
}

/* End the task with `result` (stolen), releasing our state first. */
static void
nw_finish(struct kgym_task *task, json_t *result)
{
	struct nw_task *t = host->task_get_data(task);
	json_t *meta;
	const char *k;
	json_t *v;

	if (result != NULL && t != NULL && t->meta != NULL) {
		if (!json_is_object(meta = json_object_get(result, "metadata"))) {
			meta = json_object();
			json_object_set_new(result, "metadata", meta);
		}
		json_object_foreach(t->meta, k, v)
			json_object_set(meta, k, v);
	}
	host->task_set_data(task, NULL);
	nw_task_free(t);
	host->task_finish(task, result);
}

static void
nw_fail(struct kgym_task *task, bool compiled, const char *code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* A failed result of kgymd-protocol(7)'s shape, every verdict field present. */
static void
nw_fail(struct kgym_task *task, bool compiled, const char *code, const char *fmt, ...)
{
	json_t *result;
	va_list ap;
	char *msg;

	va_start(ap, fmt);
	if (vasprintf(&msg, fmt, ap) < 0)
		msg = NULL;
	va_end(ap);
	/* -1 for what was not measured, as the nvrtc backend and KernelGYM do. */
	result = json_pack("{s:s, s:b, s:b, s:b, s:f, s:f, s:o, s:s, s:s, s:{}}",
	    "status", "failed", "compiled", compiled, "correctness", 0, "decoy_kernel", 0,
	    "kernel_runtime", -1.0, "reference_runtime", -1.0,
	    "speedup", nw->speedup ? json_real(-1.0) : json_null(), "error_code", code,
	    "error_message", msg != NULL ? msg : code, "metadata");
	free(msg);
	nw_finish(task, result);
}

static void
nw_meta(struct nw_task *t, const char *key, json_t *value)
{
	json_object_set_new(t->meta, key, value != NULL ? value : json_null());
}

/* The unit named `name` of a compile result, or NULL. */
static const json_t *
nw_unit(const json_t *result, const char *name)
{
	const json_t *units = json_object_get(result, "units"), *u;
	size_t i;

	json_array_foreach(units, i, u) {
		const char *n = json_string_value(json_object_get(u, "name"));

		if (n != NULL && strcmp(n, name) == 0)
			return u;
	}
	return NULL;
}

/* ------------------------------------------------------------ evaluate */

static json_t *
nw_settings(const json_t *payload)
{
	const json_t *v;
	json_int_t trials = NW_MIN_CORRECT_TRIALS;
	json_t *s;

	if (json_is_integer(v = json_object_get(payload, "num_correct_trials")) &&
	    json_integer_value(v) > trials)
		trials = json_integer_value(v);
	s = json_pack("{s:I, s:b, s:b, s:b}", "num_correct_trials", trials,
	    "run_correctness", !json_is_false(json_object_get(payload, "run_correctness")),
	    "run_performance", json_is_boolean(v = json_object_get(payload, "run_performance")) ?
	    json_is_true(v) : nw->run_performance,
	    "enable_profiling", json_is_true(json_object_get(payload, "enable_profiling")));
	if (s == NULL)
		return NULL;
	if (json_is_integer(v = json_object_get(payload, "num_perf_trials")))
		json_object_set_new(s, "max_timing_trials",
		    json_integer(json_integer_value(v) < NW_MIN_TIMING_TRIALS ?
		    NW_MIN_TIMING_TRIALS : json_integer_value(v)));
	else if (cfg.max_timing_trials > 0)
		json_object_set_new(s, "max_timing_trials", json_integer(cfg.max_timing_trials));
	if (json_is_integer(v = json_object_get(payload, "num_warmup")))
		json_object_set_new(s, "warmup", json_integer(json_integer_value(v)));
	if (json_is_number(v = json_object_get(payload, "timing_rel_precision")))
		json_object_set_new(s, "timing_rel_precision", json_real(json_number_value(v)));
	else if (cfg.timing_rel_precision > 0)
		json_object_set_new(s, "timing_rel_precision", json_real(cfg.timing_rel_precision));
	if (cfg.max_timing_ms > 0)
		json_object_set_new(s, "max_timing_ms", json_real(cfg.max_timing_ms));
	return s;
}

static void
nw_evaluate_done(struct kgym_task *task, const struct kgym_job_outcome *o)
{
	struct nw_task *t = host->task_get_data(task);
	const char *status;
	json_t *result, *meta;

	if (t == NULL) {
		nw_fail(task, true, "SYSTEM_ERROR", "%s: the task lost its state", nw->name);
		return;
	}
	nw_meta(t, "evaluate_job_ms", json_real(pu_now_ms() - t->t_job));
	if (!o->ok) {
		nw_meta(t, "phase", o->phase != NULL ? json_string(o->phase) : NULL);
		nw_meta(t, "worker", o->worker != NULL ? json_string(o->worker) : NULL);
		nw_fail(task, true, o->error_code != NULL ? o->error_code : "SYSTEM_ERROR",
		    "%s", o->error_message != NULL ? o->error_message :
		    "the evaluate job ended without a reason");
		return;
	}
	if (!json_is_object(o->result) || (result = json_deep_copy(o->result)) == NULL) {
		nw_fail(task, true, "SYSTEM_ERROR", "the evaluate job returned no result object");
		return;
	}
	/* Between the backend and the worker only; not the client's business. */
	json_object_del(result, "recycle_worker");
	/* A reference key kept here whose cache file is gone: forget it, so
	 * that the next task of this problem compiles it again. */
	meta = json_object_get(result, "metadata");
	if (t->has_ref_key && nw_refs != NULL && json_is_string(json_object_get(meta,
	    "cubin_missing")) && strcmp(json_string_value(json_object_get(meta,
	    "cubin_missing")), "reference") == 0)
		json_lru_del(nw_refs, t->ref_key);
	status = json_string_value(json_object_get(result, "status"));
	if (status == NULL || (strcmp(status, "completed") != 0 && strcmp(status, "failed") != 0)) {
		json_object_set_new(result, "status", json_string("failed"));
		if (!json_is_string(json_object_get(result, "error_code"))) {
			json_object_set_new(result, "error_code", json_string("SYSTEM_ERROR"));
			json_object_set_new(result, "error_message",
			    json_string("the evaluate job's result has no status"));
		}
	}
	if (json_object_get(result, "compiled") == NULL)
		json_object_set_new(result, "compiled", json_true());
	if (!nw->speedup)
		json_object_set_new(result, "speedup", json_null());
	if (!json_is_object(meta = json_object_get(result, "metadata"))) {
		meta = json_object();
		json_object_set_new(result, "metadata", meta);
	}
	if (json_object_get(meta, "worker") == NULL && o->worker != NULL)
		json_object_set_new(meta, "worker", json_string(o->worker));
	nw_finish(task, result);
}

static int
nw_seed(char *buf, size_t len)
{
	uint64_t seed;
	ssize_t n;

	do
		n = getrandom(&seed, sizeof seed, 0);
	while (n < 0 && errno == EINTR);
	if (n != (ssize_t)sizeof seed)
		return n < 0 ? -errno : -EIO;
	snprintf(buf, len, "%" PRIu64, seed);
	return 0;
}

static void
nw_evaluate(struct kgym_task *task, struct nw_task *t, const json_t *solution_cubin)
{
	const json_t *payload = host->task_payload(task);
	struct kgym_job_spec js = { .struct_size = sizeof js };
	json_t *request, *settings;
	char seed[32], *cause = NULL;
	int r;

	if ((r = nw_seed(seed, sizeof seed)) < 0) {
		nw_fail(task, true, "SYSTEM_ERROR", "getrandom: %s", strerror(-r));
		return;
	}
	settings = nw_settings(payload);
	request = json_pack("{s:s, s:s, s:O, s:O, s:s, s:o?, s:n}",
	    "op", "evaluate", "mode", nw->mode,
	    "problem", json_object_get(payload, "problem"),
	    "solution", json_object_get(payload, "solution"),
	    "seed", seed, "settings", settings, "reference_timing");
	if (request == NULL) {
		nw_fail(task, true, "SYSTEM_ERROR", "out of memory building the evaluate job");
		return;
	}
	/* The worker parses the payload again (it is another process): under
	 * the limits it was accepted with, not spec.h's defaults. */
	json_object_set_new(request, "limits", json_pack("{s:I, s:I}", "max_tensor_bytes",
	    (json_int_t)(cfg.limits.max_tensor_bytes != 0 ? cfg.limits.max_tensor_bytes :
	    SPEC_DEFAULT_MAX_TENSOR_BYTES), "max_source_bytes",
	    (json_int_t)(cfg.limits.max_source_bytes != 0 ? cfg.limits.max_source_bytes :
	    SPEC_DEFAULT_MAX_SOURCE_BYTES)));
	if (t->ref_cubin != NULL)
		nw_cubin_set(request, "reference", t->ref_cubin);
	nw_cubin_set(request, "solution", solution_cubin);
	if (nw->request != NULL)
		nw->request(payload, request);
	js.backend = t->route.backend;
	js.where = KGYM_JOB_GPU;
	js.request = request;
	js.gpu_memory_bytes = t->device_bytes;
	js.phase = "correctness";
	t->t_job = pu_now_ms();
	r = host->job_run(task, &js, nw_evaluate_done, &cause);
	json_decref(request);
	if (r < 0) {
		/* -E2BIG: no GPU here can ever hold it, waiting would not help. */
		nw_fail(task, true, r == -E2BIG ? "RESOURCE_ERROR" : "SYSTEM_ERROR",
		    "evaluate job: %s", cause != NULL ? cause : strerror(-r));
		host->free(cause);
	}
}

/* ------------------------------------------------------------ compile */

static void
nw_compile_done(struct kgym_task *task, const struct kgym_job_outcome *o)
{
	struct nw_task *t = host->task_get_data(task);
	const json_t *ref, *sol;
	json_t *cubin;
	const char *log;

	if (t == NULL) {
		nw_fail(task, false, "SYSTEM_ERROR", "%s: the task lost its state", nw->name);
		return;
	}
	nw_meta(t, "compile_job_ms", json_real(pu_now_ms() - t->t_job));
	nw_meta(t, "compile_worker", o->worker != NULL ? json_string(o->worker) : NULL);
	if (!o->ok) {
		nw_meta(t, "phase", o->phase != NULL ? json_string(o->phase) : NULL);
		nw_fail(task, false, o->error_code != NULL ? o->error_code : "SYSTEM_ERROR",
		    "compile job: %s", o->error_message != NULL ? o->error_message :
		    "it ended without a reason");
		return;
	}
	sol = nw_unit(o->result, "solution");
	ref = t->spec->problem.has_reference && t->ref_cubin == NULL ?
	    nw_unit(o->result, "reference") : NULL;
	if (sol == NULL || (t->spec->problem.has_reference && t->ref_cubin == NULL && ref == NULL)) {
		nw_fail(task, false, "SYSTEM_ERROR", "the compile job returned no unit '%s'",
		    sol == NULL ? "solution" : "reference");
		return;
	}
	nw_meta(t, "compile_ms", json_copy(json_object_get(sol, "compile_ms")));
	nw_meta(t, "compile_cache_hit", json_boolean(json_is_true(json_object_get(sol,
	    "cache_hit"))));
	if (ref != NULL) {
		nw_meta(t, "reference_compile_ms", json_copy(json_object_get(ref, "compile_ms")));
		t->ref_source = json_is_true(json_object_get(ref, "cache_hit")) ? "disk" : "compiled";
		if (!json_is_true(json_object_get(ref, "ok"))) {
			log = json_string_value(json_object_get(ref, "log"));
			nw_fail(task, json_is_true(json_object_get(sol, "ok")), "VALIDATION_ERROR",
			    "the problem's reference does not compile: %s",
			    log != NULL && *log != '\0' ? log : "(no log)");
			return;
		}
		if ((cubin = nw_cubin_of(ref)) == NULL) {
			nw_fail(task, false, "SYSTEM_ERROR", "the compile job returned no cubin "
			    "for the reference");
			return;
		}
		t->ref_cubin = cubin;
		if (t->has_ref_key)
			nw_ref_put(t->ref_key, t->ref_cubin);
	}
	if (t->ref_source != NULL)
		nw_meta(t, "reference_cubin", json_string(t->ref_source));
	if (!json_is_true(json_object_get(sol, "ok"))) {
		log = json_string_value(json_object_get(sol, "log"));
		nw_fail(task, false, "COMPILATION_ERROR", "%s",
		    log != NULL && *log != '\0' ? log : "NVRTC failed without a log");
		return;
	}
	if ((cubin = nw_cubin_of(sol)) == NULL) {
		nw_fail(task, false, "SYSTEM_ERROR", "the compile job returned no cubin for "
		    "the solution");
		return;
	}
	nw_evaluate(task, t, cubin);
	json_decref(cubin);
}

static json_t *
nw_unit_json(const char *name, const struct spec_program *p, bool force)
{
	json_t *opts = json_array(), *u;
	size_t i;

	for (i = 0; opts != NULL && i < p->noptions; i++)
		json_array_append_new(opts, json_string(p->options[i]));
	u = json_pack("{s:s, s:s%, s:o}", "name", name, "source", p->source, p->source_len,
	    "options", opts);
	if (u != NULL && force)
		json_object_set_new(u, "force", json_true());
	return u;
}

/* The architecture to compile for: what the GPUs said, else the config's. */
static const char *
nw_arch(void)
{
	const char *a = NULL;

	if (host->struct_size >= offsetof(struct kgym_host, gpu_arch) + sizeof host->gpu_arch &&
	    host->gpu_arch != NULL)
		a = host->gpu_arch();
	return a != NULL && nw_arch_valid(a) ? a : cfg.arch;
}

int
nw_start(struct kgym_task *task, char **ret_cause)
{
	struct route route;
	char err[NW_ERRLEN];

	if (route_decide(host->task_payload(task), ROUTE_NATIVE, nw->name, &route, err,
	    sizeof err) < 0) {
		/* A stored payload this build does not serve (any more). */
		nw_fail(task, false, "VALIDATION_ERROR", "%s", err);
		return 0;
	}
	return nw_start_on(task, &route, ret_cause);
}

int
nw_start_on(struct kgym_task *task, const struct route *route, char **ret_cause)
{
	const json_t *payload = host->task_payload(task);
	struct kgym_job_spec js = { .struct_size = sizeof js };
	json_t *request, *units, *cached;
	struct nw_parsed *np;
	char err[NW_ERRLEN];
	struct nw_task *t;
	int r, stage;

	if ((t = calloc(1, sizeof *t)) == NULL || (t->meta = json_object()) == NULL) {
		free(t);
		return -ENOMEM;
	}
	t->route = *route;
	host->task_set_data(task, t);
	/*
	 * What validate() made of this very payload, when the daemon kept it
	 * since the submit; else (read back from the store: a restart, or a
	 * payload too big to keep) parsed again, and checked again under the
	 * configuration of now.
	 */
	if ((np = parse_memo_take(nw_memo, payload)) == NULL &&
	    (r = nw_prepare(payload, &np, &stage, err, sizeof err)) < 0) {
		if (r == -ENOMEM || stage > 0) {
			host->task_set_data(task, NULL);
			nw_task_free(t);
			if (r != -ENOMEM)
				*ret_cause = pu_strdup_host(host, err);
			return r;
		}
		nw_fail(task, false, "VALIDATION_ERROR", "%s", err);
		return 0;
	}
	t->spec = np->spec;
	t->device_bytes = np->device_bytes;
	np->spec = NULL;
	nw_parsed_free(np);
	snprintf(t->arch, sizeof t->arch, "%s", nw_arch());
	t->force = json_is_true(json_object_get(payload, "force_refresh"));
	nw_meta(t, "workflow", json_string(nw->name));
	nw_meta(t, "arch", json_string(t->arch));
	nw_meta(t, "device_bytes_estimate", json_integer((json_int_t)t->device_bytes));
	if (nw->speedup)
		nw_meta(t, "reference_timing_cached", json_false());

	units = json_array();
	if (t->spec->problem.has_reference) {
		t->has_ref_key = nw_ref_key(t->arch, &t->spec->problem.reference, t->ref_key) == 0;
		if (t->has_ref_key && !t->force && (cached = nw_ref_find(t->ref_key)) != NULL) {
			t->ref_cubin = json_incref(cached);
			t->ref_source = "memory";
			nw_meta(t, "reference_compile_ms", json_integer(0));
		} else {
			json_array_append_new(units, nw_unit_json("reference",
			    &t->spec->problem.reference, t->force));
		}
	}
	json_array_append_new(units, nw_unit_json("solution", &t->spec->solution, t->force));
	request = json_pack("{s:s, s:s, s:o}", "op", "compile", "arch", t->arch, "units", units);
	if (request == NULL) {
		host->task_set_data(task, NULL);
		nw_task_free(t);
		return -ENOMEM;
	}
	js.backend = t->route.backend;
	js.where = KGYM_JOB_CPU;
	js.request = request;
	js.phase = "compile";
	t->t_job = pu_now_ms();
	r = host->job_run(task, &js, nw_compile_done, ret_cause);
	json_decref(request);
	if (r < 0) {
		/* The host fails the task with our cause (RESOURCE_ERROR for -E2BIG). */
		host->task_set_data(task, NULL);
		nw_task_free(t);
	}
	return r;
}

void
nw_cancel(struct kgym_task *task)
{
	struct nw_task *t = host->task_get_data(task);

	host->task_set_data(task, NULL);
	nw_task_free(t);
}

/* ------------------------------------------------------------ life cycle */

int
nw_init(const struct nw_kind *kind, const struct kgym_host *h,
    const struct kgym_plugin_handle *s, char **ret_cause)
{
	int r;

	nw = kind;
	host = h;
	self = s;
	if (h->struct_size < offsetof(struct kgym_host, job_run) + sizeof h->job_run ||
	    h->job_run == NULL)
		return pu_cause(host, ret_cause, -ENOTSUP, "%s needs sandboxed jobs (plugin ABI 1.1)",
		    kind->name);
	if ((r = nw_read_config(ret_cause)) < 0)
		return r;
	if (nw_refs == NULL && (nw_refs = json_lru_new()) == NULL)
		return pu_cause(host, ret_cause, -ENOMEM, "out of memory");
	if (nw_memo == NULL && (nw_memo = parse_memo_new(nw_parsed_free)) == NULL)
		return pu_cause(host, ret_cause, -ENOMEM, "out of memory");
	/* Parsed under the old limits: parse again. */
	parse_memo_clear(nw_memo);
	json_lru_trim(nw_refs, cfg.ref_entries, cfg.ref_bytes);
	return 0;
}

void
nw_fini(void)
{
	json_lru_free(nw_refs);
	nw_refs = NULL;
	parse_memo_free(nw_memo);
	nw_memo = NULL;
}
