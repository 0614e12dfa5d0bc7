// scan, wrong: an exclusive scan (each output leaves out its own element)
// where the problem asks for an inclusive one.
extern "C" __global__ void
scan_rows(const int *x, int *out, int rows, int cols)
{
	extern __shared__ int buf[];
	const int *row = x + (long)blockIdx.x * cols;
	int *orow = out + (long)blockIdx.x * cols;
	int chunk = (cols + blockDim.x - 1) / blockDim.x;
	int begin = threadIdx.x * chunk;
	int end = min(begin + chunk, cols);
	int total = 0, in = 0;

	for (int c = begin; c < end; c++)
		total += row[c];
	buf[threadIdx.x] = total;
	__syncthreads();
	for (int off = 1; off < (int)blockDim.x; off *= 2) {
		int v = buf[in * blockDim.x + threadIdx.x];

		if (threadIdx.x >= off)
			v += buf[in * blockDim.x + threadIdx.x - off];
		buf[(1 - in) * blockDim.x + threadIdx.x] = v;
		in = 1 - in;
		__syncthreads();
	}
	int run = buf[in * blockDim.x + threadIdx.x] - total;

	for (int c = begin; c < end; c++) {
		orow[c] = run;
		run += row[c];
	}
}
