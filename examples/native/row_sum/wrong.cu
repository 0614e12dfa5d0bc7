// row_sum, wrong: the tree reduction stops one level early (s > 1), so the
// partial sum of thread 1 never reaches thread 0.
extern "C" __global__ void
row_sum(const float *x, float *out, int rows, int cols)
{
	extern __shared__ float partial[];
	const float *row = x + (long)blockIdx.x * cols;
	float acc = 0.0f;

	for (int c = threadIdx.x; c < cols; c += blockDim.x)
		acc += row[c];
	partial[threadIdx.x] = acc;
	__syncthreads();
	for (int s = blockDim.x / 2; s > 1; s >>= 1) {
		if (threadIdx.x < s)
			partial[threadIdx.x] += partial[threadIdx.x + s];
		__syncthreads();
	}
	if (threadIdx.x == 0)
		out[blockIdx.x] = partial[0];
}
