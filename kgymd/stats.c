/*
 * stats.c -- counters and latency figures for the `stats` op.
 *
 * `stats` must cost the same with ten tasks stored or ten million, since a
 * client may ask for it in a loop while others wait: everything it reports
 * is kept up to date as things happen, and nothing is counted or sorted
 * when it is asked.  Tasks by state: queued and running are the scheduler's
 * counts; terminal states start from one count of the store at start-up
 * and follow every task that ends and every row pruned.
 *
 * Latencies are kept as the last STATS_SAMPLES samples of each kind in a
 * ring, and in a histogram of that ring's contents (each sample leaving the
 * ring leaves its bucket): percentiles over a recent window, read by walking
 * STATS_BUCKETS counters.  Buckets are log-linear, STATS_SUB per power of
 * two, so a percentile is exact below STATS_SUB us and within 1/STATS_SUB
 * above.  Throughput is a per-second ring of finish counts covering the
 * last minute.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kgymd.h"

#define STATS_SAMPLES	8192
#define STATS_WINDOW_S	60
#define STATS_SUB_BITS	4
#define STATS_SUB	(1u << STATS_SUB_BITS)
/* 32-bit microseconds: exponents 0..(32 - STATS_SUB_BITS), STATS_SUB each. */
#define STATS_BUCKETS	((32 - STATS_SUB_BITS + 1) * STATS_SUB)

struct stats_ring {
	uint32_t us[STATS_SAMPLES];
	uint32_t hist[STATS_BUCKETS];	/* the ring's samples by bucket */
	size_t n;			/* samples recorded, ever */
};

static struct stats_ring stats_queue, stats_run, stats_status;
static uint64_t stats_submitted, stats_finished[TASK__STATE_COUNT];
static int64_t stats_stored[TASK__STATE_COUNT];	/* terminal rows in the store */
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

void
stats_set_stored(const int64_t counts[TASK__STATE_COUNT])
{
	int i;

	for (i = 0; i < TASK__STATE_COUNT; i++)
		stats_stored[i] = proto_state_terminal(i) ? counts[i] : 0;
}

void
stats_pruned(const int64_t counts[TASK__STATE_COUNT])
{
	int i;

	for (i = 0; i < TASK__STATE_COUNT; i++) {
		stats_stored[i] -= counts[i];
		if (stats_stored[i] < 0)
			stats_stored[i] = 0;
	}
}

/* The bucket of a value: its top STATS_SUB_BITS + 1 bits. */
static unsigned int
stats_bucket(uint32_t v)
{
	unsigned int exp;

	if (v < STATS_SUB)
		return v;
	exp = 31u - (unsigned int)__builtin_clz(v) - STATS_SUB_BITS + 1;
	return exp * STATS_SUB + ((v >> (exp - 1)) & (STATS_SUB - 1));
}

/* The middle of a bucket's range of values. */
static double
stats_bucket_value(unsigned int b)
{
	unsigned int exp = b / STATS_SUB, sub = b % STATS_SUB;
	double lo;

	if (exp == 0)
		return (double)b;
	lo = (double)((uint64_t)(STATS_SUB + sub) << (exp - 1));
	return lo + (double)((uint64_t)1 << (exp - 1)) / 2.0 - 0.5;
}

static void
stats_ring_add(struct stats_ring *r, uint64_t us)
{
	uint32_t v = us > UINT32_MAX ? UINT32_MAX : (uint32_t)us;
	size_t slot = r->n % STATS_SAMPLES;

	if (r->n >= STATS_SAMPLES)
		r->hist[stats_bucket(r->us[slot])]--;
	r->us[slot] = v;
	r->hist[stats_bucket(v)]++;
	r->n++;
}

/* The value at rank `rank` (0-based) of the window, in ms. */
static double
stats_ring_rank(const struct stats_ring *r, size_t rank)
{
	size_t seen = 0;
	unsigned int b;

	for (b = 0; b < STATS_BUCKETS; b++) {
		seen += r->hist[b];
		if (seen > rank)
			return stats_bucket_value(b) / 1000.0;
	}
	return 0;
}

/* {"p50":ms,"p99":ms,"samples":n} over the ring's window. */
static json_t *
stats_ring_describe(const struct stats_ring *r)
{
	size_t n = r->n < STATS_SAMPLES ? r->n : STATS_SAMPLES;

	if (n == 0)
		return json_pack("{s:n, s:n, s:i}", "p50", "p99", "samples", 0);
	return json_pack("{s:f, s:f, s:I}", "p50", stats_ring_rank(r, (n - 1) / 2),
	    "p99", stats_ring_rank(r, (n - 1) * 99 / 100), "samples", (json_int_t)n);
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
	stats_stored[state]++;
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
	uint64_t sec = stats_now_us() / 1000000u, last_minute = 0, finished = 0;
	json_t *o, *tasks, *requests;
	int64_t n;
	int i;

	for (i = 0; i < STATS_WINDOW_S; i++)
		if (sec - stats_second_of[i] < STATS_WINDOW_S)
			last_minute += stats_per_second[i];
	tasks = json_object();
	for (i = 0; i < TASK__STATE_COUNT; i++) {
		n = i == TASK_QUEUED ? (int64_t)sched_queued() :
		    i == TASK_RUNNING ? (int64_t)sched_running() : stats_stored[i];
		json_object_set_new(tasks, proto_state_name(i), json_integer(n));
	}
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
	/*
	 * cycle: control.c reports each request's latency here, and stats
	 * reads back two of its gauges -- plain counters, no callback, so the
	 * two never call each other in one chain.
	 */
	json_object_set_new(o, "connections", json_integer((json_int_t)control_connections()));
	json_object_set_new(o, "input_bytes",
	    json_integer((json_int_t)control_input_bytes()));	/* cycle: as above */
	json_object_set_new(o, "waiters", json_integer((json_int_t)wait_count()));
	json_object_set_new(o, "requests", requests);
	json_object_set_new(o, "latency_ms", json_pack("{s:o, s:o, s:o}",
	    "queue", stats_ring_describe(&stats_queue),
	    "run", stats_ring_describe(&stats_run),
	    "status", stats_ring_describe(&stats_status)));
	return o;
}
