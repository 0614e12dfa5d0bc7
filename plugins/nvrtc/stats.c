/*
 * stats.c -- the numbers kgymd-protocol(7) reports for a set of timed calls.
 *
 * Timing stops adaptively once the 95% interval of the median is narrow
 * enough (timing.c), so the interval must be honest for the skewed,
 * outlier-prone distributions GPU timings have: it is the distribution-free
 * interval between two order statistics, whose ranks come from the
 * binomial(n, 1/2) count of samples below the true median.  No bootstrap:
 * it is deterministic and needs no random numbers.
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nvrtc_internal.h"

static int
stats_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

int
stats_summarise(const double *x, size_t n, struct stats_summary *ret)
{
	struct stats_summary s;
	double *v, sum = 0.0, ss = 0.0, half;
	long lo, hi;
	size_t i;

	if (n == 0)
		return -EINVAL;
	for (i = 0; i < n; i++)
		if (!isfinite(x[i]))
			return -EINVAL;
	if ((v = malloc(n * sizeof *v)) == NULL)
		return -ENOMEM;
	memcpy(v, x, n * sizeof *v);
	qsort(v, n, sizeof *v, stats_cmp_double);

	memset(&s, 0, sizeof s);
	s.n = n;
	s.min = v[0];
	s.max = v[n - 1];
	s.median = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2.0;
	for (i = 0; i < n; i++)
		sum += v[i];
	s.mean = sum / (double)n;
	for (i = 0; i < n; i++)
		ss += (v[i] - s.mean) * (v[i] - s.mean);
	s.std = n > 1 ? sqrt(ss / (double)(n - 1)) : 0.0;

	/*
	 * 1-based ranks n/2 -/+ 1.96 sqrt(n)/2 (the upper one plus one).  With
	 * n >= 6 the extremes already cover 95% (1 - 2^(1-n) >= 0.968), so
	 * clamping to them stays a 95% interval; below that there is none.
	 */
	half = 0.98 * sqrt((double)n);
	lo = (long)floor((double)n / 2.0 - half);
	hi = (long)ceil(1.0 + (double)n / 2.0 + half);
	if (lo < 1)
		lo = 1;
	if (hi > (long)n)
		hi = (long)n;
	s.ci_lo = v[lo - 1];
	s.ci_hi = v[hi - 1];
	if (n < 6 || s.median <= 0.0)
		s.ci_rel = INFINITY;
	else
		s.ci_rel = fmax(s.median - s.ci_lo, s.ci_hi - s.median) / s.median;
	free(v);
	*ret = s;
	return 0;
}

json_t *
stats_json(const struct stats_summary *s)
{
	return json_pack("{s:f, s:f, s:f, s:f, s:f, s:[f, f], s:o, s:I}",
	    "median_ms", s->median, "mean_ms", s->mean, "std_ms", s->std,
	    "min_ms", s->min, "max_ms", s->max, "ci95_ms", s->ci_lo, s->ci_hi,
	    "ci95_rel", isfinite(s->ci_rel) ? json_real(s->ci_rel) : json_null(),
	    "trials", (json_int_t)s->n);
}
