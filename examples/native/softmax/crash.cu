// softmax, crashes: written for rows that fit in registers (4 values per
// thread); the device-side assert that guards the assumption fires for
// this problem's 8192 columns and aborts the launch.
// NVRTC has no <math.h>: -infinity spelt out.
#define NEG_INF __int_as_float(0xff800000)

extern "C" __global__ void
softmax_registers(const float *x, float *out, int rows, int cols)
{
	__shared__ float red[1024];
	const float *row = x + (long)blockIdx.x * cols;
	float v[4], m = NEG_INF, s = 0.0f;

	assert(cols <= 4 * (int)blockDim.x);
	for (int j = 0; j < 4; j++) {
		int c = threadIdx.x + j * blockDim.x;

		v[j] = c < cols ? row[c] : NEG_INF;
		m = fmaxf(m, v[j]);
	}
	red[threadIdx.x] = m;
	__syncthreads();
	for (int k = blockDim.x / 2; k > 0; k >>= 1) {
		if (threadIdx.x < k)
			red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + k]);
		__syncthreads();
	}
	m = red[0];
	__syncthreads();
	for (int j = 0; j < 4; j++)
		s += expf(v[j] - m);
	red[threadIdx.x] = s;
	__syncthreads();
	for (int k = blockDim.x / 2; k > 0; k >>= 1) {
		if (threadIdx.x < k)
			red[threadIdx.x] += red[threadIdx.x + k];
		__syncthreads();
	}
	s = red[0];
	for (int j = 0; j < 4; j++) {
		int c = threadIdx.x + j * blockDim.x;

		if (c < cols)
			out[(long)blockIdx.x * cols + c] = expf(v[j] - m) / s;
	}
}
