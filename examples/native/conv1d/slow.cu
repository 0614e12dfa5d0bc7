// conv1d, slow but correct: one thread per (batch, output channel) computes
// the whole output row sequentially -- only B * COUT threads run.
extern "C" __global__ void
conv1d_per_row(const float *x, const float *w, float *out, int B, int CIN, int COUT, int L, int KW)
{
	int t = blockIdx.x * blockDim.x + threadIdx.x;
	int lout = L - KW + 1;
	int b, co;

	if (t >= B * COUT)
		return;
	b = t / COUT;
	co = t % COUT;
	for (int l = 0; l < lout; l++) {
		float acc = 0.0f;

		for (int ci = 0; ci < CIN; ci++)
			for (int k = 0; k < KW; k++)
				acc += x[((long)b * CIN + ci) * L + l + k] * w[((long)co * CIN + ci) * KW + k];
		out[((long)b * COUT + co) * lout + l] = acc;
	}
}
