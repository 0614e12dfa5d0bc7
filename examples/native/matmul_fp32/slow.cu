// matmul_fp32, slow but correct: like the reference, but threadIdx.x walks
// the rows, so a warp's loads of A are 32 different rows (uncoalesced).
extern "C" __global__ void
matmul_rows_in_x(const float *A, const float *B, float *C, int M, int N, int K)
{
	int row = blockIdx.x * blockDim.x + threadIdx.x;
	int col = blockIdx.y * blockDim.y + threadIdx.y;
	float acc = 0.0f;

	if (row >= M || col >= N)
		return;
	for (int k = 0; k < K; k++)
		acc += A[(long)row * K + k] * B[(long)k * N + col];
	C[(long)row * N + col] = acc;
}
