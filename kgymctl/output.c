/*
 * output.c -- kgymctl's presentation: tables, key/value views, task
 * verdict lines, the progress bar, raw JSON lines and error messages.
 *
 * Human output goes to stdout, diagnostics and the progress bar to stderr,
 * so `kgymctl ... | script` never sees a carriage return.  The one-line task
 * verdicts are a stable format that scripts may grep; tables are for people.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "output.h"

#define OUTPUT_KEY_WIDTH 18
#define OUTPUT_BAR_WIDTH 30
#define OUTPUT_ERROR_WIDTH 72 /* of the ERROR column of the results table */

struct output_table {
	size_t ncols;
	size_t nrows; /* including the header row */
	size_t cap;
	char **cells; /* nrows x ncols, row-major */
};

static int
output_table_push(struct output_table *t, const char *const *cells)
{
	char **p;
	size_t i, cap;

	if (t->nrows == t->cap) {
		cap = t->cap ? t->cap * 2 : 16;
		p = reallocarray(t->cells, cap * t->ncols, sizeof *p);
		if (p == NULL)
			return -ENOMEM;
		t->cells = p;
		t->cap = cap;
	}
	p = t->cells + t->nrows * t->ncols;
	for (i = 0; i < t->ncols; i++) {
		p[i] = strdup(cells[i] != NULL && cells[i][0] != '\0' ? cells[i] : "-");
		if (p[i] == NULL) {
			while (i-- > 0)
				free(p[i]);
			return -ENOMEM;
		}
	}
	t->nrows++;
	return 0;
}

struct output_table *
output_table_new(size_t ncols, const char *const *headers)
{
	struct output_table *t;

	t = calloc(1, sizeof *t);
	if (t == NULL)
		return NULL;
	t->ncols = ncols;
	if (output_table_push(t, headers) < 0) {
		free(t);
		return NULL;
	}
	return t;
}

void
output_table_free(struct output_table *t)
{
	size_t i;

	if (t == NULL)
		return;
	for (i = 0; i < t->nrows * t->ncols; i++)
		free(t->cells[i]);
	free(t->cells);
	free(t);
}

int
output_table_add(struct output_table *t, const char *const *cells)
{
	return output_table_push(t, cells);
}

size_t
output_table_rows(const struct output_table *t)
{
	return t->nrows - 1;
}

void
output_table_print(const struct output_table *t, FILE *fp)
{
	size_t *width, r, c, len;

	width = calloc(t->ncols, sizeof *width);
	if (width == NULL)
		return;
	for (r = 0; r < t->nrows; r++)
		for (c = 0; c < t->ncols; c++) {
			len = strlen(t->cells[r * t->ncols + c]);
			if (len > width[c])
				width[c] = len;
		}
	for (r = 0; r < t->nrows; r++) {
		for (c = 0; c + 1 < t->ncols; c++)
			fprintf(fp, "%-*s  ", (int)width[c], t->cells[r * t->ncols + c]);
		fprintf(fp, "%s\n", t->cells[r * t->ncols + c]);
	}
	free(width);
}

void
output_kv(FILE *fp, const char *key, const char *fmt, ...)
{
	va_list ap;

	fprintf(fp, "%-*s ", OUTPUT_KEY_WIDTH, key);
	va_start(ap, fmt);
	vfprintf(fp, fmt, ap);
	va_end(ap);
	fputc('\n', fp);
}

const char *
output_scalar(json_t *v, char *buf, size_t size)
{
	if (json_is_string(v))
		snprintf(buf, size, "%s", json_string_value(v));
	else if (json_is_integer(v))
		snprintf(buf, size, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
	else if (json_is_real(v))
		snprintf(buf, size, "%.4g", json_real_value(v));
	else if (json_is_boolean(v))
		snprintf(buf, size, "%s", json_is_true(v) ? "yes" : "no");
	else
		snprintf(buf, size, "-");
	return buf;
}

const char *
output_time_ms(json_t *ms, char *buf, size_t size)
{
	char day[64];
	struct tm tm;
	time_t sec;
	double v;

	if (!json_is_number(ms)) {
		snprintf(buf, size, "-");
		return buf;
	}
	v = json_number_value(ms);
	sec = (time_t)(v / 1000);
	if (localtime_r(&sec, &tm) == NULL ||
	    strftime(day, sizeof day, "%Y-%m-%d %H:%M:%S", &tm) == 0) {
		snprintf(buf, size, "%.0f", v);
		return buf;
	}
	snprintf(buf, size, "%s.%03d", day, (int)(v - (double)sec * 1000));
	return buf;
}

const char *
output_first_line(const char *s, char *buf, size_t size)
{
	size_t n = strcspn(s, "\r\n");

	if (n >= size)
		n = size - 1;
	memcpy(buf, s, n);
	buf[n] = '\0';
	return buf;
}

const char *
output_str(json_t *obj, const char *key)
{
	const char *s = json_string_value(json_object_get(obj, key));

	return s != NULL ? s : "";
}

/* " CODE: first line of the message", or "" when the result has no error. */
static const char *
output_error_summary(json_t *result, char *buf, size_t size)
{
	const char *code, *msg;
	char line[512];

	code = json_string_value(json_object_get(result, "error_code"));
	msg = json_string_value(json_object_get(result, "error_message"));
	if (code == NULL && (msg == NULL || msg[0] == '\0')) {
		buf[0] = '\0';
		return buf;
	}
	if (msg == NULL || msg[0] == '\0')
		snprintf(buf, size, " %s", code);
	else
		snprintf(buf, size, " %s: %s", code != NULL ? code : "ERROR",
		    output_first_line(msg, line, sizeof line));
	return buf;
}

/* " speedup=1.23 runtime_ms=0.456" for what the result has of those. */
static const char *
output_perf_summary(json_t *result, char *buf, size_t size)
{
	json_t *speedup = json_object_get(result, "speedup");
	json_t *runtime = json_object_get(result, "kernel_runtime");
	int n = 0;

	buf[0] = '\0';
	if (json_is_number(speedup))
		n = snprintf(buf, size, " speedup=%.4g", json_number_value(speedup));
	if (json_is_number(runtime) && n >= 0 && (size_t)n < size)
		snprintf(buf + n, size - (size_t)n, " runtime_ms=%.4g", json_number_value(runtime));
	return buf;
}

void
output_task_line(FILE *fp, const char *task_id, const char *state, json_t *result)
{
	json_t *correct = json_object_get(result, "correctness");
	char detail[1024];

	if (strcmp(state, "completed") != 0)
		fprintf(fp, "%s %s%s\n", task_id, state,
		    output_error_summary(result, detail, sizeof detail));
	else if (json_is_false(correct))
		fprintf(fp, "%s completed incorrect%s\n", task_id,
		    output_error_summary(result, detail, sizeof detail));
	else
		fprintf(fp, "%s completed%s%s\n", task_id, json_is_true(correct) ? " correct" : "",
		    output_perf_summary(result, detail, sizeof detail));
}

struct output_table *
output_result_table_new(void)
{
	static const char *const headers[] = {
		"TASK_ID",
		"STATE",
		"CORRECT",
		"SPEEDUP",
		"RUNTIME_MS",
		"ERROR",
	};

	return output_table_new(sizeof headers / sizeof headers[0], headers);
}

int
output_result_table_add(
    struct output_table *t, const char *task_id, const char *state, json_t *result)
{
	char correct[16], speedup[32], runtime[32], error[OUTPUT_ERROR_WIDTH + 2];
	const char *cells[6];

	cells[0] = task_id;
	cells[1] = state;
	cells[2] = output_scalar(json_object_get(result, "correctness"), correct, sizeof correct);
	cells[3] = output_scalar(json_object_get(result, "speedup"), speedup, sizeof speedup);
	cells[4] =
	    output_scalar(json_object_get(result, "kernel_runtime"), runtime, sizeof runtime);
	/* Skip the summary's leading space. */
	cells[5] = output_error_summary(result, error, sizeof error);
	if (cells[5][0] == ' ')
		cells[5]++;
	return output_table_add(t, cells);
}

char *
output_join(json_t *arr)
{
	char *s = NULL, item[256];
	size_t len = 0, i;
	FILE *fp;

	fp = open_memstream(&s, &len);
	if (fp == NULL)
		return NULL;
	for (i = 0; i < json_array_size(arr); i++)
		fprintf(fp, "%s%s", i > 0 ? ", " : "",
		    output_scalar(json_array_get(arr, i), item, sizeof item));
	if (json_array_size(arr) == 0)
		fputs("-", fp);
	if (fclose(fp) != 0) {
		free(s);
		return NULL;
	}
	return s;
}

/* Views of ok replies, one per command. */

void
output_show_hello(json_t *reply)
{
	char *protocols = output_join(json_object_get(reply, "protocol"));
	char *plugins = output_join(json_object_get(reply, "plugins"));

	output_kv(
	    stdout, "daemon", "%s %s", output_str(reply, "daemon"), output_str(reply, "version"));
	output_kv(stdout, "protocol", "%s", protocols ? protocols : "?");
	output_kv(stdout, "plugins", "%s", plugins ? plugins : "?");
	free(protocols);
	free(plugins);
}

void
output_show_health(json_t *reply)
{
	char q[32], r[32];

	printf("%s: %s queued, %s running\n", output_str(reply, "status"),
	    output_scalar(json_object_get(reply, "queued"), q, sizeof q),
	    output_scalar(json_object_get(reply, "running"), r, sizeof r));
}

void
output_show_plugins(json_t *reply)
{
	static const char *const headers[] = { "NAME", "KIND", "VERSION", "SERVES", "PATH" };
	struct output_table *t;
	const char *cells[5];
	json_t *p;
	char *serves;
	size_t i;

	t = output_table_new(5, headers);
	if (t == NULL)
		return;
	json_array_foreach(json_object_get(reply, "plugins"), i, p) {
		serves = output_join(json_object_get(p, "serves"));
		cells[0] = output_str(p, "name");
		cells[1] = output_str(p, "kind");
		cells[2] = output_str(p, "version");
		cells[3] = serves;
		cells[4] = output_str(p, "path");
		output_table_add(t, cells);
		free(serves);
	}
	output_table_print(t, stdout);
	output_table_free(t);
	json_array_foreach(json_object_get(reply, "refused"), i, p)
		printf("refused %s: %s\n", output_str(p, "path"), output_str(p, "reason"));
}

/* "80.0 GiB" */
static const char *
output_bytes(json_t *v, char *buf, size_t size)
{
	if (!json_is_number(v))
		return output_scalar(v, buf, size);
	snprintf(buf, size, "%.1f GiB", json_number_value(v) / (1024.0 * 1024 * 1024));
	return buf;
}

/* One row of the worker table; sandbox reads "seccomp+landlock7" or "OFF". */
static void
output_worker_row(struct output_table *t, json_t *worker)
{
	const char *cells[8];
	char pid[32], jobs[32], sandbox[48];
	json_t *sb = json_object_get(worker, "sandbox");

	if (!json_is_object(sb))
		snprintf(sandbox, sizeof sandbox, "-");
	else if (!json_is_true(json_object_get(sb, "seccomp")))
		snprintf(sandbox, sizeof sandbox, "OFF");
	else
		snprintf(sandbox, sizeof sandbox, "seccomp+landlock%lld",
		    (long long)json_integer_value(json_object_get(sb, "landlock_abi")));
	cells[0] = output_str(worker, "name");
	cells[1] = output_scalar(json_object_get(worker, "pid"), pid, sizeof pid);
	cells[2] = output_str(worker, "state");
	cells[3] = output_str(worker, "task_id");
	cells[4] = output_str(worker, "phase");
	cells[5] = output_scalar(json_object_get(worker, "jobs_done"), jobs, sizeof jobs);
	cells[6] = output_str(worker, "lock");
	cells[7] = sandbox;
	output_table_add(t, cells);
}

static void
output_worker_rows(json_t *gpus, json_t *cpu_workers)
{
	static const char *const headers[] = {
		"WORKER", "PID", "STATE", "TASK", "PHASE", "JOBS", "LOCK", "SANDBOX"
	};
	struct output_table *t;
	json_t *gpu, *worker;
	size_t i, j;

	if ((t = output_table_new(8, headers)) == NULL)
		return;
	json_array_foreach(gpus, i, gpu)
		json_array_foreach(json_object_get(gpu, "workers"), j, worker)
			output_worker_row(t, worker);
	json_array_foreach(cpu_workers, j, worker)
		output_worker_row(t, worker);
	if (output_table_rows(t) > 0) {
		putchar('\n');
		output_table_print(t, stdout);
	}
	output_table_free(t);
}

static void
output_gpu_table(json_t *gpus)
{
	static const char *const headers[] = { "GPU", "NAME", "MEMORY", "LOCK", "WORKERS" };
	char idx[32], mem[32], nworkers[32];
	struct output_table *t;
	const char *cells[5];
	json_t *gpu;
	size_t i;

	t = output_table_new(5, headers);
	if (t == NULL)
		return;
	json_array_foreach(gpus, i, gpu) {
		snprintf(nworkers, sizeof nworkers, "%zu",
		    json_array_size(json_object_get(gpu, "workers")));
		cells[0] = output_scalar(json_object_get(gpu, "index"), idx, sizeof idx);
		cells[1] = output_str(gpu, "name");
		cells[2] = output_bytes(json_object_get(gpu, "memory_bytes"), mem, sizeof mem);
		cells[3] = output_str(gpu, "lock");
		cells[4] = nworkers;
		output_table_add(t, cells);
	}
	output_table_print(t, stdout);
	output_table_free(t);
}

void
output_show_workers(json_t *reply)
{
	json_t *gpus = json_object_get(reply, "gpus");
	char per[32];

	if (json_array_size(gpus) == 0)
		puts("no GPUs");
	else
		output_gpu_table(gpus);
	output_worker_rows(gpus, json_object_get(reply, "cpu_workers"));
	printf("\nworkers per GPU: %s\n",
	    output_scalar(json_object_get(reply, "workers_per_gpu"), per, sizeof per));
	if (json_string_value(json_object_get(reply, "note")) != NULL)
		printf("note: %s\n", output_str(reply, "note"));
}

void
output_show_stats(json_t *reply)
{
	static const char *const states[] = {
		"queued",
		"running",
		"completed",
		"failed",
		"cancelled",
	};
	static const char *const headers[] = { "LATENCY_MS", "P50", "P99" };
	static const char *const kinds[] = { "queue", "run", "status" };
	json_t *tasks = json_object_get(reply, "tasks");
	json_t *lat = json_object_get(reply, "latency_ms");
	char a[32], b[32], c[32], d[32], e[32], f[32];
	struct output_table *t;
	const char *cells[3];
	size_t i;

	output_kv(
	    stdout, "uptime", "%.0f s", json_number_value(json_object_get(reply, "uptime_s")));
	printf("%-18s ", "tasks");
	for (i = 0; i < sizeof states / sizeof states[0]; i++)
		printf("%s%s %s", i > 0 ? ", " : "", states[i],
		    output_scalar(json_object_get(tasks, states[i]), a, sizeof a));
	putchar('\n');
	output_kv(stdout, "submitted", "%s",
	    output_scalar(json_object_get(reply, "submitted_total"), b, sizeof b));
	output_kv(stdout, "finished", "%s",
	    output_scalar(json_object_get(reply, "finished_total"), c, sizeof c));
	output_kv(stdout, "throughput", "%s /min",
	    output_scalar(json_object_get(reply, "throughput_per_min"), d, sizeof d));
	output_kv(stdout, "queue depth", "%s",
	    output_scalar(json_object_get(reply, "queue_depth"), e, sizeof e));
	output_kv(stdout, "connections", "%s",
	    output_scalar(json_object_get(reply, "connections"), f, sizeof f));

	t = output_table_new(3, headers);
	if (t == NULL)
		return;
	for (i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
		cells[0] = kinds[i];
		cells[1] = output_scalar(
		    json_object_get(json_object_get(lat, kinds[i]), "p50"), a, sizeof a);
		cells[2] = output_scalar(
		    json_object_get(json_object_get(lat, kinds[i]), "p99"), b, sizeof b);
		output_table_add(t, cells);
	}
	putchar('\n');
	output_table_print(t, stdout);
	output_table_free(t);
}

void
output_show_list(json_t *reply)
{
	static const char *const headers[] = { "TASK_ID", "STATE", "WORKFLOW", "PRIORITY",
		"ATTEMPT", "CREATED", "ERROR" };
	char attempt[32], created[64];
	struct output_table *t;
	const char *cells[7];
	json_t *task;
	size_t i;

	t = output_table_new(7, headers);
	if (t == NULL)
		return;
	json_array_foreach(json_object_get(reply, "tasks"), i, task) {
		cells[0] = output_str(task, "task_id");
		cells[1] = output_str(task, "state");
		cells[2] = output_str(task, "workflow");
		cells[3] = output_str(task, "priority");
		cells[4] = output_scalar(json_object_get(task, "attempt"), attempt, sizeof attempt);
		cells[5] =
		    output_time_ms(json_object_get(task, "created_ms"), created, sizeof created);
		cells[6] = output_str(task, "error_code");
		output_table_add(t, cells);
	}
	output_table_print(t, stdout);
	output_table_free(t);
}

/* The full error message last: it may be a compiler log of many lines. */
static void
output_error_message(json_t *obj)
{
	const char *msg = json_string_value(json_object_get(obj, "error_message"));
	size_t len;

	if (msg == NULL || msg[0] == '\0')
		return;
	len = strlen(msg);
	printf("error_message:\n%s%s", msg, msg[len - 1] == '\n' ? "" : "\n");
}

void
output_show_status(json_t *reply)
{
	static const char *const times[][2] = {
		{ "created", "created_ms" },
		{ "started", "started_ms" },
		{ "finished", "finished_ms" },
	};
	char buf[64];
	size_t i;

	output_kv(stdout, "task_id", "%s", output_str(reply, "task_id"));
	output_kv(stdout, "state", "%s", output_str(reply, "state"));
	output_kv(stdout, "workflow", "%s", output_str(reply, "workflow"));
	output_kv(stdout, "priority", "%s", output_str(reply, "priority"));
	output_kv(stdout, "attempt", "%s",
	    output_scalar(json_object_get(reply, "attempt"), buf, sizeof buf));
	for (i = 0; i < sizeof times / sizeof times[0]; i++)
		if (json_object_get(reply, times[i][1]) != NULL)
			output_kv(stdout, times[i][0], "%s",
			    output_time_ms(json_object_get(reply, times[i][1]), buf, sizeof buf));
	if (json_object_get(reply, "error_code") != NULL)
		output_kv(stdout, "error_code", "%s", output_str(reply, "error_code"));
	output_error_message(reply);
}

void
output_show_result(json_t *reply)
{
	static const char *const fields[] = {
		"status",
		"compiled",
		"correctness",
		"decoy_kernel",
		"speedup",
		"kernel_runtime",
		"reference_runtime",
		"error_code",
	};
	static const char *const meta[] = {
		"attempt",
		"queue_ms",
		"compile_ms",
		"run_ms",
		"gpu",
		"worker",
	};
	json_t *result = json_object_get(reply, "result");
	json_t *md = json_object_get(result, "metadata");
	char buf[256];
	size_t i;

	output_kv(stdout, "task_id", "%s", output_str(reply, "task_id"));
	output_kv(stdout, "state", "%s", output_str(reply, "state"));
	for (i = 0; i < sizeof fields / sizeof fields[0]; i++)
		if (json_object_get(result, fields[i]) != NULL)
			output_kv(stdout, fields[i], "%s%s",
			    output_scalar(json_object_get(result, fields[i]), buf, sizeof buf),
			    strstr(fields[i], "runtime") != NULL ? " ms" : "");
	for (i = 0; i < sizeof meta / sizeof meta[0]; i++)
		if (json_object_get(md, meta[i]) != NULL)
			output_kv(stdout, meta[i], "%s",
			    output_scalar(json_object_get(md, meta[i]), buf, sizeof buf));
	output_error_message(result);
}

void
output_show_cancel(json_t *reply)
{
	if (json_is_true(json_object_get(reply, "cancelled")))
		printf("%s cancelled\n", output_str(reply, "task_id"));
	else
		printf("%s not cancelled: already %s\n", output_str(reply, "task_id"),
		    output_str(reply, "state"));
}

void
output_show_drain(json_t *reply)
{
	puts("kgymd is draining: no new tasks; queued and running ones will finish");
}

void
output_show_shutdown(json_t *reply)
{
	puts("kgymd is stopping");
}

void
output_progress(FILE *fp, size_t done, size_t total, size_t incorrect, size_t failed)
{
	char bar[OUTPUT_BAR_WIDTH + 1];
	size_t fill = total > 0 ? done * OUTPUT_BAR_WIDTH / total : 0;

	memset(bar, '#', fill);
	memset(bar + fill, '.', OUTPUT_BAR_WIDTH - fill);
	bar[OUTPUT_BAR_WIDTH] = '\0';
	fprintf(fp, "\r[%s] %zu/%zu done, %zu incorrect, %zu failed", bar, done, total,
	    incorrect, failed);
	fflush(fp);
}

void
output_progress_end(FILE *fp)
{
	fputc('\n', fp);
	fflush(fp);
}

void
output_json_line(const char *line, size_t len, void *arg)
{
	fwrite(line, 1, len, stdout);
	fputc('\n', stdout);
	fflush(stdout);
}

void
output_error(const char *code, const char *message)
{
	output_warnx("%s: %s", code, message);
}

void
output_warnx(const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	fputs("kgymctl: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}
