/*
 * metrics.c -- GET /metrics in Prometheus' text format (version 0.0.4).
 *
 * Two sources: the gateway's own counters and latency histograms (HTTP
 * requests by route and status, synchronous evaluations end to end), kept
 * here; and kgymd's figures (tasks by state, queue depth, its latency
 * quantiles, per-GPU lock and worker states), asked with its stats and
 * workers ops at scrape time.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway.h"

/* Histogram bounds, in seconds. */
static const double bounds[] = { 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
	0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 1800 };
#define NBOUNDS (sizeof bounds / sizeof bounds[0])
static const int codes[] = { 200, 400, 401, 404, 405, 409, 413, 429, 503 };
#define NCODES (sizeof codes / sizeof codes[0])

struct histogram {
	uint64_t buckets[NBOUNDS]; /* non-cumulative; written out cumulative */
	uint64_t count;
	double sum;
};

static const char *const route_names[ROUTE__COUNT] = {
	[ROUTE_ROOT] = "/",
	[ROUTE_HEALTH] = "/health",
	[ROUTE_METRICS] = "/metrics",
	[ROUTE_WORKERS] = "/workers/status",
	[ROUTE_QUEUE] = "/queue/status",
	[ROUTE_EVALUATE] = "/evaluate",
	[ROUTE_BATCH] = "/evaluate/batch",
	[ROUTE_WORKFLOW_SUBMIT] = "/workflow/submit",
	[ROUTE_WORKFLOW_RESULTS] = "/workflow/results/{id}",
	[ROUTE_STATUS] = "/status/{id}",
	[ROUTE_RESULTS] = "/results/{id}",
	[ROUTE_CANCEL] = "/tasks/{id}",
	[ROUTE_OTHER] = "other",
};

static struct {
	uint64_t requests[ROUTE__COUNT][NCODES + 1]; /* last: any other code */
	struct histogram latency[ROUTE__COUNT];
	struct histogram evaluate;
} m;

struct metrics_scrape {
	json_t *stats, *workers;
	int pending;
};

static void
histogram_add(struct histogram *h, double seconds)
{
	size_t i;

	for (i = 0; i < NBOUNDS && seconds > bounds[i]; i++)
		;
	if (i < NBOUNDS)
		h->buckets[i]++;
	h->count++;
	h->sum += seconds;
}

static void
histogram_print(
    FILE *fp, const char *name, const char *labels, const struct histogram *h)
{
	uint64_t cum = 0;
	size_t i;

	for (i = 0; i < NBOUNDS; i++) {
		cum += h->buckets[i];
		fprintf(fp, "%s_bucket{%s%sle=\"%g\"} %llu\n", name, labels,
		    *labels ? "," : "", bounds[i], (unsigned long long)cum);
	}
	fprintf(fp, "%s_bucket{%s%sle=\"+Inf\"} %llu\n", name, labels,
	    *labels ? "," : "", (unsigned long long)h->count);
	if (*labels != '\0')
		fprintf(fp, "%s_sum{%s} %.6f\n%s_count{%s} %llu\n", name, labels,
		    h->sum, name, labels, (unsigned long long)h->count);
	else
		fprintf(fp, "%s_sum %.6f\n%s_count %llu\n", name, h->sum, name,
		    (unsigned long long)h->count);
}

void
metrics_observe(int route, int code, double ms)
{
	size_t i;

	if (route < 0 || route >= ROUTE__COUNT)
		route = ROUTE_OTHER;
	for (i = 0; i < NCODES && codes[i] != code; i++)
		;
	m.requests[route][i]++;
	histogram_add(&m.latency[route], ms / 1000.0);
}

void
metrics_task(double ms)
{
	histogram_add(&m.evaluate, ms / 1000.0);
}

size_t
metrics_route_count(void)
{
	return ROUTE__COUNT;
}

const char *
metrics_route_name(int route)
{
	return route >= 0 && route < ROUTE__COUNT ? route_names[route] : "other";
}

static void
metrics_gateway(FILE *fp)
{
	char labels[96];
	size_t r, i;

	fprintf(fp,
	    "# HELP kgymd_http_up Whether the gateway is connected to kgymd.\n"
	    "# TYPE kgymd_http_up gauge\nkgymd_http_up %d\n",
	    up_ready() ? 1 : 0);
	fprintf(fp,
	    "# HELP kgymd_http_upstream_calls Requests to kgymd in flight (waits included).\n"
	    "# TYPE kgymd_http_upstream_calls gauge\nkgymd_http_upstream_calls %zu\n",
	    up_calls_in_flight());
	fprintf(fp,
	    "# HELP kgymd_http_requests_total HTTP requests answered, by route and status.\n"
	    "# TYPE kgymd_http_requests_total counter\n");
	for (r = 0; r < ROUTE__COUNT; r++)
		for (i = 0; i <= NCODES; i++)
			if (m.requests[r][i] > 0) {
				if (i < NCODES)
					fprintf(fp,
					    "kgymd_http_requests_total{route=\"%s\",code=\"%d\"} %llu\n",
					    route_names[r], codes[i],
					    (unsigned long long)m.requests[r][i]);
				else
					fprintf(fp,
					    "kgymd_http_requests_total{route=\"%s\",code=\"other\"} %llu\n",
					    route_names[r],
					    (unsigned long long)m.requests[r][i]);
			}
	fprintf(fp,
	    "# HELP kgymd_http_request_duration_seconds Time to answer, by route.\n"
	    "# TYPE kgymd_http_request_duration_seconds histogram\n");
	for (r = 0; r < ROUTE__COUNT; r++) {
		if (m.latency[r].count == 0)
			continue;
		snprintf(labels, sizeof labels, "route=\"%s\"", route_names[r]);
		histogram_print(
		    fp, "kgymd_http_request_duration_seconds", labels, &m.latency[r]);
	}
	fprintf(fp,
	    "# HELP kgymd_http_evaluate_seconds Synchronous /evaluate, arrival to the task's end.\n"
	    "# TYPE kgymd_http_evaluate_seconds histogram\n");
	histogram_print(fp, "kgymd_http_evaluate_seconds", "", &m.evaluate);
}

static void
metrics_stats(FILE *fp, const json_t *stats)
{
	static const char *const states[] = { "queued", "running", "completed",
		"failed", "cancelled" };
	const json_t *tasks = json_object_get(stats, "tasks"),
		     *lat = json_object_get(stats, "latency_ms"), *v;
	const char *kind;
	size_t i;

	fprintf(fp,
	    "# HELP kgymd_tasks Tasks in kgymd's store, by state.\n# TYPE kgymd_tasks gauge\n");
	for (i = 0; i < 5; i++)
		fprintf(fp, "kgymd_tasks{state=\"%s\"} %lld\n", states[i],
		    (long long)json_integer_value(json_object_get(tasks, states[i])));
	fprintf(fp,
	    "# HELP kgymd_queue_depth Tasks waiting for dispatch.\n# TYPE kgymd_queue_depth gauge\n"
	    "kgymd_queue_depth %lld\n",
	    (long long)json_integer_value(json_object_get(stats, "queue_depth")));
	fprintf(fp,
	    "# HELP kgymd_running Tasks running.\n# TYPE kgymd_running gauge\n"
	    "kgymd_running %lld\n",
	    (long long)json_integer_value(json_object_get(stats, "running")));
	fprintf(fp,
	    "# TYPE kgymd_submitted_total counter\nkgymd_submitted_total %lld\n"
	    "# TYPE kgymd_finished_total counter\nkgymd_finished_total %lld\n",
	    (long long)json_integer_value(json_object_get(stats, "submitted_total")),
	    (long long)json_integer_value(json_object_get(stats, "finished_total")));
	fprintf(fp,
	    "# HELP kgymd_latency_seconds kgymd's own latency quantiles (queue, run, status).\n"
	    "# TYPE kgymd_latency_seconds summary\n");
	json_object_foreach((json_t *)lat, kind, v) {
		if (json_is_number(json_object_get(v, "p50")))
			fprintf(fp,
			    "kgymd_latency_seconds{kind=\"%s\",quantile=\"0.5\"} %.6f\n",
			    kind,
			    json_number_value(json_object_get(v, "p50")) / 1000.0);
		if (json_is_number(json_object_get(v, "p99")))
			fprintf(fp,
			    "kgymd_latency_seconds{kind=\"%s\",quantile=\"0.99\"} %.6f\n",
			    kind,
			    json_number_value(json_object_get(v, "p99")) / 1000.0);
		fprintf(fp, "kgymd_latency_seconds_count{kind=\"%s\"} %lld\n", kind,
		    (long long)json_integer_value(json_object_get(v, "samples")));
	}
}

/* One worker's state, counted per GPU. */
static void
metrics_workers_of(FILE *fp, const char *gpu, const json_t *workers)
{
	static const char *const wstates[] = { "starting", "idle", "busy", "lock_wait",
		"stopping", "down" };
	const json_t *w;
	size_t i, j, n;

	for (j = 0; j < 6; j++) {
		n = 0;
		json_array_foreach((json_t *)workers, i, w) {
			const char *s = json_string_value(json_object_get(w, "state"));

			n += s != NULL && strcmp(s, wstates[j]) == 0;
		}
		fprintf(fp, "kgymd_workers{gpu=\"%s\",state=\"%s\"} %zu\n", gpu,
		    wstates[j], n);
	}
}

static void
metrics_workers(FILE *fp, const json_t *workers)
{
	static const char *const locks[] = { "free", "shared", "exclusive" };
	const json_t *gpus = json_object_get(workers, "gpus"), *g;
	char gpu[32];
	size_t i, j;

	fprintf(fp,
	    "# HELP kgymd_workers Workers by GPU (\"cpu\" for CPU workers) and state.\n"
	    "# TYPE kgymd_workers gauge\n");
	json_array_foreach((json_t *)gpus, i, g) {
		snprintf(gpu, sizeof gpu, "%lld",
		    (long long)json_integer_value(json_object_get(g, "index")));
		metrics_workers_of(fp, gpu, json_object_get(g, "workers"));
	}
	metrics_workers_of(fp, "cpu", json_object_get(workers, "cpu_workers"));
	fprintf(fp,
	    "# HELP kgymd_gpu_lock Each GPU's readers-writer lock: 1 for its state.\n"
	    "# TYPE kgymd_gpu_lock gauge\n");
	json_array_foreach((json_t *)gpus, i, g) {
		const char *lock = json_string_value(json_object_get(g, "lock"));

		for (j = 0; j < 3; j++)
			fprintf(fp, "kgymd_gpu_lock{gpu=\"%lld\",state=\"%s\"} %d\n",
			    (long long)json_integer_value(json_object_get(g, "index")),
			    locks[j], lock != NULL && strcmp(lock, locks[j]) == 0);
	}
	fprintf(fp,
	    "# TYPE kgymd_gpu_lock_readers gauge\n# TYPE kgymd_gpu_lock_waiting gauge\n");
	json_array_foreach((json_t *)gpus, i, g) {
		fprintf(fp, "kgymd_gpu_lock_readers{gpu=\"%lld\"} %lld\n",
		    (long long)json_integer_value(json_object_get(g, "index")),
		    (long long)json_integer_value(json_object_get(g, "lock_readers")));
		fprintf(fp, "kgymd_gpu_lock_waiting{gpu=\"%lld\"} %zu\n",
		    (long long)json_integer_value(json_object_get(g, "index")),
		    json_array_size(json_object_get(g, "lock_waiting")));
	}
	fprintf(fp,
	    "# TYPE kgymd_queued_jobs gauge\nkgymd_queued_jobs{kind=\"cpu\"} %lld\n"
	    "kgymd_queued_jobs{kind=\"gpu\"} %lld\n",
	    (long long)json_integer_value(json_object_get(workers, "queued_cpu_jobs")),
	    (long long)json_integer_value(json_object_get(workers, "queued_gpu_jobs")));
}

static void
metrics_reply(struct gw_req *r, struct metrics_scrape *sc)
{
	char *text = NULL;
	size_t len = 0;
	FILE *fp = open_memstream(&text, &len);

	if (fp == NULL)
		return gw_reply_unavailable(r);
	metrics_gateway(fp);
	if (sc != NULL && sc->stats != NULL)
		metrics_stats(fp, sc->stats);
	if (sc != NULL && sc->workers != NULL)
		metrics_workers(fp, sc->workers);
	fclose(fp);
	gw_reply_text(r, 200, "text/plain; version=0.0.4; charset=utf-8", text, len);
	free(text);
	if (sc != NULL) {
		json_decref(sc->stats);
		json_decref(sc->workers);
		sc->stats = sc->workers = NULL;
	}
}

static void
metrics_cb(const json_t *msg, bool last, void *arg)
{
	struct gw_req *r = arg;
	struct metrics_scrape *sc = gw_req_state(r, sizeof *sc);

	if (msg != NULL && json_is_true(json_object_get(msg, "ok"))) {
		if (json_object_get(msg, "gpus") != NULL)
			sc->workers = json_deep_copy(msg);
		else
			sc->stats = json_deep_copy(msg);
	}
	if (--sc->pending == 0)
		metrics_reply(r, sc);
}

void
metrics_get(struct gw_req *r)
{
	struct metrics_scrape *sc = gw_req_state(r, sizeof *sc);

	if (sc == NULL || !up_ready())
		return metrics_reply(r, NULL);
	sc->pending = 2;
	if (gw_call(r, json_pack("{s:s}", "op", "stats"), metrics_cb) < 0)
		sc->pending--;
	if (gw_call(r, json_pack("{s:s}", "op", "workers"), metrics_cb) < 0)
		sc->pending--;
	if (sc->pending == 0)
		metrics_reply(r, sc);
}
