// softmax, wrong: the numerator is shifted by the row maximum but the
// denominator is not, so every output is off by a factor exp(max).
// NVRTC has no <math.h>: -infinity spelt out.
#define NEG_INF __int_as_float(0xff800000)

extern "C" __global__ void
softmax_rows(const float *x, float *out, int rows, int cols)
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
		s += expf(row[c]);
	red[threadIdx.x] = s;
	__syncthreads();
	for (int k = blockDim.x / 2; k > 0; k >>= 1) {
		if (threadIdx.x < k)
			red[threadIdx.x] += red[threadIdx.x + k];
		__syncthreads();
	}
	s = red[0];
	for (int c = threadIdx.x; c < cols; c += blockDim.x)
		out[(long)blockIdx.x * cols + c] = expf(row[c] - m) / s;
}
