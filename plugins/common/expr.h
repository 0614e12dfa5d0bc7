/*
 * expr.h -- integer expressions of the native payload (kgymd-protocol(7), "Native tasks").
 *
 * Grid and block dimensions, shared memory sizes, tensor shapes and integer
 * kernel arguments are written as small expressions over the problem's size
 * symbols: "cdiv(N,256)", "N*M", "max(1, K/4)".  The grammar:
 *
 *	expr    := term (('+' | '-') term)*
 *	term    := unary (('*' | '/' | '%') unary)*
 *	unary   := '-' unary | primary
 *	primary := NUMBER | NAME | FUNC '(' expr ',' expr ')' | '(' expr ')'
 *	FUNC    := 'cdiv' | 'min' | 'max'
 *
 * NUMBER is decimal and must fit int64_t (so INT64_MIN is written
 * "-9223372036854775807-1"); NAME is [A-Za-z_][A-Za-z0-9_]*; blanks are
 * allowed between tokens.  Values are int64_t; every operation is checked
 * for overflow, division and modulo by zero are errors.  '/' and '%' truncate
 * toward zero as in C; cdiv(a, b) is the mathematical ceiling of a/b (for
 * any signs).  An expression is parsed once into a tree and evaluated as
 * often as needed with different size values (spec.c evaluates a launch
 * plan for the problem's sizes; a workflow may evaluate it for others).
 *
 * No CUDA here: this is linked into the daemon's workflow plugins too.
 *
 * Errors: functions return 0 or -errno (-EINVAL: the expression is wrong,
 * -ENOMEM) and write a human message into the caller's buffer `err` (always
 * NUL-terminated when errlen > 0).  The message quotes the expression and
 * gives the 1-based column of the fault, e.g.
 *	'N*': expected a number, a name or '(' at column 3
 * so that a caller can prefix the field it came from.
 *
 * Ownership: expr_parse() returns an owned tree, freed with expr_free()
 * (expr_free(NULL) is a no-op); environments are borrowed.
 */
#ifndef KGYM_NVRTC_EXPR_H
#define KGYM_NVRTC_EXPR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Longest expression text accepted, in bytes. */
#define EXPR_MAX_TEXT		1024
/* Deepest nesting of parentheses, calls and unary minus. */
#define EXPR_MAX_DEPTH		64
/* Longest symbol name. */
#define EXPR_MAX_NAME		64

/* A parsed expression; opaque. */
struct expr;

/*
 * Values for the names an expression may use: names[i] has values[i].
 * Borrowed by every function that takes it.  `values` may be NULL for
 * expr_check(), which needs only the names.
 */
struct expr_env {
	const char *const *names;
	const int64_t *values;
	size_t n;
};

/*
 * Parse `text` into *ret_expr.  Syntax errors, numbers that do not fit,
 * unknown functions, texts longer than EXPR_MAX_TEXT and nesting deeper
 * than EXPR_MAX_DEPTH return -EINVAL with a message in err; -ENOMEM.
 * Names are not looked up here (expr_check, expr_eval do).
 */
int	expr_parse(const char *text, struct expr **ret_expr, char *err, size_t errlen);

/* Free a tree from expr_parse(); NULL is a no-op. */
void	expr_free(struct expr *e);

/* The text the expression was parsed from (borrowed from e). */
const char *expr_text(const struct expr *e);

/*
 * Every name `e` uses is in env: 0, or -EINVAL naming the first unknown
 * one ("'N*K': unknown size 'K' at column 3").  env->values is not read.
 */
int	expr_check(const struct expr *e, const struct expr_env *env, char *err,
	    size_t errlen);

/*
 * Evaluate `e` with the values in env into *ret_value.  -EINVAL with a
 * message for an unknown name, an overflow of int64_t or a division or
 * modulo by zero (INT64_MIN % -1 is 0, INT64_MIN / -1 overflows).
 */
int	expr_eval(const struct expr *e, const struct expr_env *env, int64_t *ret_value,
	    char *err, size_t errlen);

/* Parse and evaluate in one go; same errors as the two above. */
int	expr_eval_text(const char *text, const struct expr_env *env, int64_t *ret_value,
	    char *err, size_t errlen);

/*
 * `name` may be used as a size symbol: [A-Za-z_][A-Za-z0-9_]*, at most
 * EXPR_MAX_NAME bytes, and not one of the function names (cdiv, min, max).
 */
bool	expr_name_valid(const char *name);

/*
 * Cut a UTF-8 sequence left incomplete at the end of s (a message truncated
 * by snprintf), so that it stays valid for a JSON string.
 */
void	expr_trim_partial_utf8(char *s);

#endif /* KGYM_NVRTC_EXPR_H */
