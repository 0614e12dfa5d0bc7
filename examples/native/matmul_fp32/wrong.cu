// matmul_fp32, wrong: B is read as if it were column-major (B[col][k]),
// i.e. this computes A * B^T.  The matrices are square, so every access
// stays in bounds.
extern "C" __global__ void
matmul(const float *A, const float *B, float *C, int M, int N, int K)
{
	int col = blockIdx.x * blockDim.x + threadIdx.x;
	int row = blockIdx.y * blockDim.y + threadIdx.y;
	float acc = 0.0f;

	if (row >= M || col >= N)
		return;
	for (int k = 0; k < K; k++)
		acc += A[(long)row * K + k] * B[(long)col * K + k];
	C[(long)row * N + col] = acc;
}
