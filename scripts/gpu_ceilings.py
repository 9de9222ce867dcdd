#!/usr/bin/python3
"""The GPU's two ceilings, measured in the same run as fathom's numbers:
device-to-device copy bandwidth (GB/s, read + write) and cuBLAS bf16 GEMM
throughput (TFLOP/s, 8192³ on random data), medians of CUDA-event timings."""
import json
import statistics

import torch


def timed(fn, repeat=10):
    fn()
    times = []
    for _ in range(repeat):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / 1000)
    return statistics.median(times)


src = torch.empty(2 << 30, dtype=torch.uint8, device="cuda")
dst = torch.empty_like(src)
copy_s = timed(lambda: dst.copy_(src))
n = 8192
a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
gemm_s = timed(lambda: a @ b)
print(json.dumps({"copy_gb_s": 2 * src.numel() / copy_s / 1e9, "bf16_gemm_tflop_s": 2 * n**3 / gemm_s / 1e12}))
