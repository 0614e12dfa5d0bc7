// vector_add reference: one thread per element.
extern "C" __global__ void
vector_add(const float *x, const float *y, float *out, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
		out[i] = x[i] + y[i];
}
