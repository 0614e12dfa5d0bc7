// row_sum, fast: one block of 512 threads per row, 16-byte loads when the
// row is 16-byte aligned, warp shuffles instead of a shared-memory tree.
__device__ __forceinline__ float
warp_sum(float v)
{
	for (int off = 16; off > 0; off >>= 1)
		v += __shfl_down_sync(0xffffffffu, v, off);
	return v;
}

extern "C" __global__ void
row_sum_fast(const float *x, float *out, int rows, int cols)
{
	__shared__ float warp_totals[32];
	const float *row = x + (long)blockIdx.x * cols;
	float acc = 0.0f;
	int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;

	if ((cols & 3) == 0) {
		const float4 *row4 = reinterpret_cast<const float4 *>(row);

		for (int c = threadIdx.x; c < cols / 4; c += blockDim.x) {
			float4 v = row4[c];

			acc += (v.x + v.y) + (v.z + v.w);
		}
	} else {
		for (int c = threadIdx.x; c < cols; c += blockDim.x)
			acc += row[c];
	}
	acc = warp_sum(acc);
	if (lane == 0)
		warp_totals[warp] = acc;
	__syncthreads();
	if (warp == 0) {
		acc = lane < (int)(blockDim.x + 31) / 32 ? warp_totals[lane] : 0.0f;
		acc = warp_sum(acc);
		if (lane == 0)
			out[blockIdx.x] = acc;
	}
}
