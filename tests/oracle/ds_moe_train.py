"""DeepSpeed's MoE layer under DeepSpeed's engine, as microsoft's Megatron-DeepSpeed runs it: the
oracle of --create-moe-param-group (GL116) and of ZeRO-3 with experts (GL115).

``torchrun ... ds_moe_train.py --case NAME CONFIG GROUPS ... --ep-size N --num-experts N
--result out.json``: for each case, in order and in one process group (one start-up for all),
a tiny model whose middle layer is ``deepspeed.moe.layer.MoE`` (each expert a small MLP) is
given to ``deepspeed.initialize`` with the generated ds_config.json CONFIG and an optimizer whose
param groups are built as the fork builds them (megatron/optimizer/__init__.py:
get_param_groups' weight-decay groups, then, with --create-moe-param-group (GROUPS "moe"),
DeepSpeed's split_params_into_different_moe_groups_for_optimizer; GROUPS "plain" leaves them
as they are). A case that starts takes one optimizer step; one that DeepSpeed refuses records
the error. Rank 0 writes {case: {"ok": bool, "error": str | None, "zero_stage", "global_steps",
"experts_moved"}} to --result.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ds_train import skip_shm_op_build  # (torchrun runs this file as a script, beside ds_train.py)

HIDDEN = 16


def build_model(num_experts: int, ep_size: int):
    import torch
    from deepspeed.moe.layer import MoE

    class TinyMoE(torch.nn.Module):
        """Linear -> DeepSpeed MoE (top-1, experts: Linear-ReLU-Linear) -> Linear."""

        def __init__(self) -> None:
            super().__init__()
            self.embed = torch.nn.Linear(HIDDEN, HIDDEN)
            expert = torch.nn.Sequential(torch.nn.Linear(HIDDEN, 2 * HIDDEN), torch.nn.ReLU(),
                                         torch.nn.Linear(2 * HIDDEN, HIDDEN))
            self.moe = MoE(hidden_size=HIDDEN, expert=expert, num_experts=num_experts, ep_size=ep_size,
                           k=1, min_capacity=4, drop_tokens=False)
            self.norm = torch.nn.LayerNorm(HIDDEN)
            self.head = torch.nn.Linear(HIDDEN, 1)

        def forward(self, x):
            hidden, aux_loss, _ = self.moe(self.embed(x))
            return self.head(self.norm(hidden)).float().pow(2).mean() + 0.01 * aux_loss.float()

    return TinyMoE()


def param_groups(model, moe_groups: bool) -> list[dict]:
    """The fork's groups: weight decay on weights, none on biases and norms (its
    get_param_groups), split into MoE groups with --create-moe-param-group."""
    decay, no_decay = [], []
    for name, param in model.named_parameters():
        (no_decay if name.endswith(".bias") or param.dim() == 1 else decay).append(param)
    groups = [{"name": "wd_no_scale_lr", "params": decay, "wd_mult": 1.0, "lr_mult": 1.0},
              {"name": "no_wd_no_scale_lr", "params": no_decay, "wd_mult": 0.0, "lr_mult": 1.0}]
    if moe_groups:
        from deepspeed.moe.utils import split_params_into_different_moe_groups_for_optimizer

        groups = split_params_into_different_moe_groups_for_optimizer(groups)
    return groups


def run_case(config: str, moe_groups: bool, num_experts: int, ep_size: int) -> dict:
    import deepspeed
    import torch

    torch.manual_seed(0)
    model = build_model(num_experts, ep_size)
    optimizer = torch.optim.Adam(param_groups(model, moe_groups), lr=1e-3)  # the fork's Adam on CPU
    try:
        engine, _, _, _ = deepspeed.initialize(model=model, optimizer=optimizer, config=config)
    except AssertionError as exc:
        return {"ok": False, "error": str(exc)}
    dtype = next(engine.module.parameters()).dtype
    experts = [p for n, p in engine.module.named_parameters() if "experts" in n]
    before = [p.detach().float().clone() for p in experts]
    for _ in range(engine.gradient_accumulation_steps()):
        x = torch.randn(engine.train_micro_batch_size_per_gpu(), 8, HIDDEN, dtype=dtype)
        engine.backward(engine(x))
        engine.step()
    moved = any(not torch.equal(b, p.detach().float()) for b, p in zip(before, experts, strict=True))
    return {"ok": True, "error": None, "zero_stage": engine.zero_optimization_stage(),
            "global_steps": engine.global_steps, "experts_moved": moved}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--case", nargs=3, action="append", metavar=("NAME", "CONFIG", "GROUPS"),
                        required=True)
    parser.add_argument("--num-experts", type=int, required=True)
    parser.add_argument("--ep-size", type=int, required=True)
    parser.add_argument("--result")
    args = parser.parse_args()

    import deepspeed
    import torch

    skip_shm_op_build()
    deepspeed.init_distributed(dist_backend="gloo")
    results = {name: run_case(config, groups == "moe", args.num_experts, args.ep_size)
               for name, config, groups in args.case}
    if torch.distributed.get_rank() == 0:
        print("gen-launch-result: " + json.dumps(results, sort_keys=True), flush=True)
        if args.result:
            Path(args.result).write_text(json.dumps(results), encoding="utf-8")
    torch.distributed.barrier()
    torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
