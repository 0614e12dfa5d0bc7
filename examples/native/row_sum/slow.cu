// row_sum, slow but correct: one thread per row walks the whole row, so
// neighbouring threads read addresses a full row apart (no coalescing).
extern "C" __global__ void
row_sum_per_thread(const float *x, float *out, int rows, int cols)
{
	int r = blockIdx.x * blockDim.x + threadIdx.x;
	float acc = 0.0f;

	if (r >= rows)
		return;
	for (int c = 0; c < cols; c++)
		acc += x[(long)r * cols + c];
	out[r] = acc;
}
