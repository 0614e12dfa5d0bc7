// vector_add, does not compile: a float is assigned to a float4.
extern "C" __global__ void
vector_add_vec4(const float *x, const float *y, float *out, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n / 4) {
		float4 a = x[i];
		float4 b = reinterpret_cast<const float4 *>(y)[i];

		reinterpret_cast<float4 *>(out)[i] = make_float4(a.x + b.x, a.y + b.y,
		    a.z + b.z, a.w + b.w);
	}
}
