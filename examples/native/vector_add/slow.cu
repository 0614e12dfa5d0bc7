// vector_add, slow but correct: each thread owns a contiguous chunk of 64
// elements, so neighbouring threads touch addresses 256 bytes apart and no
// load is coalesced.
#define CHUNK 64

extern "C" __global__ void
vector_add_chunked(const float *x, const float *y, float *out, int n)
{
	long start = (long)(blockIdx.x * blockDim.x + threadIdx.x) * CHUNK;

	for (long i = start; i < start + CHUNK && i < n; i++)
		out[i] = x[i] + y[i];
}
