// matmul_fp32, fast: 64x64 tiles of C per block staged through shared
// memory in steps of 16 along K; each of the 256 threads accumulates a 4x4
// sub-tile in registers (strided by 16 so shared-memory reads do not
// conflict).  Any M, N, K: out-of-range tile elements load as zero.
#define BM 64
#define BN 64
#define BK 16
#define NT 256

extern "C" __global__ void __launch_bounds__(NT)
matmul_tiled(const float *A, const float *B, float *C, int M, int N, int K)
{
	__shared__ float As[BK][BM + 4];
	__shared__ float Bs[BK][BN];
	int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
	int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
	float acc[4][4] = {};

	for (int k0 = 0; k0 < K; k0 += BK) {
		for (int i = tid; i < BM * BK; i += NT) {
			int r = i / BK, k = i % BK, gr = row0 + r, gk = k0 + k;

			As[k][r] = gr < M && gk < K ? A[(long)gr * K + gk] : 0.0f;
		}
		for (int i = tid; i < BK * BN; i += NT) {
			int k = i / BN, c = i % BN, gk = k0 + k, gc = col0 + c;

			Bs[k][c] = gk < K && gc < N ? B[(long)gk * N + gc] : 0.0f;
		}
		__syncthreads();
#pragma unroll
		for (int k = 0; k < BK; k++) {
			float a[4], b[4];

#pragma unroll
			for (int i = 0; i < 4; i++) {
				a[i] = As[k][ty + 16 * i];
				b[i] = Bs[k][tx + 16 * i];
			}
#pragma unroll
			for (int i = 0; i < 4; i++)
#pragma unroll
				for (int j = 0; j < 4; j++)
					acc[i][j] += a[i] * b[j];
		}
		__syncthreads();
	}
	for (int i = 0; i < 4; i++) {
		int r = row0 + ty + 16 * i;

		for (int j = 0; j < 4; j++) {
			int c = col0 + tx + 16 * j;

			if (r < M && c < N)
				C[(long)r * N + c] = acc[i][j];
		}
	}
}
