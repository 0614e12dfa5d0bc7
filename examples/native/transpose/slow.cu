// transpose, slow but correct: one thread per input row copies the whole
// row; only ROWS threads run and their reads are a row apart.
extern "C" __global__ void
transpose_per_row(const float *in, float *out, int rows, int cols)
{
	int r = blockIdx.x * blockDim.x + threadIdx.x;

	if (r >= rows)
		return;
	for (int c = 0; c < cols; c++)
		out[(long)c * rows + r] = in[(long)r * cols + c];
}
