// transpose, fast: 32x32 tiles staged through shared memory (padded to 33
// columns against bank conflicts), so both the reads and the writes are
// coalesced; 32x8 threads, each moving 4 elements.
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
	/* The block's tile lands at (blockIdx.x, blockIdx.y) swapped. */
	c = blockIdx.y * TILE + threadIdx.x;
	r = blockIdx.x * TILE + threadIdx.y;
	for (int j = 0; j < TILE; j += ROWS_PER_PASS)
		if (r + j < cols && c < rows)
			out[(long)(r + j) * rows + c] = tile[threadIdx.x][threadIdx.y + j];
}
