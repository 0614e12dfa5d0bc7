// vector_add, wrong: an off-by-one bound leaves the last element unwritten.
extern "C" __global__ void
vector_add(const float *x, const float *y, float *out, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n - 1)
		out[i] = x[i] + y[i];
}
