// conv1d, does not compile: the inner loop's closing brace is missing.
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
		for (int k = 0; k < KW; k++) {
			acc += x[((long)b * CIN + ci) * L + l + k] * w[((long)co * CIN + ci) * KW + k];
	}
	out[((long)b * COUT + co) * lout + l] = acc;
}
