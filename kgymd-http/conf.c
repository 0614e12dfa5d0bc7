/*
 * conf.c -- kgymd-http's part of kgymd.conf: the socket key of [kgymd] and
 * the [http] section.
 *
 * The gateway reads the same file as kgymd (kgymd.conf(5)), with inih.
 * Of [kgymd] it reads socket and max_request_bytes; other sections and
 * the other keys of [kgymd] are kgymd's and are not checked here (kgymd -n does that); a key of [http] this file does not
 * know, a duplicate or a bad value is an error "file:line: reason".
 */
#include "config.h"

#include <sys/socket.h>

#include <arpa/inet.h>
#include <errno.h>
#include <ini.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway.h"

#define CONF_DEFAULT_SOCKET "/run/kgym/kgymd.sock"
#define CONF_SEEN_MAX 16

struct conf_parse {
	struct gw_config *config;
	char *reason;		      /* the first error, "key: why" */
	char seen[CONF_SEEN_MAX][32]; /* [http] keys met so far */
	size_t nseen;
};

static int conf_fail(struct conf_parse *ps, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* inih's convention: 0 stops with an error; remember the first reason. */
static int
conf_fail(struct conf_parse *ps, const char *fmt, ...)
{
	va_list ap;

	if (ps->reason == NULL) {
		va_start(ap, fmt);
		if (vasprintf(&ps->reason, fmt, ap) < 0)
			ps->reason = NULL;
		va_end(ap);
	}
	return 0;
}

/* "4M", "65536", "1G": bytes, from 1 KiB to 1 GiB. */
static int
conf_bytes(const char *value, size_t *ret)
{
	unsigned long long n, mult = 1;
	char *end;

	errno = 0;
	n = strtoull(value, &end, 10);
	if (end == value || errno != 0 || value[0] == '-')
		return -EINVAL;
	if (*end == 'K' || *end == 'k')
		mult = 1024, end++;
	else if (*end == 'M' || *end == 'm')
		mult = 1024 * 1024, end++;
	else if (*end == 'G' || *end == 'g')
		mult = 1024ULL * 1024 * 1024, end++;
	if (*end != '\0' || n > (1ULL << 30) / mult || n * mult < 1024)
		return -ERANGE;
	*ret = (size_t)(n * mult);
	return 0;
}

/* "host:port" or "[v6]:port" into the config. */
static int
conf_listen(struct gw_config *c, const char *value, char **ret_why)
{
	const char *colon, *host = value;
	size_t hostlen;
	unsigned char addr[16];
	char *end, buf[INET6_ADDRSTRLEN + 1];
	long port;

	if (value[0] == '[') {
		const char *close = strchr(value, ']');

		if (close == NULL || close[1] != ':')
			return *ret_why = "expected [v6 address]:port", -EINVAL;
		host = value + 1;
		hostlen = (size_t)(close - host);
		colon = close + 1;
	} else {
		if ((colon = strrchr(value, ':')) == NULL)
			return *ret_why =
				   "expected address:port, such as 127.0.0.1:10907",
			       -EINVAL;
		hostlen = (size_t)(colon - value);
	}
	if (hostlen == 0 || hostlen >= sizeof buf)
		return *ret_why =
			   "expected a numeric IPv4 or [IPv6] address before the port",
		       -EINVAL;
	memcpy(buf, host, hostlen);
	buf[hostlen] = '\0';
	if (inet_pton(AF_INET, buf, addr) != 1 && inet_pton(AF_INET6, buf, addr) != 1)
		return *ret_why =
			   "expected a numeric IPv4 or [IPv6] address before the port",
		       -EINVAL;
	errno = 0;
	port = strtol(colon + 1, &end, 10);
	if (colon[1] == '\0' || *end != '\0' || errno != 0 || port < 0 || port > 65535)
		return *ret_why = "the port must be 0 to 65535", -EINVAL;
	free(c->listen_host);
	if ((c->listen_host = strdup(buf)) == NULL)
		return *ret_why = "out of memory", -ENOMEM;
	c->listen_port = (int)port;
	c->loopback = strcmp(buf, "127.0.0.1") == 0 || strcmp(buf, "::1") == 0;
	return 0;
}

static int
conf_http_key(struct conf_parse *ps, const char *name, const char *value)
{
	struct gw_config *c = ps->config;
	const char *why = NULL;
	char *end;
	long n;
	size_t i;

	for (i = 0; i < ps->nseen; i++)
		if (strcmp(ps->seen[i], name) == 0)
			return conf_fail(ps, "duplicate key \"%s\" in [http]", name);
	if (strcmp(name, "listen") == 0) {
		if (conf_listen(c, value, (char **)&why) < 0)
			return conf_fail(ps, "listen: %s", why);
	} else if (strcmp(name, "token_file") == 0) {
		free(c->token_file);
		c->token_file = NULL;
		if (*value != '\0' && value[0] != '/')
			return conf_fail(ps, "token_file: expected an absolute path");
		if (*value != '\0' && (c->token_file = strdup(value)) == NULL)
			return conf_fail(ps, "token_file: out of memory");
	} else if (strcmp(name, "max_body_bytes") == 0) {
		if (conf_bytes(value, &c->max_body_bytes) < 0)
			return conf_fail(ps,
			    "max_body_bytes: expected 1K to 1G (K, M, G suffixes), got \"%s\"",
			    value);
	} else if (strcmp(name, "max_reply_backlog") == 0) {
		/* Below the 64K header limit a request could never be read whole. */
		if (conf_bytes(value, &c->max_reply_backlog) < 0 ||
		    c->max_reply_backlog < 128 * 1024)
			return conf_fail(ps,
			    "max_reply_backlog: expected 128K to 1G (K, M, G suffixes), got \"%s\"",
			    value);
	} else if (strcmp(name, "max_inflight") == 0) {
		errno = 0;
		n = strtol(value, &end, 10);
		if (end == value || *end != '\0' || errno != 0 || n < 1 || n > 1000000)
			return conf_fail(ps,
			    "max_inflight: expected an integer from 1 to 1000000, got \"%s\"",
			    value);
		c->max_inflight = (int)n;
	} else {
		return conf_fail(ps,
		    "unknown key \"%s\" in [http] (expected listen, token_file, "
		    "max_body_bytes, max_inflight or max_reply_backlog)",
		    name);
	}
	if (ps->nseen < CONF_SEEN_MAX)
		snprintf(ps->seen[ps->nseen++], sizeof ps->seen[0], "%s", name);
	return 1;
}

/* inih's handler: nonzero is success. */
static int
conf_handler(void *arg, const char *section, const char *name, const char *value)
{
	struct conf_parse *ps = arg;

	if (ps->reason != NULL)
		return 0;
	if (strcmp(section, "http") == 0)
		return conf_http_key(ps, name, value);
	/*
	 * kgymd closes a connection that sends a line longer than this, the
	 * gateway's shared one included: the gateway must never send one.
	 */
	if (strcmp(section, "kgymd") == 0 && strcmp(name, "max_request_bytes") == 0) {
		if (conf_bytes(value, &ps->config->max_request_bytes) < 0)
			return conf_fail(ps,
			    "max_request_bytes: expected 1K to 1G (K, M, G suffixes), got \"%s\"",
			    value);
		return 1;
	}
	if (strcmp(section, "kgymd") == 0 && strcmp(name, "socket") == 0) {
		if (value[0] != '/')
			return conf_fail(ps, "socket: expected an absolute path");
		free(ps->config->socket);
		if ((ps->config->socket = strdup(value)) == NULL)
			return conf_fail(ps, "socket: out of memory");
	}
	return 1; /* kgymd's own keys: kgymd checks them */
}

void
conf_free(struct gw_config *c)
{
	if (c == NULL)
		return;
	free(c->path);
	free(c->socket);
	free(c->listen_host);
	free(c->token_file);
	free(c);
}

int
conf_load(const char *path, struct gw_config **ret_config, char **ret_cause)
{
	struct conf_parse ps = { 0 };
	struct gw_config *c;
	char *why = NULL;
	int line;

	if ((c = calloc(1, sizeof *c)) == NULL)
		return -ENOMEM;
	c->max_body_bytes = 4 * 1024 * 1024;
	c->max_inflight = 10000;
	c->max_reply_backlog = 16 * 1024 * 1024;
	c->max_request_bytes = 4 * 1024 * 1024; /* kgymd's default */
	if ((c->path = strdup(path)) == NULL ||
	    (c->socket = strdup(CONF_DEFAULT_SOCKET)) == NULL ||
	    conf_listen(c, GW_DEFAULT_LISTEN, &why) < 0) {
		conf_free(c);
		return -ENOMEM;
	}
	ps.config = c;
	line = ini_parse(path, conf_handler, &ps);
	if (line == -1) {
		if (asprintf(ret_cause, "%s: cannot open: %s", path, strerror(errno)) <
		    0)
			*ret_cause = NULL;
		conf_free(c);
		return -ENOENT;
	}
	if (line != 0 || ps.reason != NULL) {
		if (asprintf(ret_cause, "%s:%d: %s", path, line,
			ps.reason != NULL ? ps.reason : "syntax error") < 0)
			*ret_cause = NULL;
		free(ps.reason);
		conf_free(c);
		return -EINVAL;
	}
	if (!c->loopback && c->token_file == NULL) {
		if (asprintf(ret_cause,
			"%s: [http] listen = %s is not a loopback address: "
			"set token_file (bearer tokens are required)",
			path, c->listen_host) < 0)
			*ret_cause = NULL;
		conf_free(c);
		return -EINVAL;
	}
	*ret_config = c;
	return 0;
}
