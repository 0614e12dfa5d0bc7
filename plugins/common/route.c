/*
 * route.c -- the one rule that sends a payload to a flow and a backend
 * (route.h).
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "plugin_util.h"
#include "route.h"

static const struct route route_table[] = {
	{ ROUTE_NATIVE, "nvrtc" },
	{ ROUTE_PYTHON, "torch" },
	{ ROUTE_PYTHON, "triton" },
	{ ROUTE_PYTHON, "cuda" },
};

#define ROUTE_N		(sizeof route_table / sizeof route_table[0])

/* "nvrtc, torch, triton, cuda": what `flows` serve, for messages. */
static void
route_served(unsigned int flows, char *buf, size_t len)
{
	size_t i, n = 0;

	buf[0] = '\0';
	for (i = 0; i < ROUTE_N && n < len; i++)
		if (flows & route_table[i].flow)
			n += (size_t)snprintf(buf + n, len - n, "%s%s", n > 0 ? ", " : "",
			    route_table[i].backend);
}

int
route_decide(const json_t *payload, unsigned int flows, const char *workflow,
    struct route *ret, char *err, size_t errlen)
{
	const json_t *b = json_object_get(payload, "backend");
	char served[64];
	size_t i;

	route_served(flows, served, sizeof served);
	if (!json_is_object(payload))
		return pu_err(err, errlen, "payload: expected an object");
	if (b == NULL)
		return pu_err(err, errlen, "backend: required (%s serves: %s; \"nvrtc\" for a "
		    "native problem and solution)", workflow, served);
	if (!json_is_string(b))
		return pu_err(err, errlen, "backend: expected a string such as \"nvrtc\"");
	for (i = 0; i < ROUTE_N; i++) {
		if (!(flows & route_table[i].flow) ||
		    strcmp(json_string_value(b), route_table[i].backend) != 0)
			continue;
		*ret = route_table[i];
		return 0;
	}
	return pu_err(err, errlen, "backend '%s' is not available in this build (%s serves: %s)",
	    json_string_value(b), workflow, served);
}

const struct route *
route_of_task(const struct kgym_host *host, const struct kgym_task *task)
{
	return host->task_get_data(task);
}
