/*
 * gpus.c -- which GPUs kgymd would use, learnt without touching CUDA.
 *
 * The daemon must never initialise CUDA (a context does not survive fork),
 * so it reads what the NVIDIA kernel driver publishes under
 * /proc/driver/nvidia/gpus/<PCI bus id>/information.  Indices follow PCI
 * bus order, which is the order workers see with CUDA_DEVICE_ORDER=
 * PCI_BUS_ID.  Memory size is not published there; workers report it once
 * they run (the worker issue), until then it is null.
 */
#include "config.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kgymd.h"

#define GPUS_PROC	"/proc/driver/nvidia/gpus"

static int
gpus_filter(const struct dirent *d)
{
	return d->d_name[0] != '.';
}

/* The "Model:" line of one GPU's information file, or NULL. */
static json_t *
gpus_model(const char *busid)
{
	char path[512], line[256], *v;
	json_t *model = NULL;
	FILE *f;

	snprintf(path, sizeof path, GPUS_PROC "/%s/information", busid);
	if ((f = fopen(path, "re")) == NULL)
		return json_null();
	while (fgets(line, sizeof line, f) != NULL) {
		if (strncmp(line, "Model:", 6) != 0)
			continue;
		v = line + 6;
		v += strspn(v, " \t");
		v[strcspn(v, "\n")] = '\0';
		model = json_string(v);
		break;
	}
	fclose(f);
	return model != NULL ? model : json_null();
}

static bool
gpus_selected(const struct config *config, int index)
{
	size_t i;

	if (config->gpus_all)
		return true;
	for (i = 0; i < config->ngpus; i++)
		if (config->gpus[i] == index)
			return true;
	return false;
}

json_t *
gpus_describe(const struct config *config)
{
	struct dirent **names = NULL;
	json_t *list = json_array();
	int n, i;
	size_t k;

	n = scandir(GPUS_PROC, &names, gpus_filter, alphasort);
	for (i = 0; i < n; i++) {
		if (gpus_selected(config, i))
			json_array_append_new(list, json_pack("{s:i, s:s, s:o, s:n, s:s, s:[]}",
			    "index", i, "pci_bus_id", names[i]->d_name,
			    "name", gpus_model(names[i]->d_name), "memory_bytes",
			    "lock", "free", "workers"));
		free(names[i]);
	}
	free(names);
	/* A configured GPU the driver does not show is reported, not hidden. */
	for (k = 0; !config->gpus_all && k < config->ngpus; k++)
		if (config->gpus[k] >= (n > 0 ? n : 0))
			json_array_append_new(list, json_pack("{s:i, s:n, s:n, s:s, s:s, s:[]}",
			    "index", config->gpus[k], "name", "memory_bytes", "lock", "free",
			    "error", "configured, but the NVIDIA driver shows no such GPU",
			    "workers"));
	return list;
}
