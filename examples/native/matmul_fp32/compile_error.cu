// matmul_fp32, does not compile: the tile size macro is misspelt (BM_).
#define BM 32
#define BK 32

extern "C" __global__ void
matmul_tiled(const float *A, const float *B, float *C, int M, int N, int K)
{
	__shared__ float As[BM_][BK];
	__shared__ float Bs[BK][BM];
	int tx = threadIdx.x, ty = threadIdx.y;
	int row = blockIdx.y * BM + ty, col = blockIdx.x * BM + tx;
	float acc = 0.0f;

	for (int k0 = 0; k0 < K; k0 += BK) {
		As[ty][tx] = row < M && k0 + tx < K ? A[(long)row * K + k0 + tx] : 0.0f;
		Bs[ty][tx] = k0 + ty < K && col < N ? B[(long)(k0 + ty) * N + col] : 0.0f;
		__syncthreads();
		for (int k = 0; k < BK; k++)
			acc += As[ty][k] * Bs[k][tx];
		__syncthreads();
	}
	if (row < M && col < N)
		C[(long)row * N + col] = acc;
}
