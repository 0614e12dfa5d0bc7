import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def partial_stats_kernel(x_ptr, sum_ptr, sq_ptr, N, CHUNK, n_chunks, BLOCK: tl.constexpr):
    # A row of N values is 16 rows' worth of work for 132 SMs: split it in
    # chunks, each program sums x and x^2 over its chunk.
    row = tl.program_id(0).to(tl.int64)
    chunk = tl.program_id(1)
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK,), tl.float32)
    acc2 = tl.zeros((BLOCK,), tl.float32)
    lo = chunk * CHUNK
    for start in range(0, CHUNK, BLOCK):
        cols = lo + start + offs
        x = tl.load(x_ptr + row * N + cols, mask=cols < N, other=0.0)
        acc += x
        acc2 += x * x
    tl.store(sum_ptr + row * n_chunks + chunk, tl.sum(acc, axis=0))
    tl.store(sq_ptr + row * n_chunks + chunk, tl.sum(acc2, axis=0))


@triton.jit
def normalize_kernel(x_ptr, w_ptr, b_ptr, y_ptr, sum_ptr, sq_ptr, N, n_chunks, eps,
                     BLOCK: tl.constexpr, CHUNKS_P2: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < N
    c = tl.arange(0, CHUNKS_P2)
    total = tl.sum(tl.load(sum_ptr + row * n_chunks + c, mask=c < n_chunks, other=0.0), axis=0)
    total2 = tl.sum(tl.load(sq_ptr + row * n_chunks + c, mask=c < n_chunks, other=0.0), axis=0)
    mean = total / N
    var = tl.maximum(total2 / N - mean * mean, 0.0)
    rstd = 1.0 / tl.sqrt(var + eps)
    x = tl.load(x_ptr + row * N + cols, mask=mask, other=0.0)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0)
    b = tl.load(b_ptr + cols, mask=mask, other=0.0)
    tl.store(y_ptr + row * N + cols, (x - mean) * rstd * w + b, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, normalized_shape: tuple):
        super(ModelNew, self).__init__()
        self.ln = nn.LayerNorm(normalized_shape=normalized_shape)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        N = self.ln.weight.numel()
        rows = x.numel() // N
        CHUNK, BLOCK = 65536, 2048
        n_chunks = triton.cdiv(N, CHUNK)
        sums = torch.empty((rows, n_chunks), device=x.device, dtype=torch.float32)
        sqs = torch.empty_like(sums)
        partial_stats_kernel[(rows, n_chunks)](x, sums, sqs, N, CHUNK, n_chunks, BLOCK=BLOCK, num_warps=8)
        y = torch.empty_like(x)
        normalize_kernel[(rows, triton.cdiv(N, BLOCK))](
            x, self.ln.weight, self.ln.bias, y, sums, sqs, N, n_chunks, self.ln.eps,
            BLOCK=BLOCK, CHUNKS_P2=triton.next_power_of_2(n_chunks), num_warps=8)
        return y
