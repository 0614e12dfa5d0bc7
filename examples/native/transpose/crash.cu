// transpose, crashes: the output index multiplies by both dimensions
// (c * rows * cols) instead of one, far past the end of the output.
extern "C" __global__ void
transpose(const float *in, float *out, int rows, int cols)
{
	int c = blockIdx.x * blockDim.x + threadIdx.x;
	int r = blockIdx.y * blockDim.y + threadIdx.y;

	if (r < rows && c < cols)
		out[(long)c * rows * cols + r] = in[(long)r * cols + c];
}
