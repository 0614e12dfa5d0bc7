// matmul_bf16, does not compile: cuda_bf16.h is not included, so the
// bfloat16 type and its conversions are undeclared.
extern "C" __global__ void
matmul_bf16(const __nv_bfloat16 *A, const __nv_bfloat16 *B, float *C, int M, int N, int K)
{
	int col = blockIdx.x * blockDim.x + threadIdx.x;
	int row = blockIdx.y * blockDim.y + threadIdx.y;
	float acc = 0.0f;

	if (row >= M || col >= N)
		return;
	for (int k = 0; k < K; k++)
		acc += __bfloat162float(A[(long)row * K + k]) * __bfloat162float(B[(long)k * N + col]);
	C[(long)row * N + col] = acc;
}
