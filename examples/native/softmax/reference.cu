// softmax reference, two launches: softmax_stats writes each row's maximum
// and sum of exp(x - max) into the scratch tensor `stats`; softmax_normalize
// then computes every element independently.
// NVRTC has no <math.h>: -infinity spelt out.
#define NEG_INF __int_as_float(0xff800000)

extern "C" __global__ void
softmax_stats(const float *x, float *stats, int rows, int cols)
{
	__shared__ float red[256];
	const float *row = x + (long)blockIdx.x * cols;
	float m = NEG_INF, s = 0.0f;

	for (int c = threadIdx.x; c < cols; c += blockDim.x)
		m = fmaxf(m, row[c]);
	red[threadIdx.x] = m;
	__syncthreads();
	for (int k = blockDim.x / 2; k > 0; k >>= 1) {
		if (threadIdx.x < k)
			red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + k]);
		__syncthreads();
	}
	m = red[0];
	__syncthreads();
	for (int c = threadIdx.x; c < cols; c += blockDim.x)
		s += expf(row[c] - m);
	red[threadIdx.x] = s;
	__syncthreads();
	for (int k = blockDim.x / 2; k > 0; k >>= 1) {
		if (threadIdx.x < k)
			red[threadIdx.x] += red[threadIdx.x + k];
		__syncthreads();
	}
	if (threadIdx.x == 0) {
		stats[2 * (long)blockIdx.x] = m;
		stats[2 * (long)blockIdx.x + 1] = red[0];
	}
}

extern "C" __global__ void
softmax_normalize(const float *x, const float *stats, float *out, int rows, int cols)
{
	long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
	long r = i / cols;

	if (i < (long)rows * cols)
		out[i] = expf(x[i] - stats[2 * r]) / stats[2 * r + 1];
}
