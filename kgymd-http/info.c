/*
 * info.c -- the endpoints that describe the service: GET /, GET /health,
 * GET /workers/status and GET /queue/status.
 *
 * Each answers from kgymd's own figures (its hello, health, workers and
 * stats ops), asked at request time: the gateway keeps no copy to go stale.
 */
#include "config.h"

#include <string.h>

#include "gateway.h"

static void
info_health_cb(const json_t *msg, bool last, void *arg)
{
	struct gw_req *r = arg;
	const char *status;
	json_t *out;

	if (msg == NULL || !json_is_true(json_object_get(msg, "ok"))) {
		out = json_pack("{s:s, s:s, s:o}", "status", "unhealthy", "reason",
		    msg == NULL ? up_why_down() : "kgymd answered health with an error",
		    "timestamp", shape_time(shape_now_ms()));
		gw_reply_json(r, 503, out);
		json_decref(out);
		return;
	}
	status = json_string_value(json_object_get(msg, "status"));
	out = json_pack("{s:s, s:o, s:{s:O?, s:O?}, s:O?, s:s, s:b}", "status",
	    status != NULL ? status : "unknown", "timestamp",
	    shape_time(shape_now_ms()), "queue_status", "pending",
	    json_object_get(msg, "queued"), "processing",
	    json_object_get(msg, "running"), "active_tasks",
	    json_object_get(msg, "running"), "service", "kgymd-http", "kgymd_connected",
	    1);
	if (status == NULL || strcmp(status, "healthy") != 0)
		json_object_set_new(out, "reason",
		    json_string(status != NULL && strcmp(status, "draining") == 0 ?
			    "kgymd is draining: it accepts no new tasks" :
			    "kgymd is not healthy"));
	gw_reply_json(
	    r, status != NULL && strcmp(status, "healthy") == 0 ? 200 : 503, out);
	json_decref(out);
}

void
info_health(struct gw_req *r)
{
	if (!up_ready() ||
	    gw_call(r, json_pack("{s:s}", "op", "health"), info_health_cb) < 0)
		info_health_cb(NULL, true, r);
}

static void
info_workers_cb(const json_t *msg, bool last, void *arg)
{
	struct gw_req *r = arg;
	json_t *out;

	if (msg == NULL)
		return gw_reply_unavailable(r);
	if (!json_is_true(json_object_get(msg, "ok")))
		return gw_reply_kgymd_error(r, msg, NULL, NULL);
	out = json_deep_copy(msg);
	json_object_del(out, "v");
	json_object_del(out, "id");
	json_object_del(out, "ok");
	json_object_set_new(out, "timestamp", shape_time(shape_now_ms()));
	gw_reply_json(r, 200, out);
	json_decref(out);
}

void
info_workers(struct gw_req *r)
{
	if (gw_call(r, json_pack("{s:s}", "op", "workers"), info_workers_cb) < 0)
		gw_reply_unavailable(r);
}

/* KernelGYM's queue figures (pending, processing, ...) from kgymd's stats. */
static json_t *
info_queue_body(const json_t *stats)
{
	const json_t *tasks = json_object_get(stats, "tasks");

	return json_pack(
	    "{s:O?, s:O?, s:O?, s:O?, s:O?, s:O?, s:O?, s:O?, s:O?, s:O?, s:o}",
	    "pending", json_object_get(tasks, "queued"), "processing",
	    json_object_get(tasks, "running"), "completed",
	    json_object_get(tasks, "completed"), "failed",
	    json_object_get(tasks, "failed"), "cancelled",
	    json_object_get(tasks, "cancelled"), "queue_depth",
	    json_object_get(stats, "queue_depth"), "throughput_per_min",
	    json_object_get(stats, "throughput_per_min"), "submitted_total",
	    json_object_get(stats, "submitted_total"), "finished_total",
	    json_object_get(stats, "finished_total"), "latency_ms",
	    json_object_get(stats, "latency_ms"), "timestamp",
	    shape_time(shape_now_ms()));
}

static void
info_queue_cb(const json_t *msg, bool last, void *arg)
{
	struct gw_req *r = arg;
	json_t *out;

	if (msg == NULL)
		return gw_reply_unavailable(r);
	if (!json_is_true(json_object_get(msg, "ok")))
		return gw_reply_kgymd_error(r, msg, NULL, NULL);
	out = info_queue_body(msg);
	gw_reply_json(r, 200, out);
	json_decref(out);
}

void
info_queue(struct gw_req *r)
{
	if (gw_call(r, json_pack("{s:s}", "op", "stats"), info_queue_cb) < 0)
		gw_reply_unavailable(r);
}

static json_t *
info_root_body(const json_t *stats)
{
	return json_pack("{s:s, s:s, s:s, s:b, s:o, s:O?, s:[sssssssssssss]}",
	    "service", "kgymd-http", "version", PACKAGE_VERSION, "api", "KernelGYM",
	    "kgymd_connected", up_ready(), "queue",
	    stats != NULL ? info_queue_body(stats) : json_null(), "uptime_s",
	    json_object_get(stats, "uptime_s"), "endpoints", "POST /evaluate",
	    "POST /evaluate/batch", "POST /workflow/submit",
	    "GET /workflow/results/{task_id}", "GET /status/{task_id}",
	    "GET /results/{task_id}", "DELETE /tasks/{task_id}", "GET /health",
	    "GET /metrics", "GET /workers/status", "GET /queue/status", "GET /",
	    "(bearer tokens when configured)");
}

static void
info_root_cb(const json_t *msg, bool last, void *arg)
{
	struct gw_req *r = arg;
	json_t *out;

	out = info_root_body(
	    msg != NULL && json_is_true(json_object_get(msg, "ok")) ? msg : NULL);
	gw_reply_json(r, 200, out);
	json_decref(out);
}

void
info_root(struct gw_req *r)
{
	if (!up_ready() ||
	    gw_call(r, json_pack("{s:s}", "op", "stats"), info_root_cb) < 0)
		info_root_cb(NULL, true, r);
}
