// matmul_bf16, crashes: A is read two elements at a time as
// __nv_bfloat162, but the pair starts one element late (k + 1), a
// misaligned 4-byte load.
#include <cuda_bf16.h>

extern "C" __global__ void
matmul_bf16_pairs(const __nv_bfloat16 *A, const __nv_bfloat16 *B, float *C, int M, int N, int K)
{
	int col = blockIdx.x * blockDim.x + threadIdx.x;
	int row = blockIdx.y * blockDim.y + threadIdx.y;
	float acc = 0.0f;

	if (row >= M || col >= N)
		return;
	for (int k = 0; k + 2 < K; k += 2) {
		__nv_bfloat162 a = *reinterpret_cast<const __nv_bfloat162 *>(A + (long)row * K + k + 1);
		float2 af = __bfloat1622float2(a);

		acc += af.x * __bfloat162float(B[(long)k * N + col]);
		acc += af.y * __bfloat162float(B[(long)(k + 1) * N + col]);
	}
	C[(long)row * N + col] = acc;
}
