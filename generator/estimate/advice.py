"""Advice on the token batch and the learning rate from published scaling laws. Labelled as
advice with the law, its units and its fit range; it never changes the plan."""

from __future__ import annotations

from generator.values import value


@value
class Advice:
    """A batch-size / learning-rate suggestion from a published scaling law."""

    law: str
    batch_tokens: float | None
    lr: float | None
    note: str


def deepseek_llm(num_layers: int, hidden_size: int, seq_length: int, train_tokens: int) -> Advice:
    """DeepSeek LLM (arXiv 2401.02954 §3.1): B_opt = 0.2920·C^0.3271 tokens and
    η_opt = 0.3118·C^−0.1250, with C = M·D FLOPs, M = 72·l·d² + 12·l·d·s non-embedding FLOPs per
    token; fitted on 1e17-2e19 FLOPs."""
    m = 72 * num_layers * hidden_size**2 + 12 * num_layers * hidden_size * seq_length
    compute = m * train_tokens
    return Advice("DeepSeek LLM (B_opt, η_opt of the compute budget)", 0.2920 * compute**0.3271,
                  0.3118 * compute**-0.1250,
                  f"C = M·D = {compute:.2e} FLOPs; fitted on 1e17-2e19 FLOPs, so an extrapolation "
                  "beyond that; their schedule and optimizer (AdamW, multi-step LR)")


def kaplan_critical_batch(target_loss_nats: float) -> Advice:
    """Kaplan et al. 2020: B_crit(L) = 2·10⁸ / L^(1/0.21) tokens, L the loss in nats."""
    return Advice("Kaplan et al. 2020 (critical batch)", 2e8 / target_loss_nats ** (1 / 0.21), None,
                  f"at a target loss of {target_loss_nats} nats; training near B_crit balances "
                  "steps and compute")
