"""What megatron-core keeps for the backward pass, measured: a small GPTModel of the installed
megatron-core (its local, non-Transformer-Engine layers), run forward on the CPU in bf16 under
``torch.autograd.graph.saved_tensors_hooks``; the bytes of every distinct storage saved for the
backward, parameters excepted, of a 3-layer model less those of a 2-layer one, per token: one
layer's activations.

    python activations.py < cases.json > results.json

Each case is a dict of TransformerConfig fields over a base (h 256, 8 heads, FFN 1024, no
dropout, no biases, bf16) plus ``s`` and ``b`` (sequence and micro batch); the result, on the
last line after MARK, ``[{"bytes_per_token": N}, ...]`` in the cases' order.

Stand-ins where megatron-core 0.16.1 reaches for a GPU on the CPU (none changes what is saved):
the current device is the CPU; CUDA streams and events are no-ops (the all-to-all dispatcher's
device-to-host copies); the model-parallel RNG tracker's fork is a no-op (dropout is off); and
the router's Transformer Engine GEMM, which that release names without importing when TE is
absent, is marked absent so the router takes its torch.mm path.
"""

from __future__ import annotations

import contextlib
import json
import sys
import tempfile

import torch

MARK = "gen-launch-activations:"


class _Stream:
    def wait_stream(self, *_: object) -> None: ...

    def synchronize(self) -> None: ...

    def record_event(self, *_: object) -> _Stream:
        return self


def _stand_ins() -> None:
    stream = _Stream()
    torch.cuda.current_device = lambda: "cpu"
    torch.cuda.Stream = lambda *a, **k: stream
    torch.cuda.current_stream = lambda *a, **k: stream
    torch.cuda.stream = lambda *a, **k: contextlib.nullcontext()
    import megatron.core.tensor_parallel.random as rng
    import megatron.core.transformer.moe.moe_utils as moe_utils

    rng.CudaRNGStatesTracker.fork = lambda self, *a, **k: contextlib.nullcontext()
    moe_utils.te_general_gemm = None


def _init() -> None:
    from megatron.core import parallel_state

    torch.distributed.init_process_group("gloo", init_method=f"file://{tempfile.mktemp()}", rank=0,
                                         world_size=1)
    parallel_state.initialize_model_parallel(1, 1)


def _saved_bytes(layers: int, case: dict) -> int:
    from megatron.core.models.gpt import GPTModel
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.transformer.transformer_config import TransformerConfig

    s, b, vocab = case.get("s", 128), case.get("b", 2), 512
    fields = {k: v for k, v in case.items() if k not in ("s", "b")}
    config = TransformerConfig(**{
        "num_layers": layers, "hidden_size": 256, "num_attention_heads": 8, "ffn_hidden_size": 1024,
        "attention_dropout": 0.0, "hidden_dropout": 0.0, "add_bias_linear": False,
        "use_cpu_initialization": True, "bf16": True, "params_dtype": torch.bfloat16,
        "gradient_accumulation_fusion": False, "bias_dropout_fusion": False, "masked_softmax_fusion": False,
        "apply_rope_fusion": False, "bias_activation_fusion": False, **fields})
    spec = get_gpt_layer_local_spec(num_experts=config.num_moe_experts, moe_grouped_gemm=False)
    torch.manual_seed(0)
    model = GPTModel(config=config, transformer_layer_spec=spec, vocab_size=vocab, max_sequence_length=s,
                     position_embedding_type="rope").bfloat16()
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    saved: dict[int, int] = {}

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in params:
            saved[storage.data_ptr()] = storage.nbytes()
        return tensor

    tokens = torch.randint(0, vocab, (b, s))
    positions = torch.arange(s).unsqueeze(0).expand(b, s)
    mask = torch.tril(torch.ones(1, 1, s, s)) < 0.5
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        model(tokens, positions, mask, labels=tokens)
    return sum(saved.values())


def main() -> None:
    cases = json.load(sys.stdin)
    _stand_ins()
    with contextlib.redirect_stdout(sys.stderr):
        _init()
        results = [{"bytes_per_token": (_saved_bytes(3, c) - _saved_bytes(2, c)) / (c.get("s", 128) * c.get("b", 2))}
                   for c in cases]
    print(MARK + json.dumps(results))


if __name__ == "__main__":
    main()
