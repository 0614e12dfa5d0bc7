/*
 * expr.c -- parse and evaluate the integer expressions of the native payload
 * (grammar and rules in expr.h).
 *
 * A recursive-descent parser builds the tree into one array of nodes sized
 * by the text (every node consumes at least one character, so the text's
 * length bounds the count and the tree needs one allocation).  Evaluation
 * walks the tree with the size values of the moment; every arithmetic step
 * goes through the compiler's overflow builtins, because an expression that
 * wraps would hand a kernel a grid or a shape nobody asked for.  Nesting is
 * bounded (EXPR_MAX_DEPTH) so the recursion depth is too.
 */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "expr.h"

enum node_op {
	NODE_NUM,
	NODE_NAME,
	NODE_NEG,
	NODE_ADD,
	NODE_SUB,
	NODE_MUL,
	NODE_DIV,
	NODE_MOD,
	NODE_CDIV,
	NODE_MIN,
	NODE_MAX,
};

struct expr_node {
	enum node_op op;
	unsigned int col;	/* 1-based column of the token, for messages */
	int64_t value;		/* NUM */
	size_t name_off;	/* NAME: where in the text ... */
	size_t name_len;	/* ... and how long */
	int a, b;		/* operands (node indices) */
};

struct expr {
	char *text;
	struct expr_node *nodes;
	size_t nnodes;
	int root;
};

struct parser {
	const char *text;
	size_t pos;
	struct expr *e;
	unsigned int depth;
	char *err;
	size_t errlen;
};

/* The functions a name followed by '(' may be; two arguments each. */
static const struct {
	const char *name;
	enum node_op op;
} functions[] = {
	{ "cdiv", NODE_CDIV },
	{ "min", NODE_MIN },
	{ "max", NODE_MAX },
};

/*
 * A truncated message may end inside a UTF-8 sequence (the expression text
 * is the user's); cut the partial sequence so the message stays valid UTF-8
 * for JSON.
 */
void
expr_trim_partial_utf8(char *s)
{
	size_t len = strlen(s), i, need;
	unsigned char c;

	for (i = 0; i < 4 && i < len; i++) {
		c = (unsigned char)s[len - 1 - i];
		if ((c & 0xC0) == 0x80)
			continue;		/* a continuation byte */
		if (c < 0x80)
			return;			/* ASCII: complete */
		need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
		if (i + 1 < need)
			s[len - 1 - i] = '\0';
		return;
	}
}

/* Message "'<text>': <what> at column <col>" (col 0: no column). */
static void __attribute__((format(printf, 5, 6)))
expr_error(char *err, size_t errlen, const char *text, unsigned int col, const char *fmt, ...)
{
	char what[256];
	va_list ap;

	if (err == NULL || errlen == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	if (col > 0)
		snprintf(err, errlen, "'%s': %s at column %u", text, what, col);
	else
		snprintf(err, errlen, "'%s': %s", text, what);
	expr_trim_partial_utf8(err);
}

static bool
is_blank(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static bool
is_name_start(char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
}

static bool
is_name_char(char c)
{
	return is_name_start(c) || (c >= '0' && c <= '9');
}

static void
skip_blanks(struct parser *p)
{
	while (is_blank(p->text[p->pos]))
		p->pos++;
}

static unsigned int
column(const struct parser *p)
{
	return (unsigned int)p->pos + 1;
}

static int
new_node(struct parser *p, enum node_op op, unsigned int col)
{
	struct expr_node *n = &p->e->nodes[p->e->nnodes];

	memset(n, 0, sizeof(*n));
	n->op = op;
	n->col = col;
	n->a = n->b = -1;
	return (int)p->e->nnodes++;
}

/* What the parser found at the current position, for "expected X" messages. */
static void
syntax_error(struct parser *p, const char *expected)
{
	char c = p->text[p->pos];

	if (c == '\0')
		expr_error(p->err, p->errlen, p->text, column(p), "expected %s", expected);
	else if ((unsigned char)c >= 0x20 && (unsigned char)c < 0x7f)
		expr_error(p->err, p->errlen, p->text, column(p), "expected %s, not '%c'",
		    expected, c);
	else
		expr_error(p->err, p->errlen, p->text, column(p),
		    "expected %s, not byte 0x%02x", expected, (unsigned char)c);
}

static int parse_sum(struct parser *p, int *ret_node);

static int
enter(struct parser *p)
{
	if (++p->depth > EXPR_MAX_DEPTH) {
		expr_error(p->err, p->errlen, p->text, column(p),
		    "nested deeper than %d levels", EXPR_MAX_DEPTH);
		return -EINVAL;
	}
	return 0;
}

static int
parse_number(struct parser *p, int *ret_node)
{
	unsigned int col = column(p);
	int64_t v = 0;
	int n;

	while (p->text[p->pos] >= '0' && p->text[p->pos] <= '9') {
		if (__builtin_mul_overflow(v, (int64_t)10, &v) ||
		    __builtin_add_overflow(v, (int64_t)(p->text[p->pos] - '0'), &v)) {
			expr_error(p->err, p->errlen, p->text, col,
			    "number does not fit in 64 bits");
			return -EINVAL;
		}
		p->pos++;
	}
	if (is_name_char(p->text[p->pos])) {
		syntax_error(p, "an operator or the end after a number");
		return -EINVAL;
	}
	n = new_node(p, NODE_NUM, col);
	p->e->nodes[n].value = v;
	*ret_node = n;
	return 0;
}

/* name '(' sum ',' sum ')' with the name already read. */
static int
parse_call(struct parser *p, size_t off, size_t len, unsigned int col, int *ret_node)
{
	size_t i;
	int n, a, b, r;

	for (i = 0; i < sizeof(functions) / sizeof(functions[0]); i++)
		if (strlen(functions[i].name) == len &&
		    memcmp(functions[i].name, p->text + off, len) == 0)
			break;
	if (i == sizeof(functions) / sizeof(functions[0])) {
		expr_error(p->err, p->errlen, p->text, col,
		    "unknown function '%.*s' (cdiv, min and max exist)", (int)len, p->text + off);
		return -EINVAL;
	}
	p->pos++;	/* '(' */
	if ((r = parse_sum(p, &a)) < 0)
		return r;
	skip_blanks(p);
	if (p->text[p->pos] != ',') {
		syntax_error(p, "',' (the function takes two arguments)");
		return -EINVAL;
	}
	p->pos++;
	if ((r = parse_sum(p, &b)) < 0)
		return r;
	skip_blanks(p);
	if (p->text[p->pos] != ')') {
		syntax_error(p, "')' (the function takes two arguments)");
		return -EINVAL;
	}
	p->pos++;
	n = new_node(p, functions[i].op, col);
	p->e->nodes[n].a = a;
	p->e->nodes[n].b = b;
	*ret_node = n;
	return 0;
}

static int
parse_name(struct parser *p, int *ret_node)
{
	unsigned int col = column(p);
	size_t off = p->pos, len, i;
	int n;

	while (is_name_char(p->text[p->pos]))
		p->pos++;
	len = p->pos - off;
	skip_blanks(p);
	if (p->text[p->pos] == '(')
		return parse_call(p, off, len, col, ret_node);
	if (len > EXPR_MAX_NAME) {
		expr_error(p->err, p->errlen, p->text, col, "name longer than %d bytes",
		    EXPR_MAX_NAME);
		return -EINVAL;
	}
	for (i = 0; i < sizeof(functions) / sizeof(functions[0]); i++)
		if (strlen(functions[i].name) == len &&
		    memcmp(functions[i].name, p->text + off, len) == 0) {
			syntax_error(p, "'(' after a function name");
			return -EINVAL;
		}
	n = new_node(p, NODE_NAME, col);
	p->e->nodes[n].name_off = off;
	p->e->nodes[n].name_len = len;
	*ret_node = n;
	return 0;
}

static int
parse_unary(struct parser *p, int *ret_node)
{
	unsigned int col;
	char c;
	int n, a, r;

	skip_blanks(p);
	col = column(p);
	c = p->text[p->pos];
	if (c == '-') {
		if ((r = enter(p)) < 0)
			return r;
		p->pos++;
		if ((r = parse_unary(p, &a)) < 0)
			return r;
		p->depth--;
		n = new_node(p, NODE_NEG, col);
		p->e->nodes[n].a = a;
		*ret_node = n;
		return 0;
	}
	if (c == '(') {
		if ((r = enter(p)) < 0)
			return r;
		p->pos++;
		if ((r = parse_sum(p, &a)) < 0)
			return r;
		skip_blanks(p);
		if (p->text[p->pos] != ')') {
			syntax_error(p, "')'");
			return -EINVAL;
		}
		p->pos++;
		p->depth--;
		*ret_node = a;
		return 0;
	}
	if (c >= '0' && c <= '9')
		return parse_number(p, ret_node);
	if (is_name_start(c)) {
		if ((r = enter(p)) < 0)
			return r;
		if ((r = parse_name(p, ret_node)) < 0)
			return r;
		p->depth--;
		return 0;
	}
	syntax_error(p, "a number, a name or '('");
	return -EINVAL;
}

static int
parse_product(struct parser *p, int *ret_node)
{
	enum node_op op;
	unsigned int col;
	int left, right, n, r;

	if ((r = parse_unary(p, &left)) < 0)
		return r;
	for (;;) {
		skip_blanks(p);
		switch (p->text[p->pos]) {
		case '*': op = NODE_MUL; break;
		case '/': op = NODE_DIV; break;
		case '%': op = NODE_MOD; break;
		default:
			*ret_node = left;
			return 0;
		}
		col = column(p);
		p->pos++;
		if ((r = parse_unary(p, &right)) < 0)
			return r;
		n = new_node(p, op, col);
		p->e->nodes[n].a = left;
		p->e->nodes[n].b = right;
		left = n;
	}
}

static int
parse_sum(struct parser *p, int *ret_node)
{
	enum node_op op;
	unsigned int col;
	int left, right, n, r;

	if ((r = parse_product(p, &left)) < 0)
		return r;
	for (;;) {
		skip_blanks(p);
		switch (p->text[p->pos]) {
		case '+': op = NODE_ADD; break;
		case '-': op = NODE_SUB; break;
		default:
			*ret_node = left;
			return 0;
		}
		col = column(p);
		p->pos++;
		if ((r = parse_product(p, &right)) < 0)
			return r;
		n = new_node(p, op, col);
		p->e->nodes[n].a = left;
		p->e->nodes[n].b = right;
		left = n;
	}
}

int
expr_parse(const char *text, struct expr **ret_expr, char *err, size_t errlen)
{
	struct parser p;
	struct expr *e;
	size_t len = strlen(text);
	int r;

	if (len > EXPR_MAX_TEXT) {
		if (err != NULL && errlen > 0) {
			snprintf(err, errlen, "'%.40s...': longer than %d bytes", text,
			    EXPR_MAX_TEXT);
			expr_trim_partial_utf8(err);
		}
		return -EINVAL;
	}
	if ((e = calloc(1, sizeof(*e))) == NULL)
		return -ENOMEM;
	e->text = strdup(text);
	/* Each node consumes at least one character: len + 1 is enough. */
	e->nodes = calloc(len + 1, sizeof(*e->nodes));
	if (e->text == NULL || e->nodes == NULL) {
		r = -ENOMEM;
		goto fail_free;
	}
	memset(&p, 0, sizeof(p));
	p.text = e->text;
	p.e = e;
	p.err = err;
	p.errlen = errlen;
	if ((r = parse_sum(&p, &e->root)) < 0)
		goto fail_free;
	skip_blanks(&p);
	if (p.text[p.pos] != '\0') {
		syntax_error(&p, "an operator or the end");
		r = -EINVAL;
		goto fail_free;
	}
	*ret_expr = e;
	return 0;

fail_free:
	expr_free(e);
	return r;
}

void
expr_free(struct expr *e)
{
	if (e == NULL)
		return;
	free(e->nodes);
	free(e->text);
	free(e);
}

const char *
expr_text(const struct expr *e)
{
	return e->text;
}

/* Index of the node's name in env, or -1. */
static ssize_t
lookup(const struct expr *e, const struct expr_node *n, const struct expr_env *env)
{
	size_t i;

	if (env == NULL)
		return -1;
	for (i = 0; i < env->n; i++)
		if (strlen(env->names[i]) == n->name_len &&
		    memcmp(env->names[i], e->text + n->name_off, n->name_len) == 0)
			return (ssize_t)i;
	return -1;
}

static void
unknown_name(const struct expr *e, const struct expr_node *n, char *err, size_t errlen)
{
	expr_error(err, errlen, e->text, n->col, "unknown size '%.*s'", (int)n->name_len,
	    e->text + n->name_off);
}

int
expr_check(const struct expr *e, const struct expr_env *env, char *err, size_t errlen)
{
	size_t i;

	/* Nodes are in parse order, which is the text's order for names. */
	for (i = 0; i < e->nnodes; i++)
		if (e->nodes[i].op == NODE_NAME && lookup(e, &e->nodes[i], env) < 0) {
			unknown_name(e, &e->nodes[i], err, errlen);
			return -EINVAL;
		}
	return 0;
}

static const char *
op_symbol(enum node_op op)
{
	switch (op) {
	case NODE_NEG: return "unary '-'";
	case NODE_ADD: return "'+'";
	case NODE_SUB: return "'-'";
	case NODE_MUL: return "'*'";
	case NODE_DIV: return "'/'";
	case NODE_MOD: return "'%'";
	case NODE_CDIV: return "cdiv";
	default: return "?";
	}
}

static int
eval_node(const struct expr *e, int idx, const struct expr_env *env, int64_t *ret_value,
    char *err, size_t errlen)
{
	const struct expr_node *n = &e->nodes[idx];
	int64_t a = 0, b = 0, v;
	ssize_t k;
	int r;

	switch (n->op) {
	case NODE_NUM:
		*ret_value = n->value;
		return 0;
	case NODE_NAME:
		if ((k = lookup(e, n, env)) < 0) {
			unknown_name(e, n, err, errlen);
			return -EINVAL;
		}
		*ret_value = env->values[k];
		return 0;
	default:
		break;
	}
	if ((r = eval_node(e, n->a, env, &a, err, errlen)) < 0)
		return r;
	if (n->b >= 0 && (r = eval_node(e, n->b, env, &b, err, errlen)) < 0)
		return r;

	switch (n->op) {
	case NODE_NEG:
		if (__builtin_sub_overflow((int64_t)0, a, &v))
			goto overflow;
		break;
	case NODE_ADD:
		if (__builtin_add_overflow(a, b, &v))
			goto overflow;
		break;
	case NODE_SUB:
		if (__builtin_sub_overflow(a, b, &v))
			goto overflow;
		break;
	case NODE_MUL:
		if (__builtin_mul_overflow(a, b, &v))
			goto overflow;
		break;
	case NODE_DIV:
	case NODE_CDIV:
	case NODE_MOD:
		if (b == 0) {
			expr_error(err, errlen, e->text, n->col, "%s by zero",
			    n->op == NODE_MOD ? "modulo" : n->op == NODE_CDIV ?
			    "division (cdiv)" : "division");
			return -EINVAL;
		}
		/* INT64_MIN / -1 is the one quotient that does not fit. */
		if (a == INT64_MIN && b == -1) {
			if (n->op == NODE_MOD) {
				v = 0;
				break;
			}
			goto overflow;
		}
		if (n->op == NODE_MOD)
			v = a % b;
		else {
			v = a / b;
			/* C truncates; ceil differs when the exact quotient is positive. */
			if (n->op == NODE_CDIV && a % b != 0 && (a > 0) == (b > 0))
				v++;
		}
		break;
	case NODE_MIN:
		v = a < b ? a : b;
		break;
	case NODE_MAX:
		v = a > b ? a : b;
		break;
	default:
		expr_error(err, errlen, e->text, n->col, "internal error: bad node");
		return -EINVAL;
	}
	*ret_value = v;
	return 0;

overflow:
	if (n->op == NODE_NEG)
		expr_error(err, errlen, e->text, n->col,
		    "64-bit integer overflow in %s (of %lld)", op_symbol(n->op), (long long)a);
	else
		expr_error(err, errlen, e->text, n->col,
		    "64-bit integer overflow in %s (%lld and %lld)", op_symbol(n->op),
		    (long long)a, (long long)b);
	return -EINVAL;
}

int
expr_eval(const struct expr *e, const struct expr_env *env, int64_t *ret_value, char *err,
    size_t errlen)
{
	int64_t v;
	int r;

	if ((r = eval_node(e, e->root, env, &v, err, errlen)) < 0)
		return r;
	*ret_value = v;
	return 0;
}

int
expr_eval_text(const char *text, const struct expr_env *env, int64_t *ret_value, char *err,
    size_t errlen)
{
	struct expr *e;
	int64_t v;
	int r;

	if ((r = expr_parse(text, &e, err, errlen)) < 0)
		return r;
	r = expr_eval(e, env, &v, err, errlen);
	expr_free(e);
	if (r < 0)
		return r;
	*ret_value = v;
	return 0;
}

bool
expr_name_valid(const char *name)
{
	size_t i;

	if (!is_name_start(name[0]))
		return false;
	for (i = 1; name[i] != '\0'; i++)
		if (!is_name_char(name[i]))
			return false;
	if (i > EXPR_MAX_NAME)
		return false;
	for (i = 0; i < sizeof(functions) / sizeof(functions[0]); i++)
		if (strcmp(name, functions[i].name) == 0)
			return false;
	return true;
}
