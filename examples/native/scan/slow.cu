// scan, slow but correct: one thread per row, a sequential running sum.
extern "C" __global__ void
scan_per_thread(const int *x, int *out, int rows, int cols)
{
	int r = blockIdx.x * blockDim.x + threadIdx.x;
	int run = 0;

	if (r >= rows)
		return;
	for (int c = 0; c < cols; c++) {
		run += x[(long)r * cols + c];
		out[(long)r * cols + c] = run;
	}
}
