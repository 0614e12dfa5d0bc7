// matmul_bf16, wrong: the accumulator is a bfloat16 too, so a 4096-term
// dot product keeps only 8 bits of mantissa -- far outside the tolerance.
#include <cuda_bf16.h>

extern "C" __global__ void
matmul_bf16(const __nv_bfloat16 *A, const __nv_bfloat16 *B, float *C, int M, int N, int K)
{
	int col = blockIdx.x * blockDim.x + threadIdx.x;
	int row = blockIdx.y * blockDim.y + threadIdx.y;
	__nv_bfloat16 acc = __float2bfloat16(0.0f);

	if (row >= M || col >= N)
		return;
	for (int k = 0; k < K; k++)
		acc = __hfma(A[(long)row * K + k], B[(long)k * N + col], acc);
	C[(long)row * N + col] = __bfloat162float(acc);
}
