/*
 * gpus.c -- which GPUs kgymd uses, learnt without touching CUDA.
 *
 * The daemon must never initialise CUDA (a context does not survive fork),
 * so it reads what the NVIDIA kernel driver publishes under
 * /proc/driver/nvidia/gpus/<PCI bus id>/information.  Indices follow PCI
 * bus order, which is the order workers see with CUDA_DEVICE_ORDER=
 * PCI_BUS_ID.  Memory size is not published there: NVML gives it where the
 * driver's libnvidia-ml loads (it opens the driver's control device, no
 * CUDA context), for choosing workers_per_gpu = auto; each GPU worker
 * still reports what CUDA sees in its HELLO, which admission uses.
 */
#include "config.h"

#include <dirent.h>
#include <dlfcn.h>
#include <stdint.h>
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

/* The "Model:" line of one GPU's information file, malloc'd, or NULL. */
static char *
gpus_model(const char *busid)
{
	char path[512], line[256], *v, *model = NULL;
	FILE *f;

	snprintf(path, sizeof path, GPUS_PROC "/%s/information", busid);
	if ((f = fopen(path, "re")) == NULL)
		return NULL;
	while (fgets(line, sizeof line, f) != NULL) {
		if (strncmp(line, "Model:", 6) != 0)
			continue;
		v = line + 6;
		v += strspn(v, " \t");
		v[strcspn(v, "\n")] = '\0';
		model = strdup(v);
		break;
	}
	fclose(f);
	return model;
}

/* NVML's few entry points used here (nvml.h is not needed to build). */
struct gpus_nvml_memory {
	unsigned long long total, free, used;
};

/* Total memory of each GPU whose bus id NVML knows; left 0 otherwise. */
static void
gpus_memory(struct gpu_info *info, char **busids, size_t n)
{
	int (*init)(void), (*shutdown)(void);
	int (*by_bus)(const char *, void **);
	int (*memory)(void *, struct gpus_nvml_memory *);
	struct gpus_nvml_memory m;
	void *lib, *dev;
	size_t i;

	if (n == 0 || (lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL)) == NULL)
		return;
	init = (int (*)(void))dlsym(lib, "nvmlInit_v2");
	shutdown = (int (*)(void))dlsym(lib, "nvmlShutdown");
	by_bus = (int (*)(const char *, void **))dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2");
	memory = (int (*)(void *, struct gpus_nvml_memory *))dlsym(lib, "nvmlDeviceGetMemoryInfo");
	if (init != NULL && shutdown != NULL && by_bus != NULL && memory != NULL && init() == 0) {
		for (i = 0; i < n; i++)
			if (busids[i] != NULL && by_bus(busids[i], &dev) == 0 && memory(dev, &m) == 0)
				info[i].memory_bytes = m.total;
		shutdown();
	}
	dlclose(lib);
}

void
gpus_enumerate(const struct config *config, struct gpu_info **ret_info, size_t *ret_n)
{
	struct dirent **names = NULL;
	struct gpu_info *info;
	char **busids;
	size_t n = 0, cap, k;
	int found, i;

	found = scandir(GPUS_PROC, &names, gpus_filter, alphasort);
	if (found < 0)
		found = 0;
	cap = config->gpus_all ? (size_t)found : config->ngpus;
	info = calloc(cap > 0 ? cap : 1, sizeof *info);
	if (info == NULL)
		fatalx("out of memory");
	if ((busids = calloc(cap > 0 ? cap : 1, sizeof *busids)) == NULL)
		fatalx("out of memory");
	if (config->gpus_all) {
		for (i = 0; i < found; i++) {
			busids[n] = names[i]->d_name;
			info[n++] = (struct gpu_info){ .index = i,
			    .name = gpus_model(names[i]->d_name), .present = true };
		}
	} else {
		for (k = 0; k < config->ngpus; k++) {
			i = config->gpus[k];
			busids[n] = i < found ? names[i]->d_name : NULL;
			info[n++] = (struct gpu_info){ .index = i,
			    .name = i < found ? gpus_model(names[i]->d_name) : NULL,
			    .present = i < found };
		}
	}
	gpus_memory(info, busids, n);
	free(busids);
	for (i = 0; i < found; i++)
		free(names[i]);
	free(names);
	*ret_info = info;
	*ret_n = n;
}
