/*
 * tokens.c -- bearer tokens of kgymd-http ([http] token_file).
 *
 * One token per line, "NAME TOKEN" or "NAME TOKEN admin".  Only SHA-256
 * digests of the secrets are kept.  A presented secret is hashed and
 * compared with every token's digest with CRYPTO_memcmp, never stopping
 * early, so how long the comparison takes says nothing about any secret:
 * equal-length digests hide the secrets' lengths too.
 */
#include "config.h"

#include <sys/stat.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "gateway.h"

#define TOKEN_MIN 16
#define TOKEN_MAX 256
#define TOKENS_MAX 10000

struct token_set {
	struct token *tokens;
	size_t n;
};

static int
tokens_digest(const char *secret, size_t len, unsigned char out[32])
{
	unsigned int outlen = 0;

	if (EVP_Digest(secret, len, out, &outlen, EVP_sha256(), NULL) != 1 ||
	    outlen != 32)
		return -EIO;
	return 0;
}

static bool
tokens_name_ok(const char *s, size_t len)
{
	return len >= 1 && len <= GW_NAME_MAX &&
	    strspn(s,
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") >=
	    len;
}

static int
tokens_cause(char **ret_cause, int rc, const char *path, int line, const char *why)
{
	if (asprintf(ret_cause, "%s:%d: %s", path, line, why) < 0)
		*ret_cause = NULL;
	return rc;
}

/* One line: NAME TOKEN [admin]. */
static int
tokens_line(
    struct token_set *set, char *line, const char *path, int lineno, char **ret_cause)
{
	char *name, *secret, *role, *extra, *save = NULL;
	struct token *t;
	size_t i;

	name = strtok_r(line, " \t\r\n", &save);
	if (name == NULL || name[0] == '#')
		return 0;
	secret = strtok_r(NULL, " \t\r\n", &save);
	role = strtok_r(NULL, " \t\r\n", &save);
	extra = strtok_r(NULL, " \t\r\n", &save);
	if (!tokens_name_ok(name, strlen(name)))
		return tokens_cause(ret_cause, -EINVAL, path, lineno,
		    "a name is 1 to 64 characters of A-Z, a-z, 0-9, '.', '_' and '-'");
	if (secret == NULL || strlen(secret) < TOKEN_MIN || strlen(secret) > TOKEN_MAX)
		return tokens_cause(ret_cause, -EINVAL, path, lineno,
		    "expected NAME TOKEN [admin], the token 16 to 256 characters");
	if ((role != NULL && strcmp(role, "admin") != 0) || extra != NULL)
		return tokens_cause(ret_cause, -EINVAL, path, lineno,
		    "after the token only the word admin may follow");
	for (i = 0; i < strlen(secret); i++)
		if (secret[i] < 0x21 || secret[i] > 0x7e)
			return tokens_cause(ret_cause, -EINVAL, path, lineno,
			    "a token is printable ASCII without spaces");
	for (i = 0; i < set->n; i++)
		if (strcmp(set->tokens[i].name, name) == 0)
			return tokens_cause(
			    ret_cause, -EEXIST, path, lineno, "a name appears twice");
	if (set->n >= TOKENS_MAX)
		return tokens_cause(
		    ret_cause, -E2BIG, path, lineno, "more than 10000 tokens");
	t = realloc(set->tokens, (set->n + 1) * sizeof *t);
	if (t == NULL)
		return tokens_cause(ret_cause, -ENOMEM, path, lineno, "out of memory");
	set->tokens = t;
	t = &set->tokens[set->n];
	memset(t, 0, sizeof *t);
	snprintf(t->name, sizeof t->name, "%s", name);
	t->admin = role != NULL;
	if (tokens_digest(secret, strlen(secret), t->digest) < 0)
		return tokens_cause(ret_cause, -EIO, path, lineno, "SHA-256 failed");
	for (i = 0; i < set->n; i++)
		if (CRYPTO_memcmp(set->tokens[i].digest, t->digest, sizeof t->digest) ==
		    0)
			return tokens_cause(
			    ret_cause, -EEXIST, path, lineno, "a token appears twice");
	set->n++;
	OPENSSL_cleanse(secret, strlen(secret));
	return 0;
}

int
tokens_load(const char *path, struct token_set **ret_set, char **ret_cause)
{
	struct token_set *set;
	struct stat st;
	char *line = NULL;
	size_t cap = 0;
	int lineno = 0, rc = 0;
	FILE *fp;

	if ((fp = fopen(path, "re")) == NULL) {
		rc = -errno;
		if (asprintf(ret_cause, "%s: cannot open: %s", path, strerror(errno)) <
		    0)
			*ret_cause = NULL;
		return rc;
	}
	/* A secret that others may read or replace is no secret. */
	if (fstat(fileno(fp), &st) < 0 || (st.st_mode & 077) != 0) {
		fclose(fp);
		return tokens_cause(ret_cause, -EPERM, path, 0,
		    "the token file must not be readable or writable by group or others (chmod 600)");
	}
	if ((set = calloc(1, sizeof *set)) == NULL) {
		fclose(fp);
		return -ENOMEM;
	}
	while (getline(&line, &cap, fp) >= 0) {
		lineno++;
		if ((rc = tokens_line(set, line, path, lineno, ret_cause)) < 0)
			break;
	}
	if (line != NULL)
		OPENSSL_cleanse(line, cap);
	free(line);
	fclose(fp);
	if (rc == 0 && set->n == 0)
		rc = tokens_cause(
		    ret_cause, -ENOENT, path, lineno, "no tokens in the file");
	if (rc < 0) {
		tokens_free(set);
		return rc;
	}
	*ret_set = set;
	return 0;
}

void
tokens_free(struct token_set *set)
{
	if (set == NULL)
		return;
	free(set->tokens);
	free(set);
}

size_t
tokens_count(const struct token_set *set)
{
	return set != NULL ? set->n : 0;
}

const struct token *
tokens_find(const struct token_set *set, const char *secret, size_t len)
{
	const struct token *found = NULL;
	unsigned char digest[32];
	size_t i;

	if (set == NULL || len > TOKEN_MAX || tokens_digest(secret, len, digest) < 0)
		return NULL;
	for (i = 0; i < set->n; i++)
		if (CRYPTO_memcmp(set->tokens[i].digest, digest, sizeof digest) == 0)
			found = &set->tokens[i];
	return found;
}
