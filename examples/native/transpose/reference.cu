// transpose reference: out[c][r] = in[r][c]; reads coalesced, writes
// strided by ROWS.
extern "C" __global__ void
transpose(const float *in, float *out, int rows, int cols)
{
	int c = blockIdx.x * blockDim.x + threadIdx.x;
	int r = blockIdx.y * blockDim.y + threadIdx.y;

	if (r < rows && c < cols)
		out[(long)c * rows + r] = in[(long)r * cols + c];
}
