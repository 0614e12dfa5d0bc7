// conv1d, fast: a block computes 128 output positions for 16 output
// channels at once.  Input channels go 16 at a time: their input window
// (128 + KW - 1 positions) and the matching weights are staged in dynamic
// shared memory, and each thread keeps 16 accumulators in registers, so
// every input value read from shared memory feeds 16 multiply-adds.
#define TL 128
#define TCO 16
#define TCI 16

extern "C" __global__ void __launch_bounds__(TL)
conv1d_tiled(const float *x, const float *w, float *out, int B, int CIN, int COUT, int L, int KW)
{
	extern __shared__ float sm[];
	int span = TL + KW - 1;
	float *xs = sm;			/* [TCI][span] */
	float *ws = sm + TCI * span;	/* [TCO][TCI][KW] */
	int lout = L - KW + 1;
	int b = blockIdx.z, co0 = blockIdx.y * TCO, l0 = blockIdx.x * TL;
	float acc[TCO];

#pragma unroll
	for (int co = 0; co < TCO; co++)
		acc[co] = 0.0f;
	for (int ci0 = 0; ci0 < CIN; ci0 += TCI) {
		for (int i = threadIdx.x; i < TCI * span; i += TL) {
			int ci = ci0 + i / span, p = l0 + i % span;

			xs[i] = ci < CIN && p < L ? x[((long)b * CIN + ci) * L + p] : 0.0f;
		}
		for (int i = threadIdx.x; i < TCO * TCI * KW; i += TL) {
			int co = co0 + i / (TCI * KW), ci = ci0 + (i / KW) % TCI, k = i % KW;

			ws[i] = co < COUT && ci < CIN ? w[((long)co * CIN + ci) * KW + k] : 0.0f;
		}
		__syncthreads();
		for (int ci = 0; ci < TCI; ci++) {
			for (int k = 0; k < KW; k++) {
				float xv = xs[ci * span + threadIdx.x + k];

#pragma unroll
				for (int co = 0; co < TCO; co++)
					acc[co] += xv * ws[(co * TCI + ci) * KW + k];
			}
		}
		__syncthreads();
	}
	int l = l0 + threadIdx.x;

	if (l >= lout)
		return;
#pragma unroll
	for (int co = 0; co < TCO; co++)
		if (co0 + co < COUT)
			out[((long)b * COUT + co0 + co) * lout + l] = acc[co];
}
