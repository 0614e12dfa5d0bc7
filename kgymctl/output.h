/*
 * output.h -- how kgymctl shows things: aligned tables, key/value views,
 * one-line task verdicts, the progress bar, raw JSON lines and errors.
 *
 * Nothing here talks to kgymd; kgymctl.c decides what to show, this file how.
 * Ownership: output_table_new() returns an owned table (output_table_free(NULL)
 * is a no-op) that keeps its own copies of headers and cells; json_t
 * arguments are borrowed.
 */
#ifndef KGYMCTL_OUTPUT_H
#define KGYMCTL_OUTPUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include <jansson.h>

struct output_table;

/* A table of ncols columns; headers[ncols] are the column titles. */
struct output_table *output_table_new(size_t ncols, const char *const *headers);
void output_table_free(struct output_table *t);
/* Append a row of ncols cells; a NULL or empty cell shows as "-".  -ENOMEM. */
int output_table_add(struct output_table *t, const char *const *cells);
size_t output_table_rows(const struct output_table *t);
/* Print with every column but the last padded to its widest cell. */
void output_table_print(const struct output_table *t, FILE *fp);

/* The string member key of obj, or "" when absent or not a string. */
const char *output_str(json_t *obj, const char *key);

/* "key" padded to a fixed column, then the formatted value. */
void output_kv(FILE *fp, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/*
 * Render a JSON scalar for humans into buf: strings as they are, integers,
 * reals with up to 4 significant digits, booleans as yes/no, and NULL, null
 * or anything else as "-".  Returns buf.
 */
const char *output_scalar(json_t *v, char *buf, size_t size);
/* Epoch milliseconds as local "YYYY-MM-DD HH:MM:SS.mmm"; "-" if not a number. */
const char *output_time_ms(json_t *ms, char *buf, size_t size);
/* The scalars of an array joined with ", " ("-" if empty); malloc'd, NULL: ENOMEM. */
char *output_join(json_t *arr);
/* The first line of s (without its newline), truncated to fit buf. */
const char *output_first_line(const char *s, char *buf, size_t size);

/*
 * One line for a task that ended, for scripts and logs:
 *   ID completed correct speedup=1.23 runtime_ms=0.456
 *   ID completed incorrect CORRECTNESS_ERROR: first line of message
 *   ID failed COMPILATION_ERROR: first line of message
 */
void output_task_line(FILE *fp, const char *task_id, const char *state, json_t *result);
/* The table of task results shown after a progress bar, and its rows. */
struct output_table *output_result_table_new(void);
int output_result_table_add(
    struct output_table *t, const char *task_id, const char *state, json_t *result);

/*
 * Human views of the ok replies of hello, health, plugins, workers, stats,
 * list, status, result, cancel, drain and shutdown, on stdout.  result and
 * status end with the full error_message (a compiler log may be long).
 */
void output_show_hello(json_t *reply);
void output_show_health(json_t *reply);
void output_show_plugins(json_t *reply);
void output_show_workers(json_t *reply);
void output_show_stats(json_t *reply);
void output_show_list(json_t *reply);
void output_show_status(json_t *reply);
void output_show_result(json_t *reply);
void output_show_cancel(json_t *reply);
void output_show_drain(json_t *reply);
void output_show_shutdown(json_t *reply);

/*
 * Redraw "[#####.....] 37/100 done, 1 incorrect, 2 failed" in place (failed
 * counts cancelled tasks too); _end finishes the line.
 */
void output_progress(FILE *fp, size_t done, size_t total, size_t incorrect, size_t failed);
void output_progress_end(FILE *fp);

/* Write one received line as it came, newline-terminated, and flush. */
void output_json_line(const char *line, size_t len, void *arg);

/* "kgymctl: CODE: MESSAGE" and "kgymctl: message" on stderr. */
void output_error(const char *code, const char *message);
void output_warnx(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif /* KGYMCTL_OUTPUT_H */
