/*
 * stats.c -- counters and latency figures for the `stats` op.
 *
 * Latencies are kept as the last STATS_SAMPLES samples of each kind in a
 * ring, and percentiles are computed from a sorted copy when asked: exact
 * over a recent window, cheap to record, and bounded in memory whatever the
 * task rate.  Throughput is a per-second ring of finish counts covering the
 * last minute.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kgymd.h"

#define STATS_SAMPLES	8192
#define STATS_WINDOW_S	60

struct stats_ring {
	uint32_t us[STATS_SAMPLES];
	size_t n;			/* samples recorded, ever */
};

static struct stats_ring stats_queue, stats_run, stats_status;
static uint64_t stats_submitted, stats_finished[TASK__STATE_COUNT];
static uint64_t stats_requests[OP__COUNT];
static uint32_t stats_per_second[STATS_WINDOW_S];
static uint64_t stats_second_of[STATS_WINDOW_S];
static uint64_t stats_started_us;

uint64_t
stats_now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

int64_t
stats_wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void
stats_init(void)
{
	stats_started_us = stats_now_us();
}

static void
stats_ring_add(struct stats_ring *r, uint64_t us)
{
	r->us[r->n % STATS_SAMPLES] = us > UINT32_MAX ? UINT32_MAX : (uint32_t)us;
	r->n++;
}

static int
stats_cmp(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

/* {"p50":ms,"p99":ms,"samples":n} over the ring's window. */
static json_t *
stats_ring_describe(const struct stats_ring *r)
{
	size_t n = r->n < STATS_SAMPLES ? r->n : STATS_SAMPLES;
	uint32_t *copy;
	json_t *o;

	if (n == 0)
		return json_pack("{s:n, s:n, s:i}", "p50", "p99", "samples", 0);
	if ((copy = malloc(n * sizeof *copy)) == NULL)
		return json_null();
	memcpy(copy, r->us, n * sizeof *copy);
	qsort(copy, n, sizeof *copy, stats_cmp);
	o = json_pack("{s:f, s:f, s:I}", "p50", copy[(n - 1) / 2] / 1000.0,
	    "p99", copy[(n - 1) * 99 / 100] / 1000.0, "samples", (json_int_t)n);
	free(copy);
	return o;
}

void
stats_task_submitted(void)
{
	stats_submitted++;
}

void
stats_task_done(enum task_state state, uint64_t queue_us, uint64_t run_us)
{
	uint64_t sec = stats_now_us() / 1000000u;
	size_t slot = sec % STATS_WINDOW_S;

	stats_finished[state]++;
	stats_ring_add(&stats_queue, queue_us);
	if (run_us > 0)
		stats_ring_add(&stats_run, run_us);
	if (stats_second_of[slot] != sec) {
		stats_second_of[slot] = sec;
		stats_per_second[slot] = 0;
	}
	stats_per_second[slot]++;
}

void
stats_request(enum proto_op op, uint64_t us)
{
	if ((unsigned)op < OP__COUNT)
		stats_requests[op]++;
	if (op == OP_STATUS)
		stats_ring_add(&stats_status, us);
}

json_t *
stats_describe(void)
{
	int64_t counts[TASK__STATE_COUNT] = { 0 };
	uint64_t sec = stats_now_us() / 1000000u, last_minute = 0, finished = 0;
	json_t *o, *tasks, *requests;
	int i;

	for (i = 0; i < STATS_WINDOW_S; i++)
		if (sec - stats_second_of[i] < STATS_WINDOW_S)
			last_minute += stats_per_second[i];
	tasks = json_object();
	if (store_count(kgymd_store, counts) == 0)
		for (i = 0; i < TASK__STATE_COUNT; i++)
			json_object_set_new(tasks, proto_state_name(i), json_integer(counts[i]));
	for (i = 0; i < TASK__STATE_COUNT; i++)
		finished += stats_finished[i];
	requests = json_object();
	for (i = 0; i < OP__COUNT; i++)
		json_object_set_new(requests, proto_op_name(i),
		    json_integer((json_int_t)stats_requests[i]));
	o = json_object();
	json_object_set_new(o, "uptime_s",
	    json_real((double)(stats_now_us() - stats_started_us) / 1e6));
	json_object_set_new(o, "tasks", tasks);
	json_object_set_new(o, "submitted_total", json_integer((json_int_t)stats_submitted));
	json_object_set_new(o, "finished_total", json_integer((json_int_t)finished));
	json_object_set_new(o, "throughput_per_min", json_integer((json_int_t)last_minute));
	json_object_set_new(o, "queue_depth", json_integer((json_int_t)sched_queued()));
	json_object_set_new(o, "running", json_integer((json_int_t)sched_running()));
	json_object_set_new(o, "connections", json_integer((json_int_t)control_connections()));
	json_object_set_new(o, "waiters", json_integer((json_int_t)wait_count()));
	json_object_set_new(o, "requests", requests);
	json_object_set_new(o, "latency_ms", json_pack("{s:o, s:o, s:o}",
	    "queue", stats_ring_describe(&stats_queue),
	    "run", stats_ring_describe(&stats_run),
	    "status", stats_ring_describe(&stats_status)));
	return o;
}
