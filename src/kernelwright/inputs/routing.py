"""Stand-ins for captured MoE router inputs.

The contest's routing logits and bias are captures from DeepSeek-V3 serving, which we do not
have.  These synthesise logits with a skewed but plausible expert load: each expert gets a
popularity offset (a few hot experts, a long cold tail), each token its own noise, so that the
top-8 selection concentrates on some experts without collapsing onto a fixed set.
"""

from __future__ import annotations

import torch


def synth_routing_logits(
    num_tokens: int, num_experts: int, gen: torch.Generator, device: torch.device | str,
    skew: float = 0.6, noise: float = 1.5,
) -> torch.Tensor:
    """[T, E] fp32 logits = expert popularity (N(0, skew^2), heavy right tail) + N(0, noise^2)."""
    popularity = torch.randn(num_experts, device=device, generator=gen) * skew
    hot = torch.rand(num_experts, device=device, generator=gen) < 0.08
    popularity = popularity + hot.to(torch.float32) * 1.2
    per_token = torch.randn((num_tokens, num_experts), device=device, generator=gen) * noise
    return (per_token + popularity).to(torch.float32)


def synth_routing_bias(
    num_experts: int, gen: torch.Generator, device: torch.device | str, scale: float = 0.02
) -> torch.Tensor:
    """[E] bf16 no-aux correction bias: small, of the order the sigmoid scores move by."""
    return (torch.randn(num_experts, device=device, generator=gen) * scale).to(torch.bfloat16)
