// matmul_fp32, crashes: the row stride of C is written as M * N (the size
// of the matrix) instead of N, so every row but the first is stored far
// past the end of C.
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
	C[(long)row * M * N + col] = acc;
}
