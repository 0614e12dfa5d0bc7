// softmax, does not compile: __shfl_down_sync is called without its mask.
__device__ float
warp_max(float v)
{
	for (int off = 16; off > 0; off >>= 1)
		v = fmaxf(v, __shfl_down_sync(v, off));
	return v;
}

extern "C" __global__ void
softmax_warp(const float *x, float *out, int rows, int cols)
{
	const float *row = x + (long)blockIdx.x * cols;
	float m = -INFINITY, s = 0.0f;

	for (int c = threadIdx.x; c < cols; c += 32)
		m = fmaxf(m, row[c]);
	m = __shfl_sync(0xffffffffu, warp_max(m), 0);
	for (int c = threadIdx.x; c < cols; c += 32)
		s += expf(row[c] - m);
	for (int off = 16; off > 0; off >>= 1)
		s += __shfl_down_sync(0xffffffffu, s, off);
	s = __shfl_sync(0xffffffffu, s, 0);
	for (int c = threadIdx.x; c < cols; c += 32)
		out[(long)blockIdx.x * cols + c] = expf(row[c] - m) / s;
}
