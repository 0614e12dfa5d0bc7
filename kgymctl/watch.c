/*
 * watch.c -- the tasks kgymctl follows until they end (watch.h).  Split from
 * kgymctl.c, which parses the command line and talks to kgymd.
 */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "output.h"
#include "watch.h"

enum outcome
task_outcome(const char *state, json_t *result)
{
	if (strcmp(state, "cancelled") == 0)
		return OUTCOME_CANCELLED;
	if (strcmp(state, "completed") != 0 ||
	    strcmp(output_str(result, "status"), "failed") == 0)
		return OUTCOME_FAILED;
	if (json_is_false(json_object_get(result, "correctness")))
		return OUTCOME_INCORRECT;
	return OUTCOME_CORRECT;
}

/* One JSON object on one line of stdout (--json's per-task lines). */
void
print_json_object(json_t *o)
{
	char *line = o != NULL ? json_dumps(o, JSON_COMPACT) : NULL;

	if (line != NULL) {
		fputs(line, stdout);
		fputc('\n', stdout);
		fflush(stdout);
	}
	free(line);
}


int
watch_init(struct watch *w, bool interactive, bool json)
{
	memset(w, 0, sizeof *w);
	w->records = json_array();
	w->by_id = json_object();
	if (w->records == NULL || w->by_id == NULL) {
		json_decref(w->records);
		json_decref(w->by_id);
		return -ENOMEM;
	}
	w->json = json;
	w->interactive = interactive && !json;
	w->bar = w->interactive && isatty(STDERR_FILENO);
	return 0;
}

void
watch_clear(struct watch *w)
{
	/* An error cut the wait short: do not leave the cursor on the bar. */
	if (w->bar_shown)
		output_progress_end(stderr);
	json_decref(w->records);
	json_decref(w->by_id);
}

void
watch_draw(struct watch *w)
{
	if (!w->bar)
		return;
	output_progress(stderr, w->ended, json_array_size(w->records),
	    w->count[OUTCOME_INCORRECT], w->count[OUTCOME_FAILED] + w->count[OUTCOME_CANCELLED]);
	w->bar_shown = true;
}

/* A line on stderr that must not be overwritten by the bar. */

void
watch_note(struct watch *w, const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	if (w->bar_shown)
		fputs("\r\033[K", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	if (w->bar_shown)
		watch_draw(w);
}

/* Follow task_id (once, however often it is added). */
json_t *
watch_add(struct watch *w, const char *task_id, const char *state)
{
	json_t *rec = json_object_get(w->by_id, task_id);

	if (rec != NULL)
		return rec;
	rec = json_pack("{s:s, s:s}", "task_id", task_id, "state", state);
	if (rec == NULL || json_object_set_new(w->by_id, task_id, rec) < 0)
		return NULL;
	if (json_array_append(w->records, rec) < 0) {
		json_object_del(w->by_id, task_id);
		return NULL;
	}
	return rec;
}

/* An Event line: the task ended. */
void
watch_event(struct watch *w, json_t *msg)
{
	const char *task_id = output_str(msg, "task_id");
	const char *state = output_str(msg, "state");
	json_t *result = json_object_get(msg, "result");
	json_t *rec, *line;
	enum outcome outcome;
	bool earlier;

	rec = watch_add(w, task_id, "pending");
	if (rec == NULL || json_object_get(rec, "ended") != NULL)
		return;
	json_object_set_new(rec, "state", json_string(state));
	json_object_set_new(rec, "ended", json_true());
	if (result != NULL)
		json_object_set(rec, "result", result);
	outcome = task_outcome(state, result);
	earlier = json_is_true(json_object_get(rec, "existing"));
	w->ended++;
	w->count[outcome]++;
	w->bad += outcome != OUTCOME_CORRECT;
	w->earlier += earlier;
	if (w->json) {
		/* One result per line: the task, how it ended, and whether anew. */
		line = json_pack("{s:s, s:s, s:b, s:O?}", "task_id", task_id, "state", state,
		    "existing", earlier, "result", result);
		print_json_object(line);
		json_decref(line);
		return;
	}
	if (w->interactive) {
		watch_draw(w);
		return;
	}
	output_task_line(stdout, task_id, state, result);
	fflush(stdout);
}

/* Tasks the daemon gave up waiting for, or never knew. */
void
watch_mark(struct watch *w, json_t *ids, const char *state)
{
	size_t i;
	json_t *id, *rec;

	json_array_foreach(ids, i, id) {
		if (!json_is_string(id))
			continue;
		rec = watch_add(w, json_string_value(id), state);
		if (rec == NULL)
			continue;
		json_object_set_new(rec, "state", json_string(state));
		w->not_found += strcmp(state, "not found") == 0;
		if (w->json) {
			json_t *line = json_pack("{s:s, s:s}", "task_id",
			    json_string_value(id), "state", state);

			print_json_object(line);
			json_decref(line);
		}
		if (!w->json && !w->interactive && strcmp(state, "pending") == 0)
			printf("%s pending\n", json_string_value(id));
		else if (strcmp(state, "pending") != 0)
			watch_note(w, "kgymctl: not_found: %s", json_string_value(id));
	}
}

/*
 * After a batch (more than one task, or one rejected), a summary on stderr
 * (stdout keeps one line per task): the counts by outcome, incorrect apart
 * from failed, and how many results were an earlier submission's.
 */
void
watch_summary(struct watch *w, size_t rejected)
{
	size_t total = json_array_size(w->records) + rejected;
	size_t unfinished = json_array_size(w->records) - w->ended - w->not_found;

	if (total < 2)
		return;
	fflush(stdout);
	fprintf(stderr, "kgymctl: %zu tasks: %zu correct, %zu incorrect, %zu failed, "
	    "%zu cancelled", total, w->count[OUTCOME_CORRECT], w->count[OUTCOME_INCORRECT],
	    w->count[OUTCOME_FAILED], w->count[OUTCOME_CANCELLED]);
	if (unfinished > 0)
		fprintf(stderr, ", %zu unfinished", unfinished);
	if (w->not_found > 0)
		fprintf(stderr, ", %zu not found", w->not_found);
	if (rejected > 0)
		fprintf(stderr, ", %zu rejected", rejected);
	if (w->earlier > 0)
		fprintf(stderr, " (%zu of them submitted before: earlier results)", w->earlier);
	fputc('\n', stderr);
}

/* Finish the bar and, for a person, show the table of results. */
void
watch_finish(struct watch *w)
{
	struct output_table *t;
	json_t *rec;
	size_t i;

	if (w->bar_shown)
		output_progress_end(stderr);
	w->bar_shown = false;
	if (!w->interactive)
		return;
	t = output_result_table_new();
	if (t == NULL)
		return;
	json_array_foreach(w->records, i, rec)
		output_result_table_add(t, output_str(rec, "task_id"), output_str(rec, "state"),
		    json_object_get(rec, "result"));
	output_table_print(t, stdout);
	output_table_free(t);
}

