// scan, does not compile: reinterpret_cast from a pointer to a vector
// value (it should cast to const int4 *).
extern "C" __global__ void
scan_vec(const int *x, int *out, int rows, int cols)
{
	int r = blockIdx.x * blockDim.x + threadIdx.x;
	int run = 0;

	if (r >= rows)
		return;
	for (int c = 0; c + 4 <= cols; c += 4) {
		int4 q = reinterpret_cast<int4>(x + (long)r * cols + c);

		run += q.x;
		out[(long)r * cols + c] = run;
		run += q.y;
		out[(long)r * cols + c + 1] = run;
		run += q.z;
		out[(long)r * cols + c + 2] = run;
		run += q.w;
		out[(long)r * cols + c + 3] = run;
	}
}
