"""Reference for demo_rmsnorm_h512 (plain PyTorch): a small definition for CPU demos and tests.

    y = x / sqrt(mean(x^2, last dim) + eps) * weight     (computed in fp32, output bf16)
"""

import torch


@torch.no_grad()
def run(x, weight, eps):
    xf = x.to(torch.float32)
    rms = torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + eps)
    return (xf * rms * weight.to(torch.float32)).to(torch.bfloat16)
