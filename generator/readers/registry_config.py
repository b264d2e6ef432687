"""A config registry's Python config module (torchtitan: the file --module names) -> the model
facts of the preset it builds, read with ``ast`` only (never imported or run): the model module it
imports ``model_registry`` from (``torchtitan.models.M``) and the flavor it passes it, looked up
backward in the dialect table's models."""

from __future__ import annotations

import ast

from generator.dialects import table
from generator.rules.registry import Fact
from generator.spec.model import model_from

# the model facts a flavor fixes that the rules check on a run (layers against pipeline stages,
# heads and groups against tp, experts against ep); the sequence length is the command line's
SHAPE = ("num_layers", "hidden_size", "num_attention_heads", "num_query_groups", "num_experts", "moe_top_k")


def config_model(framework: str, text: str, file: str) -> tuple[dict[str, Fact], list[tuple[str, str]]]:
    """(the model facts, problems) of a config module."""
    try:
        tree = ast.parse(text, file)
    except (SyntaxError, ValueError) as exc:
        return {}, [(file, f"not Python that can be read ({exc}); its model is not checked")]
    module = None
    calls = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("torchtitan.models.") \
                and any(alias.name == "model_registry" for alias in node.names):
            module = node.module.split(".")[2]
        elif _flavor_call(node):
            calls.append((node.args[0].value, node.lineno, node.col_offset + 1))
    if module is None or len(calls) != 1:
        return {}, [(file, "no one model_registry(FLAVOR) of a torchtitan model found; its model is not "
                           "checked")]
    flavor, line, column = calls[0]
    facts, problems = _flavor_facts(framework, module, flavor, f"{file}:{line}:{column}")
    if facts:
        facts.update(_fp8(framework, tree, file))
    return facts, problems


def registry_model(framework: str, module: str, function: str,
                   source: str) -> tuple[dict[str, Fact], list[tuple[str, str]]]:
    """(the model facts, problems) of one of torchtitan's own config functions (``--module llama3
    --config llama3_8b``): the flavor it builds, by the table's ``functions``."""
    flavor = table(framework).get("functions", {}).get(function)
    if flavor is None:
        return {}, [(source, f"torchtitan's {module} config function {function} is not one gen-launch knows "
                             "the flavor of; its model is not checked")]
    return _flavor_facts(framework, module, flavor, source)


def registry_modules(framework: str) -> set[str]:
    """The models torchtitan names by a short ``--module`` (torchtitan.models.<name>)."""
    return {module for module, _, _ in table(framework)["models"].values()}


def _flavor_facts(framework: str, module: str, flavor: str,
                  source: str) -> tuple[dict[str, Fact], list[tuple[str, str]]]:
    models = table(framework)["models"].items()
    preset = next((name for name, (m, _, f) in models if (m, f) == (module, flavor)), None)
    if preset is None:
        return {}, [(source, f"torchtitan's {module} flavor {flavor} is no preset gen-launch knows; its "
                             "model is not checked")]
    model = model_from({"preset": preset})
    facts = {key: Fact(getattr(model, key), source) for key in SHAPE}
    facts["preset"] = Fact(preset, source)
    return facts, []


def _fp8(framework: str, tree: ast.AST, file: str) -> dict[str, Fact]:
    """precision fp8 and its recipe where the module builds one of the table's FP8 converters
    (``Float8LinearConverter.Config(recipe_name="rowwise", ...)``, or an MoE flavor's grouped
    experts' ``Float8GroupedExpertsConverter.Config(...)``)."""
    recipes = table(framework).get("fp8", {})
    names = {entry[kind][0]: (recipe, entry[kind][1]) for recipe, entry in recipes.items()
             for kind in ("linear", "experts") if kind in entry}
    for node in ast.walk(tree):
        func = node.func if isinstance(node, ast.Call) else None
        if not (isinstance(func, ast.Attribute) and func.attr == "Config" and isinstance(func.value, ast.Name)
                and func.value.id in names):
            continue
        given = {k.arg: k.value.value for k in node.keywords if isinstance(k.value, ast.Constant)}
        recipe, default = names[func.value.id]
        default = default.get("recipe_name") if isinstance(default, dict) else default
        source = f"{file}:{node.lineno}:{node.col_offset + 1}"
        out = {"precision": Fact("fp8", source)}
        if given.get("recipe_name", default) == default:
            out["fp8_recipe"] = Fact(recipe, source)
        return out
    return {}


def _flavor_call(node: ast.AST) -> bool:
    """``model_registry("FLAVOR", ...)``: a call with the flavor written as a string."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.args):
        return False
    first = node.args[0]
    return node.func.id == "model_registry" and isinstance(first, ast.Constant) \
        and isinstance(first.value, str)
