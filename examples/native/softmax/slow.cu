// softmax, slow but correct: one thread per row makes three sequential
// passes (max, sum, write) with uncoalesced accesses.
// NVRTC has no <math.h>: -infinity spelt out.
#define NEG_INF __int_as_float(0xff800000)

extern "C" __global__ void
softmax_per_thread(const float *x, float *out, int rows, int cols)
{
	int r = blockIdx.x * blockDim.x + threadIdx.x;
	const float *row;
	float m = NEG_INF, s = 0.0f;

	if (r >= rows)
		return;
	row = x + (long)r * cols;
	for (int c = 0; c < cols; c++)
		m = fmaxf(m, row[c]);
	for (int c = 0; c < cols; c++)
		s += expf(row[c] - m);
	for (int c = 0; c < cols; c++)
		out[(long)r * cols + c] = expf(row[c] - m) / s;
}
