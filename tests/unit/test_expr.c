/*
 * test_expr.c -- unit tests of the native payload's integer expressions
 * (plugins/common/expr.c): values, precedence, functions, every error class
 * with the message a user sees, overflow at the edges of int64_t.
 */
#include "config.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "expr.h"

static const char *const names[] = { "N", "M", "K_2", "zero", "big", "neg" };
static const int64_t values[] = { 1000, 7, -3, 0, INT64_MAX, INT64_MIN };
static const struct expr_env env = { names, values, 6 };

/* Evaluate `text`, asserting success, and return its value. */
static int64_t
ok(const char *text)
{
	char err[512] = "";
	int64_t v = 0x5a5a;
	int r;

	r = expr_eval_text(text, &env, &v, err, sizeof(err));
	if (r != 0)
		fail_msg("'%s' failed: %s", text, err);
	return v;
}

/* Evaluate `text`, asserting -EINVAL with exactly `message`. */
static void
bad(const char *text, const char *message)
{
	char err[512] = "";
	int64_t v = 0x5a5a;
	int r;

	r = expr_eval_text(text, &env, &v, err, sizeof(err));
	if (r != -EINVAL)
		fail_msg("'%s' gave %d (value %lld), expected -EINVAL", text, r, (long long)v);
	assert_int_equal(v, 0x5a5a);	/* ret_value untouched on failure */
	assert_string_equal(err, message);
}

static void
test_arithmetic(void **state)
{
	(void)state;
	assert_int_equal(ok("42"), 42);
	assert_int_equal(ok("0"), 0);
	assert_int_equal(ok("007"), 7);
	assert_int_equal(ok("1+2*3"), 7);
	assert_int_equal(ok("(1+2)*3"), 9);
	assert_int_equal(ok("10-4-3"), 3);		/* left-associative */
	assert_int_equal(ok("100/10/5"), 2);
	assert_int_equal(ok("2*3%4"), 2);		/* (2*3)%4 */
	assert_int_equal(ok("-5"), -5);
	assert_int_equal(ok("--5"), 5);
	assert_int_equal(ok("-(2+3)*2"), -10);
	assert_int_equal(ok("3--2"), 5);
	assert_int_equal(ok("2*-3"), -6);
	assert_int_equal(ok("((((7))))"), 7);
}

static void
test_truncation(void **state)
{
	(void)state;
	/* '/' and '%' as in C: toward zero. */
	assert_int_equal(ok("7/2"), 3);
	assert_int_equal(ok("-7/2"), -3);
	assert_int_equal(ok("7/-2"), -3);
	assert_int_equal(ok("7%3"), 1);
	assert_int_equal(ok("-7%3"), -1);
	assert_int_equal(ok("7%-3"), 1);
}

static void
test_symbols_and_blanks(void **state)
{
	(void)state;
	assert_int_equal(ok("N"), 1000);
	assert_int_equal(ok("N*M+K_2"), 6997);
	assert_int_equal(ok(" N\t*\n( M +\r1 ) "), 8000);
	assert_int_equal(ok("zero"), 0);
	assert_int_equal(ok("big"), INT64_MAX);
	assert_int_equal(ok("neg"), INT64_MIN);
	assert_int_equal(ok("cdiv ( N , 256 )"), 4);
}

static void
test_functions(void **state)
{
	(void)state;
	assert_int_equal(ok("cdiv(N,256)"), 4);
	assert_int_equal(ok("cdiv(1024,256)"), 4);
	assert_int_equal(ok("cdiv(1025,256)"), 5);
	assert_int_equal(ok("cdiv(0,5)"), 0);
	/* The mathematical ceiling for every sign combination. */
	assert_int_equal(ok("cdiv(7,2)"), 4);
	assert_int_equal(ok("cdiv(-7,2)"), -3);
	assert_int_equal(ok("cdiv(7,-2)"), -3);
	assert_int_equal(ok("cdiv(-7,-2)"), 4);
	assert_int_equal(ok("cdiv(-8,2)"), -4);
	assert_int_equal(ok("cdiv(big,2)"), INT64_MAX / 2 + 1);
	assert_int_equal(ok("cdiv(neg,2)"), INT64_MIN / 2);
	assert_int_equal(ok("min(3,M)"), 3);
	assert_int_equal(ok("max(3,M)"), 7);
	assert_int_equal(ok("min(-1,neg)"), INT64_MIN);
	assert_int_equal(ok("max(1, cdiv(N, min(M*64, 256)))"), 4);
	assert_int_equal(ok("max(1, cdiv(M, min(M*64, 256)))"), 1);
	assert_int_equal(ok("min(max(N,M),max(M,K_2))*2"), 14);
	assert_int_equal(ok("cdiv(cdiv(cdiv(N,2),2),2)"), 125);
	assert_int_equal(ok("-max(1,2)"), -2);
}

static void
test_overflow(void **state)
{
	(void)state;
	assert_int_equal(ok("9223372036854775807"), INT64_MAX);
	assert_int_equal(ok("-9223372036854775807-1"), INT64_MIN);
	bad("9223372036854775807+1",
	    "'9223372036854775807+1': 64-bit integer overflow in '+' "
	    "(9223372036854775807 and 1) at column 20");
	bad("9223372036854775808",
	    "'9223372036854775808': number does not fit in 64 bits at column 1");
	bad("1+99999999999999999999999",
	    "'1+99999999999999999999999': number does not fit in 64 bits at column 3");
	bad("neg-1",
	    "'neg-1': 64-bit integer overflow in '-' (-9223372036854775808 and 1) at column 4");
	bad("-neg", "'-neg': 64-bit integer overflow in unary '-' (of -9223372036854775808) "
	    "at column 1");
	bad("N*N*N*N*N*N*N",
	    "'N*N*N*N*N*N*N': 64-bit integer overflow in '*' (1000000000000000000 and 1000) "
	    "at column 12");
	bad("neg/-1",
	    "'neg/-1': 64-bit integer overflow in '/' (-9223372036854775808 and -1) at column 4");
	bad("cdiv(neg,-1)",
	    "'cdiv(neg,-1)': 64-bit integer overflow in cdiv (-9223372036854775808 and -1) "
	    "at column 1");
	/* The remainder exists even where the quotient does not. */
	assert_int_equal(ok("neg%-1"), 0);
	/* Intermediate overflow is caught even when the final value would fit. */
	bad("big+1-1", "'big+1-1': 64-bit integer overflow in '+' (9223372036854775807 and 1) "
	    "at column 4");
}

static void
test_division_by_zero(void **state)
{
	(void)state;
	bad("N/0", "'N/0': division by zero at column 2");
	bad("N % zero", "'N % zero': modulo by zero at column 3");
	bad("cdiv(N, M-7)", "'cdiv(N, M-7)': division (cdiv) by zero at column 1");
	bad("1/(N-N)", "'1/(N-N)': division by zero at column 2");
}

static void
test_syntax_errors(void **state)
{
	(void)state;
	bad("N*", "'N*': expected a number, a name or '(' at column 3");
	bad("", "'': expected a number, a name or '(' at column 1");
	bad("   ", "'   ': expected a number, a name or '(' at column 4");
	bad("(N", "'(N': expected ')' at column 3");
	bad("N)", "'N)': expected an operator or the end, not ')' at column 2");
	bad("N M", "'N M': expected an operator or the end, not 'M' at column 3");
	bad("2N", "'2N': expected an operator or the end after a number, not 'N' at column 2");
	bad("N ** 2", "'N ** 2': expected a number, a name or '(', not '*' at column 4");
	bad("+1", "'+1': expected a number, a name or '(', not '+' at column 1");
	bad("N # 2", "'N # 2': expected an operator or the end, not '#' at column 3");
	bad("N\x01", "'N\x01': expected an operator or the end, not byte 0x01 at column 2");
	bad("1.5", "'1.5': expected an operator or the end, not '.' at column 2");
	bad("()", "'()': expected a number, a name or '(', not ')' at column 2");
}

static void
test_function_errors(void **state)
{
	(void)state;
	bad("cdiv(N)",
	    "'cdiv(N)': expected ',' (the function takes two arguments), not ')' at column 7");
	bad("min(1,2,3)",
	    "'min(1,2,3)': expected ')' (the function takes two arguments), not ',' at column 8");
	bad("max()", "'max()': expected a number, a name or '(', not ')' at column 5");
	bad("max(1,", "'max(1,': expected a number, a name or '(' at column 7");
	bad("foo(1,2)", "'foo(1,2)': unknown function 'foo' (cdiv, min and max exist) at column 1");
	bad("N(2)", "'N(2)': unknown function 'N' (cdiv, min and max exist) at column 1");
	bad("min", "'min': expected '(' after a function name at column 4");
	bad("2*cdiv+1", "'2*cdiv+1': expected '(' after a function name, not '+' at column 7");
}

static void
test_unknown_names(void **state)
{
	char err[256] = "";
	struct expr *e;

	(void)state;
	bad("N*K", "'N*K': unknown size 'K' at column 3");
	bad("cdiv(N, BLOCK)", "'cdiv(N, BLOCK)': unknown size 'BLOCK' at column 9");
	/* Case matters. */
	bad("n", "'n': unknown size 'n' at column 1");

	/* expr_check needs names only and names the first unknown one. */
	assert_int_equal(expr_parse("A + N*B", &e, err, sizeof(err)), 0);
	assert_int_equal(expr_check(e, &env, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "'A + N*B': unknown size 'A' at column 1");
	{
		const char *const some[] = { "A", "B", "N" };
		struct expr_env names_only = { some, NULL, 3 };

		assert_int_equal(expr_check(e, &names_only, err, sizeof(err)), 0);
	}
	assert_int_equal(expr_check(e, NULL, err, sizeof(err)), -EINVAL);
	expr_free(e);
}

static void
test_limits(void **state)
{
	char text[EXPR_MAX_TEXT + 64], err[512];
	struct expr *e = NULL;
	size_t i;
	int64_t v;

	(void)state;
	/* Exactly EXPR_MAX_DEPTH parentheses parse, one more does not. */
	memset(text, 0, sizeof(text));
	for (i = 0; i < EXPR_MAX_DEPTH; i++)
		text[i] = '(';
	text[i] = '1';
	for (i = 0; i < EXPR_MAX_DEPTH; i++)
		text[EXPR_MAX_DEPTH + 1 + i] = ')';
	assert_int_equal(expr_eval_text(text, &env, &v, err, sizeof(err)), 0);
	assert_int_equal(v, 1);
	memmove(text + 1, text, strlen(text) + 1);
	text[0] = '(';
	strcat(text, ")");
	assert_int_equal(expr_eval_text(text, &env, &v, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "': nested deeper than 64 levels at column 65"));

	/* Deep unary minus counts as nesting too (bounded recursion). */
	memset(text, '-', 200);
	strcpy(text + 200, "1");
	assert_int_equal(expr_eval_text(text, &env, &v, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "nested deeper than 64 levels"));

	/* A long flat sum is fine up to EXPR_MAX_TEXT. */
	memset(text, 0, sizeof(text));
	for (i = 0; i + 2 <= EXPR_MAX_TEXT; i += 2)
		memcpy(text + i, i == 0 ? " 1" : "+1", 2);
	assert_int_equal(strlen(text), EXPR_MAX_TEXT);
	assert_int_equal(expr_eval_text(text, &env, &v, err, sizeof(err)), 0);
	assert_int_equal(v, EXPR_MAX_TEXT / 2);
	strcat(text, "+");
	assert_int_equal(expr_parse(text, &e, err, sizeof(err)), -EINVAL);
	assert_null(e);
	assert_non_null(strstr(err, "...': longer than 1024 bytes"));

	/* Names up to EXPR_MAX_NAME bytes. */
	memset(text, 'a', EXPR_MAX_NAME + 1);
	text[EXPR_MAX_NAME + 1] = '\0';
	assert_int_equal(expr_parse(text, &e, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "': name longer than 64 bytes at column 1"));
	text[EXPR_MAX_NAME] = '\0';
	assert_int_equal(expr_parse(text, &e, err, sizeof(err)), 0);
	expr_free(e);
}

static void
test_parse_once_eval_many(void **state)
{
	const char *const n1[] = { "N", "B" };
	const int64_t v1[] = { 1000, 128 }, v2[] = { 1 << 20, 256 };
	struct expr_env e1 = { n1, v1, 2 }, e2 = { n1, v2, 2 };
	struct expr *e;
	char err[128];
	int64_t v;

	(void)state;
	assert_int_equal(expr_parse("cdiv(N, B)", &e, err, sizeof(err)), 0);
	assert_string_equal(expr_text(e), "cdiv(N, B)");
	assert_int_equal(expr_eval(e, &e1, &v, err, sizeof(err)), 0);
	assert_int_equal(v, 8);
	assert_int_equal(expr_eval(e, &e2, &v, err, sizeof(err)), 0);
	assert_int_equal(v, 4096);
	expr_free(e);
	expr_free(NULL);
}

static void
test_error_buffer(void **state)
{
	char err[8];
	char small[4];
	int64_t v;

	(void)state;
	/* Truncated, NUL-terminated. */
	memset(err, 'x', sizeof(err));
	assert_int_equal(expr_eval_text("N*", &env, &v, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "'N*': e");
	/* No buffer at all. */
	assert_int_equal(expr_eval_text("N*", &env, &v, NULL, 0), -EINVAL);
	/* A cut inside a UTF-8 sequence is removed ("'" then 2 bytes of 'é'). */
	memset(small, 'x', sizeof(small));
	assert_int_equal(expr_eval_text("\xc3\xa9", &env, &v, small, 3), -EINVAL);
	assert_string_equal(small, "'");
	assert_int_equal(expr_eval_text("\xc3\xa9", &env, &v, small, 4), -EINVAL);
	assert_string_equal(small, "'\xc3\xa9");
}

static void
test_name_valid(void **state)
{
	char name[EXPR_MAX_NAME + 2];

	(void)state;
	assert_true(expr_name_valid("N"));
	assert_true(expr_name_valid("_x9"));
	assert_true(expr_name_valid("BLOCK_SIZE"));
	assert_false(expr_name_valid(""));
	assert_false(expr_name_valid("9N"));
	assert_false(expr_name_valid("a-b"));
	assert_false(expr_name_valid("a b"));
	assert_false(expr_name_valid("cdiv"));
	assert_false(expr_name_valid("min"));
	assert_false(expr_name_valid("max"));
	assert_true(expr_name_valid("maximum"));
	memset(name, 'a', EXPR_MAX_NAME);
	name[EXPR_MAX_NAME] = '\0';
	assert_true(expr_name_valid(name));
	strcat(name, "a");
	assert_false(expr_name_valid(name));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_arithmetic),
		cmocka_unit_test(test_truncation),
		cmocka_unit_test(test_symbols_and_blanks),
		cmocka_unit_test(test_functions),
		cmocka_unit_test(test_overflow),
		cmocka_unit_test(test_division_by_zero),
		cmocka_unit_test(test_syntax_errors),
		cmocka_unit_test(test_function_errors),
		cmocka_unit_test(test_unknown_names),
		cmocka_unit_test(test_limits),
		cmocka_unit_test(test_parse_once_eval_many),
		cmocka_unit_test(test_error_buffer),
		cmocka_unit_test(test_name_valid),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
