// softmax, fast: one block per row, a single "online" pass for the maximum
// and the sum (rescaling the running sum when the maximum grows), combined
// across lanes with shuffles; a second pass writes the output and finds the
// row still in L2.
// NVRTC has no <math.h>: -infinity spelt out.
#define NEG_INF __int_as_float(0xff800000)

struct ms {
	float m, s;
};

__device__ __forceinline__ struct ms
ms_combine(struct ms a, struct ms b)
{
	struct ms r;

	r.m = fmaxf(a.m, b.m);
	if (r.m == NEG_INF) {
		r.s = 0.0f;
		return r;
	}
	r.s = a.s * __expf(a.m - r.m) + b.s * __expf(b.m - r.m);
	return r;
}

__device__ __forceinline__ void
ms_add(struct ms *a, float v)
{
	if (v > a->m) {
		a->s = a->s * __expf(a->m - v) + 1.0f;
		a->m = v;
	} else {
		a->s += __expf(v - a->m);
	}
}

extern "C" __global__ void
softmax_online(const float *x, float *out, int rows, int cols)
{
	__shared__ struct ms warp_ms[32];
	__shared__ struct ms row_ms;
	const float *row = x + (long)blockIdx.x * cols;
	float *orow = out + (long)blockIdx.x * cols;
	bool vec = (cols & 3) == 0;
	int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
	struct ms a = { NEG_INF, 0.0f };

	if (vec) {
		for (int c = threadIdx.x; c < cols / 4; c += blockDim.x) {
			float4 v = reinterpret_cast<const float4 *>(row)[c];

			ms_add(&a, v.x);
			ms_add(&a, v.y);
			ms_add(&a, v.z);
			ms_add(&a, v.w);
		}
	} else {
		for (int c = threadIdx.x; c < cols; c += blockDim.x)
			ms_add(&a, row[c]);
	}
	for (int off = 16; off > 0; off >>= 1) {
		struct ms b;

		b.m = __shfl_down_sync(0xffffffffu, a.m, off);
		b.s = __shfl_down_sync(0xffffffffu, a.s, off);
		a = ms_combine(a, b);
	}
	if (lane == 0)
		warp_ms[warp] = a;
	__syncthreads();
	if (warp == 0) {
		struct ms empty = { NEG_INF, 0.0f };

		a = lane < (int)(blockDim.x + 31) / 32 ? warp_ms[lane] : empty;
		for (int off = 16; off > 0; off >>= 1) {
			struct ms b;

			b.m = __shfl_down_sync(0xffffffffu, a.m, off);
			b.s = __shfl_down_sync(0xffffffffu, a.s, off);
			a = ms_combine(a, b);
		}
		if (lane == 0)
			row_ms = a;
	}
	__syncthreads();
	a = row_ms;
	float inv = 1.0f / a.s;

	if (vec) {
		for (int c = threadIdx.x; c < cols / 4; c += blockDim.x) {
			float4 v = reinterpret_cast<const float4 *>(row)[c];

			v.x = __expf(v.x - a.m) * inv;
			v.y = __expf(v.y - a.m) * inv;
			v.z = __expf(v.z - a.m) * inv;
			v.w = __expf(v.w - a.m) * inv;
			reinterpret_cast<float4 *>(orow)[c] = v;
		}
	} else {
		for (int c = threadIdx.x; c < cols; c += blockDim.x)
			orow[c] = __expf(row[c] - a.m) * inv;
	}
}
