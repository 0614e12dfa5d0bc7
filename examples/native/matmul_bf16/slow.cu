// matmul_bf16, slow but correct: threadIdx.x walks the rows of C, so a
// warp's loads of A hit 32 different rows (uncoalesced).
#include <cuda_bf16.h>

extern "C" __global__ void
matmul_bf16_rows_in_x(const __nv_bfloat16 *A, const __nv_bfloat16 *B, float *C, int M, int N,
    int K)
{
	int row = blockIdx.x * blockDim.x + threadIdx.x;
	int col = blockIdx.y * blockDim.y + threadIdx.y;
	float acc = 0.0f;

	if (row >= M || col >= N)
		return;
	for (int k = 0; k < K; k++)
		acc += __bfloat162float(A[(long)row * K + k]) * __bfloat162float(B[(long)k * N + col]);
	C[(long)row * N + col] = acc;
}
