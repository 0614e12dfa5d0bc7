// scan, fast: one block of 512 threads per row, walking the row in tiles of
// 2048.  Each thread loads 4 consecutive ints (one int4 when the row is
// aligned), scans them, then the thread totals are scanned with warp
// shuffles and one more warp over the 16 warp totals; a carry moves the
// row's running sum from tile to tile.
#define NT 512
#define PER 4

__device__ __forceinline__ int
warp_inclusive(int v, int lane)
{
	for (int off = 1; off < 32; off *= 2) {
		int u = __shfl_up_sync(0xffffffffu, v, off);

		if (lane >= off)
			v += u;
	}
	return v;
}

extern "C" __global__ void __launch_bounds__(NT)
scan_rows_fast(const int *x, int *out, int rows, int cols)
{
	__shared__ int warp_tot[NT / 32];
	__shared__ int carry_in;
	const int *row = x + (long)blockIdx.x * cols;
	int *orow = out + (long)blockIdx.x * cols;
	int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
	bool vec = (cols & 3) == 0;
	int carry = 0;

	for (int base = 0; base < cols; base += NT * PER) {
		int c0 = base + threadIdx.x * PER, v[PER];

		if (vec && c0 + PER <= cols) {
			int4 q = *reinterpret_cast<const int4 *>(row + c0);

			v[0] = q.x, v[1] = q.y, v[2] = q.z, v[3] = q.w;
		} else {
			for (int i = 0; i < PER; i++)
				v[i] = c0 + i < cols ? row[c0 + i] : 0;
		}
		for (int i = 1; i < PER; i++)
			v[i] += v[i - 1];
		int t = warp_inclusive(v[PER - 1], lane);

		if (lane == 31)
			warp_tot[warp] = t;
		__syncthreads();
		if (warp == 0) {
			int w = lane < NT / 32 ? warp_tot[lane] : 0;

			w = warp_inclusive(w, lane);
			if (lane < NT / 32)
				warp_tot[lane] = w;
		}
		__syncthreads();
		int before = carry + (warp > 0 ? warp_tot[warp - 1] : 0) + t - v[PER - 1];

		if (vec && c0 + PER <= cols) {
			int4 q = make_int4(v[0] + before, v[1] + before, v[2] + before, v[3] + before);

			*reinterpret_cast<int4 *>(orow + c0) = q;
		} else {
			for (int i = 0; i < PER; i++)
				if (c0 + i < cols)
					orow[c0 + i] = v[i] + before;
		}
		if (threadIdx.x == NT - 1)
			carry_in = carry + warp_tot[NT / 32 - 1];
		__syncthreads();
		carry = carry_in;
	}
}
