/*
 * watch.h -- the tasks kgymctl follows until they end (submit --wait, wait):
 * their records in submission order, the counts by outcome, the progress
 * bar or one line per task, and the summary after a batch.
 *
 * Ownership: watch_init() fills a caller-owned struct watch that
 * watch_clear() empties; json_t arguments are borrowed, watch_add()'s
 * record is borrowed from the watch.
 */
#ifndef KGYMCTL_WATCH_H
#define KGYMCTL_WATCH_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

/*
 * How a task ended, for the counts: incorrect (it ran, and its outputs were
 * wrong: a verdict on the candidate) is kept apart from failed (it did not
 * get that far, or kgymd could not judge it), since reward code treats them
 * differently.
 */
enum outcome {
	OUTCOME_CORRECT,
	OUTCOME_INCORRECT,
	OUTCOME_FAILED,
	OUTCOME_CANCELLED,
	OUTCOME__COUNT,
};

/*
 * Tasks being followed until they end.  Records are JSON objects
 * {"task_id","state","result"} kept in submission order, indexed by id.
 */
struct watch {
	json_t *records;
	json_t *by_id;
	size_t ended;
	size_t bad;		  /* failed, incorrect or cancelled */
	size_t count[OUTCOME__COUNT];
	size_t earlier;		  /* results of an earlier submission of the id */
	size_t not_found;	  /* ids kgymd does not know (wait) */
	bool json;		  /* --json: a JSON object per task on stdout */
	bool interactive; /* a person watches: bar and table, not lines */
	bool bar;	  /* draw the progress bar on stderr */
	bool bar_shown;
};

enum outcome task_outcome(const char *state, json_t *result);
/* One JSON object on one line of stdout (--json's per-task lines). */
void	print_json_object(json_t *o);

/* -ENOMEM; json: --json (no bar, no table: a JSON object per task). */
int	watch_init(struct watch *w, bool interactive, bool json);
void	watch_clear(struct watch *w);
void	watch_draw(struct watch *w);
void	watch_note(struct watch *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Follow task_id (in `state`); its record, or NULL when out of memory. */
json_t	*watch_add(struct watch *w, const char *task_id, const char *state);
/* An event line of kgymd's: a followed task ended. */
void	watch_event(struct watch *w, json_t *msg);
/* Tasks still in `ids` at the end of a wait: marked `state`. */
void	watch_mark(struct watch *w, json_t *ids, const char *state);
/* The counts by outcome after a batch (on stderr; stdout keeps its lines). */
void	watch_summary(struct watch *w, size_t rejected);
/* The bar put away and, for a person, the table of results. */
void	watch_finish(struct watch *w);

#endif
