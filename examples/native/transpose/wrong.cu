// transpose, wrong: the tiled version, but the tile is read back with the
// same orientation it was written in, so each 32x32 block lands in the
// right place untransposed.
#define TILE 32
#define ROWS_PER_PASS 8

extern "C" __global__ void
transpose_tiled(const float *in, float *out, int rows, int cols)
{
	__shared__ float tile[TILE][TILE + 1];
	int c = blockIdx.x * TILE + threadIdx.x;
	int r = blockIdx.y * TILE + threadIdx.y;

	for (int j = 0; j < TILE; j += ROWS_PER_PASS)
		if (r + j < rows && c < cols)
			tile[threadIdx.y + j][threadIdx.x] = in[(long)(r + j) * cols + c];
	__syncthreads();
	c = blockIdx.y * TILE + threadIdx.x;
	r = blockIdx.x * TILE + threadIdx.y;
	for (int j = 0; j < TILE; j += ROWS_PER_PASS)
		if (r + j < cols && c < rows)
			out[(long)(r + j) * rows + c] = tile[threadIdx.y + j][threadIdx.x];
}
