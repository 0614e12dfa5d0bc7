// row_sum, crashes: the row pointer is offset by one float before being
// read as float4, a misaligned 16-byte load.
extern "C" __global__ void
row_sum_vec4(const float *x, float *out, int rows, int cols)
{
	extern __shared__ float partial[];
	const float4 *row4 = reinterpret_cast<const float4 *>(x + (long)blockIdx.x * cols + 1);
	float acc = 0.0f;

	for (int c = threadIdx.x; c < cols / 4 - 1; c += blockDim.x) {
		float4 v = row4[c];

		acc += v.x + v.y + v.z + v.w;
	}
	partial[threadIdx.x] = acc;
	__syncthreads();
	for (int s = blockDim.x / 2; s > 0; s >>= 1) {
		if (threadIdx.x < s)
			partial[threadIdx.x] += partial[threadIdx.x + s];
		__syncthreads();
	}
	if (threadIdx.x == 0)
		out[blockIdx.x] = partial[0];
}
