// conv1d, wrong: the tap loop stops at KW - 1, dropping the last tap.
extern "C" __global__ void
conv1d(const float *x, const float *w, float *out, int B, int CIN, int COUT, int L, int KW)
{
	int lout = L - KW + 1;
	int l = blockIdx.x * blockDim.x + threadIdx.x;
	int co = blockIdx.y, b = blockIdx.z;
	float acc = 0.0f;

	if (l >= lout)
		return;
	for (int ci = 0; ci < CIN; ci++) {
		const float *xr = x + ((long)b * CIN + ci) * L + l;
		const float *wr = w + ((long)co * CIN + ci) * KW;

		for (int k = 0; k < KW - 1; k++)
			acc += xr[k] * wr[k];
	}
	out[((long)b * COUT + co) * lout + l] = acc;
}
