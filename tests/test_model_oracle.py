"""Oracle: the model a preset (or a sample) names is the model Megatron-LM builds from the
generated arguments. Megatron-LM's own parse_args / validate_args / TransformerConfig / GPTModel
(shared/oracles: core_v0.16.1 and main), built on the meta device, give the parameter count and
the architecture switches; both must be the preset's (the published model), and the count must
be the estimate's. The Megatron-DeepSpeed forks' parsers give their switches for the presets they
can express; the presets they cannot express are refused by name."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from generator import presets
from generator.artifacts import spec_files
from generator.calculator.resolve import PlanError, resolve
from generator.estimate.params import Shape, count_params
from generator.run import load_spec

from .conftest import SAMPLES
from .helpers import spec_dict
from .oracle.workers import ask
from .test_framework_parsers import cases_of, run_parsers

pytestmark = pytest.mark.oracle
BUILD_TREES = ("megatron-lm-core_v0.16.1", "megatron-lm-main-d98e8a64dd")
SHAPE_FIELDS = ("num_layers", "hidden_size", "num_attention_heads", "vocab_size", "seq_length")
# presets no Megatron-LM release can build, and the field that says why
NOT_MEGATRON_LM = {"bloom-176b": "position_embedding", "gpt-neox-20b": "parallel_residual"}
# presets a release cannot express (refused by name: test_a_preset_a_release_cannot_build_names_the_first_that_can)
NEWER_THAN = {"gpt-oss-20b": ("core_v0.16",), "gpt-oss-120b": ("core_v0.16",)}


def preset_spec(name: str, framework: str = "megatron-lm", fork: str | None = None,
                version: str = "latest") -> dict:
    """A one-node run of the preset: tp as large as its heads and groups allow (the vocabulary
    padding depends on it), experts over ep 4 (the alltoall dispatcher) at expert tp 1."""
    shape = presets.models()[name]
    groups = shape.get("num_query_groups", shape["num_attention_heads"])
    tp = next(t for t in (8, 4, 2, 1) if groups % t == 0 and shape["num_attention_heads"] % t == 0)
    parallelism = {"tp": tp, "pp": 1}
    if shape.get("num_experts"):
        parallelism = {"tp": 2, "pp": 1, "ep": 4, "etp": 1}  # (biased experts need expert tp 1: GL233)
    if framework == "megatron-deepspeed":
        parallelism["zero_stage"] = 1
    return spec_dict(name=name, framework=framework,
                     cluster={"nodes": 1, "gpus_per_node": 8, "gpu": "h100-80gb", "allow_oversize": True},
                     model={"preset": name, **{k: None for k in SHAPE_FIELDS}}, parallelism=parallelism,
                     megatron={"fork": fork} if fork else {"version": version})


def build_cases(spec, label: str, tree: str) -> list[dict]:
    files, _, _ = spec_files(spec)
    out = []
    for case in cases_of(files, label):
        plan = resolve(spec) if spec.stage is None else None
        case.update(tree=tree, vocab_size=spec.model.vocab_size, spec=spec, plan=plan,
                    label=label if case["label"].endswith(":megatron_args.sh") else case["label"])
        out.append(case)
    return out


def run_builds(trees, cases: list[dict]) -> list[dict]:
    """Each case's model built by its tree (one session worker per tree)."""
    results: dict[int, dict] = {}
    for tree in sorted({c["tree"] for c in cases}):
        batch = [(k, c) for k, c in enumerate(cases) if c["tree"] == tree]
        payload = [{k: c[k] for k in ("argv", "world_size", "vocab_size", "capability", "env")} for _, c in batch]
        got = ask(trees[tree], "build", payload)
        results.update({k: r for (k, _), r in zip(batch, got, strict=True)})
    return [results[k] for k in range(len(cases))]


def expected(plan) -> dict[str, dict]:
    """What Megatron-LM must have built for the plan's model: config fields and arguments."""
    m, experts = plan.model, bool(plan.model.num_experts)
    config = {
        "num_layers": m.num_layers, "hidden_size": m.hidden_size, "num_attention_heads": m.num_attention_heads,
        "num_query_groups": m.num_query_groups, "kv_channels": m.kv_channels, "ffn_hidden_size": m.ffn_hidden_size,
        "add_bias_linear": m.linear_bias, "add_qkv_bias": m.qkv_bias,
        "gated_linear_unit": m.activation in ("swiglu", "quick_geglu"),
        "normalization": "RMSNorm" if m.normalization == "rmsnorm" else "LayerNorm",
        "layernorm_epsilon": m.norm_epsilon, "attention_dropout": m.attention_dropout,
        "hidden_dropout": m.hidden_dropout, "init_method_std": m.init_method_std, "qk_layernorm": m.qk_layernorm,
        "num_moe_experts": m.num_experts,
    }
    if m.multi_latent_attention:
        config.update(multi_latent_attention=True, q_lora_rank=m.q_lora_rank, kv_lora_rank=m.kv_lora_rank,
                      qk_head_dim=m.qk_head_dim, qk_pos_emb_head_dim=m.qk_pos_emb_head_dim, v_head_dim=m.v_head_dim)
        s = m.rope_scaling
        config["rope_type"] = "yarn" if s is not None and s.type == "yarn" else "rope"
        if s is not None:  # MLA's YaRN: factor and scales from the arguments, the bounds its own
            config.update(rotary_scaling_factor=s.factor, mscale=s.mscale, mscale_all_dim=s.mscale_all_dim,
                          original_max_position_embeddings=s.original_max_position_embeddings,
                          beta_fast=s.beta_fast, beta_slow=s.beta_slow)
    elif m.rope_scaling is not None and m.rope_scaling.type == "yarn":
        s = m.rope_scaling
        config.update(yarn_rotary_scaling_factor=s.factor, yarn_original_max_position_embeddings=s.original_max_position_embeddings,
                      yarn_beta_fast=s.beta_fast, yarn_beta_slow=s.beta_slow, yarn_mscale=s.mscale,
                      yarn_mscale_all_dim=s.mscale_all_dim, yarn_correction_range_round_to_int=s.truncate)
    if m.mtp_num_layers:
        config.update(mtp_num_layers=m.mtp_num_layers, mtp_loss_scaling_factor=m.mtp_loss_scaling_factor)
    if m.softmax_type != "vanilla" or m.window_size is not None:
        config.update(softmax_type=m.softmax_type, window_size=list(m.window_size) if m.window_size else None,
                      window_attn_skip_freq=m.window_attn_skip_freq)
    if m.activation == "quick_geglu":
        config.update(glu_linear_offset=m.glu_linear_offset, activation_func_clamp_value=m.activation_clamp)
    if experts:
        config.update(moe_router_score_function=m.moe_router_score_function,
                      moe_router_pre_softmax=m.moe_router_pre_softmax,
                      moe_router_enable_expert_bias=m.moe_router_expert_bias,
                      moe_router_num_groups=m.moe_router_num_groups, moe_router_group_topk=m.moe_router_group_topk,
                      moe_router_topk_scaling_factor=m.moe_router_topk_scaling_factor,
                      moe_router_dtype=m.moe_router_dtype)
        if m.moe_router_expert_bias:
            config["moe_router_bias_update_rate"] = m.moe_router_bias_update_rate
        dense = m.moe_dense_layers
        config.update(
            moe_router_topk=m.moe_top_k, moe_router_load_balancing_type=m.moe_load_balancing,
            moe_aux_loss_coeff=m.moe_aux_loss_coeff, moe_z_loss_coeff=m.moe_z_loss_coeff,
            moe_expert_capacity_factor=m.moe_capacity_factor,
            moe_token_dispatcher_type=m.token_dispatcher(plan.ep),
            moe_grouped_gemm=m.moe_grouped_gemm, moe_ffn_hidden_size=m.moe_ffn_hidden_size or m.ffn_hidden_size,
            moe_shared_expert_intermediate_size=m.moe_shared_expert_intermediate_size,
            moe_layer_freq=[0] * dense + [1] * (m.num_layers - dense) if dense else 1)
    rope = m.position_embedding == "rope"
    yarn_positions = rope and not m.multi_latent_attention and m.rope_scaling is not None \
        and m.rope_scaling.type == "yarn"
    args = {"position_embedding_type": "yarn" if yarn_positions else m.position_embedding, "untie_embeddings_and_output_weights": not m.tie_embeddings,
            "max_position_embeddings": m.max_position_embeddings,
            "make_vocab_size_divisible_by": m.make_vocab_size_divisible_by,
            # the step-time estimate counts the gradient reduce (and param gather) as overlapped
            "overlap_grad_reduce": plan.overlap_grad_reduce,
            "overlap_param_gather": plan.overlap_grad_reduce and plan.spec.parallelism.distributed_optimizer}
    if rope:
        llama3 = m.rope_scaling is not None and m.rope_scaling.type == "llama3"
        args.update(rotary_base=m.rotary_base, rotary_percent=m.rotary_percent, use_rope_scaling=llama3)
        if llama3:
            args["rope_scaling_factor"] = m.rope_scaling.factor
    return {"config": config, "args": args}


def _single(value):
    return value[0] if isinstance(value, list) and len(value) == 1 else value


def mismatches(case: dict, result: dict) -> list[str]:
    """How the model Megatron built differs from the plan's (its architecture and its count)."""
    label = case["label"]
    if not result["ok"]:
        return [f"{label}: {result['error']}"]
    plan = case["plan"] or resolve(case["spec"])
    out = []
    for kind, fields in expected(plan).items():
        for name, want in fields.items():
            got = result[kind].get(name)
            if name != "moe_layer_freq":
                got = _single(got)
            if got != want and not (isinstance(want, float) and isinstance(got, float) and abs(got - want) < 1e-12):
                out.append(f"{label}: {name} is {got!r} in the model Megatron builds, the plan has {want!r}")
    estimate = plan.estimate().params
    if result["params"] != estimate:
        out.append(f"{label}: Megatron builds {result['params']:,} parameters, the estimate counts {estimate:,}")
    counted = count_params(Shape.of(plan.model, plan.padded_vocab_size, plan.dialect))
    if result["mtp_params"] != counted.mtp * counted.mtp_layers:
        out.append(f"{label}: Megatron's MTP block has {result['mtp_params']:,} parameters, the estimate counts "
                   f"{counted.mtp * counted.mtp_layers:,}")
    if result["padded_vocab_size"] != plan.padded_vocab_size:
        out.append(f"{label}: padded vocabulary {result['padded_vocab_size']} ≠ {plan.padded_vocab_size}")
    m = plan.model
    if m.num_experts and result["moe_layers"] != m.num_layers - m.moe_dense_layers:
        out.append(f"{label}: {result['moe_layers']} MoE layers built, the model has "
                   f"{m.num_layers - m.moe_dense_layers}")
    if m.preset:
        published = presets.models()[m.preset]["published"]
        unpadded = count_params(Shape.of(m, None, plan.dialect)).main
        # the main model as released: without the padding rows, the MTP layers and what Megatron
        # builds beyond the checkpoint (main's fused query norm of MLA without a query latent)
        built = result["params"] - result["mtp_params"] - (plan.padded_vocab_size - m.vocab_size) * \
            m.hidden_size * (1 if m.tie_embeddings else 2)
        built_more = unpadded - count_params(Shape.of(m)).main
        released = built - built_more
        near = abs(released - published["params"]) <= published.get("tolerance", 0.005) * published["params"]
        if built != unpadded or not near or (published.get("exact", True) and released != published["params"]):
            out.append(f"{label}: built {built:,} parameters without the padding; {m.preset} has "
                       f"{published['params']:,} ({published['source']})")
    return out


@pytest.fixture(scope="module")
def preset_builds(trees, tmp_path_factory):
    """Every preset Megatron-LM can build, rendered for core_v0.16 and latest, built by each."""
    base = tmp_path_factory.mktemp("presets")
    cases = []
    for name in presets.models():
        if name in NOT_MEGATRON_LM:
            continue
        for version, tree in zip(("core_v0.16", "latest"), BUILD_TREES, strict=True):
            if version in NEWER_THAN.get(name, ()):
                continue
            path = base / f"{name}-{version}.yaml"
            path.write_text(yaml.safe_dump(preset_spec(name, version=version)))
            cases += build_cases(load_spec(path), f"{name} ({version})", tree)
    return cases, run_builds(trees, cases)


def test_every_preset_builds_the_published_model(preset_builds) -> None:
    cases, results = preset_builds
    assert len(cases) == 2 * (len(presets.models()) - len(NOT_MEGATRON_LM)) - sum(map(len, NEWER_THAN.values()))
    failures = [line for case, result in zip(cases, results, strict=True) for line in mismatches(case, result)]
    assert not failures, "\n".join(failures)
    by_label = {c["label"]: r for c, r in zip(cases, results, strict=True)}
    # what the issue saw built before: biases, dropout 0.1, θ 10000, no scaling, no balancing
    llama = by_label["llama3.1-405b (latest)"]
    assert llama["config"]["add_bias_linear"] is False and llama["config"]["hidden_dropout"] == 0.0
    assert llama["args"]["rotary_base"] == 500000 and llama["args"]["use_rope_scaling"] is True
    assert llama["params"] == 405_853_388_800 + (129024 - 128256) * 16384 * 2
    mixtral = by_label["mixtral-8x7b (latest)"]
    assert _single(mixtral["config"]["moe_aux_loss_coeff"]) == 0.02
    assert mixtral["config"]["moe_token_dispatcher_type"] == "alltoall" and mixtral["moe_layers"] == 32
    assert by_label["qwen2.5-7b (core_v0.16)"]["config"]["add_qkv_bias"] is True


def test_a_hand_changed_flag_makes_the_check_fail(preset_builds, trees) -> None:
    """The oracle can fail: without --disable-bias-linear Megatron builds biases, and the check
    names the switch and the count; a changed --rotary-base is named too."""
    cases, _ = preset_builds
    case = next(c for c in cases if c["label"] == "llama3-8b (latest)")
    changed = [dict(case, argv=[w for w in case["argv"] if w != "--disable-bias-linear"]),
               dict(case, argv=[("10000" if w == "500000" else w) for w in case["argv"]])]
    no_bias, theta = (mismatches(c, r) for c, r in zip(changed, run_builds(trees, changed), strict=True))
    assert any("add_bias_linear is True" in line for line in no_bias), no_bias
    assert any("Megatron builds" in line and "parameters" in line for line in no_bias), no_bias
    assert any("rotary_base is 10000" in line for line in theta), theta


MEGATRON_LM_SAMPLES = [s for s in SAMPLES if load_spec(s).framework == "megatron-lm"
                       and presets.gpus()[load_spec(s).cluster.gpu].get("vendor") != "huawei"]


def test_every_megatron_lm_sample_builds_the_model_its_plan_estimates(trees, tmp_path: Path) -> None:
    from generator.run import stage_specs

    cases = []
    for sample in MEGATRON_LM_SAMPLES:
        spec = load_spec(sample)
        if spec.doc.data.get("sweep"):
            continue
        for one in stage_specs(spec) or [spec]:
            cases += build_cases(one, f"{sample.stem}{':' + one.stage if one.stage else ''}",
                                 BUILD_TREES[1] if one.megatron.version == "latest" else BUILD_TREES[0])
    assert len(cases) >= 4
    failures = [line for case, result in zip(cases, run_builds(trees, cases), strict=True)
                for line in mismatches(case, result)]
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize(("name", "field", "dialect"), [
    ("bloom-176b", "position_embedding", "Megatron-LM"), ("gpt-neox-20b", "parallel_residual", "Megatron-LM"),
    ("qwen2.5-7b", "qkv_bias", "Megatron-DeepSpeed (microsoft)"),
    ("llama3.1-8b", "rope_scaling", "Megatron-DeepSpeed (microsoft)"),
    ("llama3-8b", "linear_bias", "Megatron-DeepSpeed (bigscience"),
    ("mixtral-8x7b", "num_experts", "Megatron-DeepSpeed (bigscience")])
def test_a_preset_a_dialect_cannot_build_is_refused_by_name(name, field, dialect, tmp_path: Path) -> None:
    framework = "megatron-lm" if dialect == "Megatron-LM" else "megatron-deepspeed"
    fork = None if framework == "megatron-lm" else ("microsoft" if "microsoft" in dialect else "bigscience")
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(preset_spec(name, framework, fork)))
    with pytest.raises(PlanError) as err:
        resolve(load_spec(path))
    assert field in str(err.value) and dialect.lower() in str(err.value).lower(), str(err.value)


# (preset, fork, {the fork's argument dest: value}) for the presets each fork can express
FORK_CASES = [
    ("llama2-7b", "microsoft", {"add_bias_linear": False, "rope_theta": 10000, "layernorm_epsilon": 1e-5,
                                "attention_dropout": 0.0, "hidden_dropout": 0.0, "init_method_std": 0.02}),
    ("llama3-70b", "microsoft", {"add_bias_linear": False, "rope_theta": 500000, "num_key_value_heads": 8}),
    ("mixtral-8x7b", "microsoft", {"add_bias_linear": False, "rope_theta": 1000000, "num_experts": [8], "topk": 2,
                                   "expert_interval": 1, "moe_loss_coeff": 0.02, "moe_token_dropping": False}),
    ("bloom-176b", "bigscience", {"embed_layernorm": True, "layernorm_epsilon": 1e-5, "attention_dropout": 0.0,
                                  "hidden_dropout": 0.0, "init_method_std": 0.0048,
                                  "position_embedding_type": "PositionEmbeddingType.alibi"}),
    ("gpt3-175b", "bigscience", {"init_method_std": 0.006, "attention_dropout": 0.1,
                                 "position_embedding_type": "PositionEmbeddingType.absolute"}),
]


def test_the_forks_parsers_take_the_presets_they_can_express(trees, tmp_path: Path) -> None:
    """Each fork's parser takes the preset with its switches, and the fork's own GPTModel, built
    whole from those arguments, has the estimate's parameters: the release's plus the padding."""
    cases = []
    for k, (name, fork, _) in enumerate(FORK_CASES):
        path = tmp_path / f"f{k}.yaml"
        path.write_text(yaml.safe_dump(preset_spec(name, "megatron-deepspeed", fork)))
        (case,) = cases_of(spec_files(load_spec(path))[0], f"{name} ({fork})")
        case["show"] = sorted(FORK_CASES[k][2])
        cases.append(case)
    failures = []
    for case, result, (_, _, want) in zip(cases, run_parsers(trees, cases), FORK_CASES, strict=True):
        if not result["ok"]:
            failures.append(f"{case['label']}: {result['error']}")
            continue
        for dest, value in want.items():
            if result["shown"].get(dest) != value:
                failures.append(f"{case['label']}: args.{dest} = {result['shown'].get(dest)!r}, want {value!r}")
    for case in cases:
        plan = resolve(load_spec(tmp_path / f"f{cases.index(case)}.yaml"))
        case.update(vocab_size=plan.model.vocab_size, plan=plan)
    for case, result in zip(cases, run_builds(trees, cases), strict=True):
        plan, m = case["plan"], case["plan"].model
        if not result["ok"]:
            failures.append(f"{case['label']}: {result['error']}")
            continue
        published = presets.models()[m.preset]["published"]
        padding = (result["padded_vocab_size"] - m.vocab_size) * m.hidden_size * (1 if m.tie_embeddings else 2)
        if result["params"] != plan.estimate().params or result["padded_vocab_size"] != plan.padded_vocab_size:
            failures.append(f"{case['label']}: the fork builds {result['params']:,} parameters (vocabulary "
                            f"{result['padded_vocab_size']}), the estimate counts {plan.estimate().params:,}")
        if published.get("exact", True) and result["params"] - padding != published["params"]:
            failures.append(f"{case['label']}: {result['params'] - padding:,} without the padding, "
                            f"{m.preset} has {published['params']:,}")
    assert not failures, "\n".join(failures)


def test_every_moe_field_reaches_the_model_megatron_builds(trees, tmp_path: Path) -> None:
    """A DeepSeek-style MoE (dense first layers, shared experts, small experts, capacity with
    padding, z-loss, sequence-level balancing) and a biased GPT-style one: each field is in the
    built model, and the built count is the estimate's (dense layers, shared experts, expert
    biases counted)."""
    models = [
        {"num_layers": 6, "hidden_size": 512, "num_attention_heads": 8, "num_query_groups": 2, "vocab_size": 32000,
         "seq_length": 1024, "activation": "swiglu", "normalization": "rmsnorm", "position_embedding": "rope",
         "tie_embeddings": False, "linear_bias": False, "num_experts": 8, "moe_top_k": 2,
         "moe_ffn_hidden_size": 256, "moe_shared_expert_intermediate_size": 512, "moe_dense_layers": 2,
         "moe_load_balancing": "seq_aux_loss", "moe_aux_loss_coeff": 0.001, "moe_z_loss_coeff": 0.001,
         "moe_capacity_factor": 1.25, "moe_token_drop_policy": "position", "moe_pad_to_capacity": True,
         "moe_token_dispatcher": "alltoall", "rotary_base": 20000, "qk_layernorm": True, "kv_channels": 96,
         "attention_dropout": 0.0, "hidden_dropout": 0.0, "init_method_std": 0.008, "norm_epsilon": 1.0e-6},
        {"num_layers": 4, "hidden_size": 512, "num_attention_heads": 8, "vocab_size": 50257, "seq_length": 1024,
         "num_experts": 4, "moe_top_k": 1, "moe_aux_loss_coeff": 0.01, "make_vocab_size_divisible_by": 64},
    ]
    cases = []
    for k, model in enumerate(models):
        data = spec_dict(name=f"moe{k}", model=model, parallelism={"tp": 2, "pp": 1, "ep": 2, "etp": 1},
                         cluster={"nodes": 1, "gpus_per_node": 8, "gpu": "h100-80gb"})
        path = tmp_path / f"moe{k}.yaml"
        path.write_text(yaml.safe_dump(data))
        cases += build_cases(load_spec(path), f"moe{k}", BUILD_TREES[1])
    results = run_builds(trees, cases)
    failures = [line for case, result in zip(cases, results, strict=True) for line in mismatches(case, result)]
    assert not failures, "\n".join(failures)
    assert results[0]["config"]["moe_layer_freq"] == [0, 0, 1, 1, 1, 1] and results[0]["moe_layers"] == 4
    assert results[1]["config"]["add_bias_linear"] is True and results[1]["padded_vocab_size"] == 50304


# (layout, pp, its ranks' transformer layers, MTP layers) as gen-launch reads them
LAYOUTS = [("Et*3|(tt|)*29,m|L", 8, (9, 8, 8, 8, 8, 8, 6, 6), (0, 0, 0, 0, 0, 0, 1, 0)),  # DeepSeek-V3, vpp 4
           ("Et*7|t*8|t*8|t*8|t*8|t*8|t*8|t*6m,L", 8, (7, 8, 8, 8, 8, 8, 8, 6), (0, 0, 0, 0, 0, 0, 0, 1))]


def test_deepseek_v3_pipeline_layouts_are_megatrons(trees, tmp_path: Path) -> None:
    """DeepSeek-V3's 61 layers and its MTP layer on pp 8 (and × vpp 4) through
    --pipeline-model-parallel-layout: Megatron-LM main's parser and its own layout class
    (PipelineParallelLayerLayout, validated as TransformerConfig validates it) take what
    gen-launch writes, and give each pipeline rank the layers gen-launch's reading gives it (the
    first and last rank's are the estimate's stages); the model built is the preset's."""
    from generator.spec.pipeline_layout import PipelineLayout

    cases = []
    for k, (layout, pp, _, _) in enumerate(LAYOUTS):
        data = preset_spec("deepseek-v3")
        data["cluster"]["nodes"] = 16
        data["parallelism"] = {"tp": 2, "pp": pp, "ep": 8, "etp": 1, "pipeline_layout": layout}
        data["batch"] = {"micro_batch_size": 1, "global_batch_size": 64}  # 8 micro-batches: pp's multiple
        path = tmp_path / f"layout{k}.yaml"
        path.write_text(yaml.safe_dump(data))
        cases += build_cases(load_spec(path), f"layout {layout}", BUILD_TREES[1])
    results = run_builds(trees, cases)
    for case, result, (layout, pp, layers, mtp) in zip(cases, results, LAYOUTS, strict=True):
        assert result["ok"], result
        assert "--pipeline-model-parallel-layout" in case["argv"]
        assert "--num-virtual-stages-per-pipeline-rank" not in case["argv"]
        ours = PipelineLayout.parse(layout)
        assert tuple(result["layout_layers"]) == ours.rank_layers(pp) == layers
        assert tuple(result["layout_mtp"]) == ours.rank_layers(pp, "m") == mtp
        assert result["layout_vpp"] == ours.vpp(pp) and case["plan"].vpp == ours.vpp(pp)
        assert case["plan"].spec.parallelism.split_layers(61) == (layers[0], layers[-1])
        assert not mismatches(case, result)


@pytest.mark.parametrize(("layout", "why"), [
    ("Et*3|(tt|)*29,m|L", "not a multiple of pp 6"),  # 32 stages on pp 6
    ("Et|(tt|)*29,m|L", "places 59 transformer layers t, the model has 61"),
    ("Et*3|(tt|)*29,|L", "places 0 MTP layers m, the model has 1"),
    ("Et*3|(tt|)*28,tm|t|L", "must follow every transformer layer"),
])
def test_a_layout_megatron_refuses_is_refused_by_name(layout: str, why: str, tmp_path: Path) -> None:
    data = preset_spec("deepseek-v3")
    data["cluster"]["nodes"] = 12 if "pp 6" in why else 16
    data["parallelism"] = {"tp": 2, "pp": 6 if "pp 6" in why else 8, "ep": 8, "etp": 1, "pipeline_layout": layout}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(PlanError) as err:
        resolve(load_spec(path))
    assert "GL235" in str(err.value) and why in str(err.value), str(err.value)


def _deepseek_v3_recipe(**changes) -> dict:
    """DeepSeek-V3 as its published Megatron recipes train it, on 128 nodes: tp 2, pp 8 × vpp 4
    through a layout, ep 64, the flex dispatcher over DeepEP with the experts' all-to-all
    overlapped, module-level recompute of the expert activation, the norms and MLA's up
    projections, grouped GEMM."""
    data = preset_spec("deepseek-v3")
    data["cluster"]["nodes"] = 128
    data["model"].update(moe_grouped_gemm=True, moe_token_dispatcher="flex", moe_flex_dispatcher_backend="deepep",
                         moe_router_dtype="fp32")
    data["parallelism"] = {"tp": 2, "pp": 8, "ep": 64, "etp": 1, "sequence_parallel": True,
                           "distributed_optimizer": True, "pipeline_layout": "Et*3|(tt|)*29,m|L",
                           "ep_comm_overlap": True}
    data["batch"] = {"micro_batch_size": 1, "global_batch_size": 8192}
    data["training"].update(recompute="selective", recompute_modules=["moe_act", "layernorm", "mla_up_proj"])
    for section, values in changes.items():
        data[section].update(values)
    return data


def test_the_deepseek_v3_recipe_starts_in_megatron_main(trees, tmp_path: Path) -> None:
    """Megatron-LM main's parser, validate_args and TransformerConfig (with the run's own parallel
    sizes: the layout, EP overlap, dispatcher and recompute checks) take the arguments
    gen-launch writes for the full recipe, and the model built is the preset's; hand-edited
    into what GL236 and GL237 refuse, the same TransformerConfig refuses it too."""
    path = tmp_path / "dsv3.yaml"
    path.write_text(yaml.safe_dump(_deepseek_v3_recipe()))
    (case,) = build_cases(load_spec(path), "deepseek-v3 recipe", BUILD_TREES[1])
    for flag in ("--overlap-moe-expert-parallel-comm", "--moe-flex-dispatcher-backend", "--recompute-modules",
                 "--pipeline-model-parallel-layout", "--moe-router-dtype"):
        assert flag in case["argv"], flag
    broken = [dict(case, argv=[w for w in case["argv"] if w != "--moe-grouped-gemm"]),  # GL236's
              dict(case, argv=[w for w in case["argv"] if w != "--pipeline-model-parallel-layout"
                               and w != "Et*3|(tt|)*29,m|L"])]  # GL237's: pp 8 without virtual stages
    whole, no_gemm, no_layout = run_builds(trees, [case, *broken])
    assert whole["ok"] and whole["config_error"] is None, whole
    assert not mismatches(case, whole)
    assert "moe_act in recompute_modules is only supported with moe_grouped_gemm" in no_gemm["config_error"]
    assert not no_layout["ok"] or no_layout["config_error"], no_layout  # 61 layers on pp 8, no vpp


@pytest.mark.parametrize(("changes", "code", "why"), [
    ({"model": {"moe_grouped_gemm": False}}, "GL236", "moe_act needs the grouped GEMM"),
    ({"training": {"recompute": "full"}}, "GL236", "take effect with selective recompute"),
    ({"model": {"moe_token_dispatcher": "allgather"}}, "GL237", "the allgather dispatcher"),
    ({"model": {"mtp_num_layers": 2}, "parallelism": {"pipeline_layout": "Et*3|(tt|)*29,mm|L"}},
     "GL237", "2 MTP layers"),
])
def test_what_megatron_refuses_of_the_recipe_is_refused_by_name(changes, code, why, tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(_deepseek_v3_recipe(**changes)))
    with pytest.raises(PlanError) as err:
        resolve(load_spec(path))
    assert code in str(err.value) and why in str(err.value), str(err.value)
