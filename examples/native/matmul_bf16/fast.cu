// matmul_bf16, fast: tensor cores through WMMA (16x16x16 bfloat16 tiles,
// float32 accumulators).  A block of 4 warps covers a 64x64 tile of C, each
// warp a 32x32 quarter as 2x2 fragments; fragments load straight from
// global memory (L1/L2 serve the reuse).  Needs M and N multiples of 32 and
// K a multiple of 16 (the device-side assert says so otherwise).
#include <cuda_bf16.h>
#include <mma.h>

using namespace nvcuda;

extern "C" __global__ void __launch_bounds__(128)
matmul_bf16_wmma(const __nv_bfloat16 *A, const __nv_bfloat16 *B, float *C, int M, int N, int K)
{
	wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> a[2];
	wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major> b[2];
	wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2][2];
	int warp = threadIdx.x / 32;
	int row0 = blockIdx.y * 64 + (warp / 2) * 32;
	int col0 = blockIdx.x * 64 + (warp % 2) * 32;

	assert(M % 32 == 0 && N % 32 == 0 && K % 16 == 0);
	if (row0 >= M || col0 >= N)
		return;		/* the whole warp: fragments are warp-wide */
	for (int i = 0; i < 2; i++)
		for (int j = 0; j < 2; j++)
			wmma::fill_fragment(acc[i][j], 0.0f);
	for (int k = 0; k < K; k += 16) {
		for (int i = 0; i < 2; i++)
			wmma::load_matrix_sync(a[i], A + (long)(row0 + 16 * i) * K + k, K);
		for (int j = 0; j < 2; j++)
			wmma::load_matrix_sync(b[j], B + (long)k * N + col0 + 16 * j, N);
		for (int i = 0; i < 2; i++)
			for (int j = 0; j < 2; j++)
				wmma::mma_sync(acc[i][j], a[i], b[j], acc[i][j]);
	}
	for (int i = 0; i < 2; i++)
		for (int j = 0; j < 2; j++)
			wmma::store_matrix_sync(C + (long)(row0 + 16 * i) * N + col0 + 16 * j,
			    acc[i][j], N, wmma::mem_row_major);
}
