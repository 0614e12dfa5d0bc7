// matmul_fp32 reference: C = A * B, row-major, one thread per element of C.
extern "C" __global__ void
matmul(const float *A, const float *B, float *C, int M, int N, int K)
{
	int col = blockIdx.x * blockDim.x + threadIdx.x;
	int row = blockIdx.y * blockDim.y + threadIdx.y;
	float acc = 0.0f;

	if (row >= M || col >= N)
		return;
	for (int k = 0; k < K; k++)
		acc += A[(long)row * K + k] * B[(long)k * N + col];
	C[(long)row * N + col] = acc;
}
