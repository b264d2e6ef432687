"""The static reader of argparse parsers (generator/readers/parser_source.py): small parsers
written here, DeepSpeed's own add_config_arguments, and the four real Megatron parsers of
shared/oracles held against the catalogues extracted from the live parsers."""

from __future__ import annotations

import importlib.util
import os
import tarfile
import textwrap
from pathlib import Path

import pytest

from generator.dialects import catalogue
from generator.readers.parser_source import (
    ParserSource,
    attribute_reads,
    known_delegate,
    read_parser_source,
)

ORACLES = Path(__file__).resolve().parents[2] / "shared" / "oracles"


def read(text: str) -> ParserSource:
    return read_parser_source(textwrap.dedent(text), "train.py")


HEADER = """\
import argparse
parser = argparse.ArgumentParser()
"""


def options(body: str) -> dict[str, tuple]:
    return read(HEADER + textwrap.dedent(body)).options


# one add_argument at a time


def test_store_true_is_a_switch_with_default_false():
    assert options("parser.add_argument('--fp16', action='store_true')") == {
        "--fp16": ("fp16", 0, None, None, False)}


def test_store_false_defaults_true_and_keeps_its_dest():
    assert options("parser.add_argument('--no-bias', action='store_false', dest='bias')") == {
        "--no-bias": ("bias", 0, None, None, True)}


def test_nargs_literal_and_argparse_constants():
    found = options("""\
        parser.add_argument('--pair', nargs=2, type=int)
        parser.add_argument('--paths', nargs='*')
        parser.add_argument('--some', nargs=argparse.ONE_OR_MORE)
        parser.add_argument('--maybe', nargs='?', const=1)
        """)
    assert {flag: entry[1] for flag, entry in found.items()} == {
        "--pair": 2, "--paths": "*", "--some": "+", "--maybe": "?"}


def test_choices_as_the_command_line_spells_them():
    text = HEADER + textwrap.dedent("""\
        parser.add_argument('--impl', choices=['local', 'te'])
        parser.add_argument('--stage', type=int, choices=(0, 1, 2))
        parser.add_argument('--level', type=int, choices=range(0, 3))
        parser.add_argument('--backend', choices=list(AttnBackend))
        parser.add_argument('--act', choices=ACTIVATIONS.keys())
        parser.add_argument('--odd', choices=range(0, 3, 0))
        """)
    source = read(text)
    assert {flag: entry[2] for flag, entry in source.options.items()} == {
        "--impl": ("local", "te"), "--stage": ("0", "1", "2"), "--level": ("0", "1", "2"),
        "--backend": None, "--act": None, "--odd": None}
    assert source.unknown_choices == ("--backend", "--act", "--odd")
    assert source.complete  # the option set is known; only those choices are not


def test_type_is_the_name_argparse_records():
    found = options("""\
        parser.add_argument('--layers', type=int)
        parser.add_argument('--lr', type=float)
        parser.add_argument('--name', type=str)
        parser.add_argument('--tuple', type=tuple_type)
        parser.add_argument('--dtype', type=torch.dtype)
        parser.add_argument('--kind', type=lambda x: Kind[x])
        parser.add_argument('--plain')
        """)
    assert {flag: entry[3] for flag, entry in found.items()} == {
        "--layers": "int", "--lr": "float", "--name": "str", "--tuple": "tuple_type", "--dtype": "dtype",
        "--kind": "<lambda>", "--plain": None}


def test_dest_by_argparse_rule():
    found = options("""\
        parser.add_argument('-n', '--num-layers', type=int)
        parser.add_argument('-v')
        parser.add_argument('--tp', '--tensor-model-parallel-size', type=int)
        parser.add_argument('--lr', dest='learning_rate', type=float)
        parser.add_argument('input')
        """)
    assert {flag: entry[0] for flag, entry in found.items()} == {
        "-n": "num_layers", "--num-layers": "num_layers", "-v": "v", "--tp": "tp",
        "--tensor-model-parallel-size": "tp", "--lr": "learning_rate"}  # 'input' is positional


def test_default_literal_or_unknown():
    found = options("""\
        parser.add_argument('--seq', type=int, default=2048)
        parser.add_argument('--betas', nargs=2, type=float, default=(0.9, 0.95))
        parser.add_argument('--scale', type=float, default=2**32)
        parser.add_argument('--rank', type=int, default=int(os.getenv('RANK', '0')))
        """)
    assert {flag: entry[4] for flag, entry in found.items()} == {
        "--seq": 2048, "--betas": (0.9, 0.95), "--scale": None, "--rank": None}


def test_boolean_optional_action_defines_no_x():
    found = options("parser.add_argument('--overlap', action=argparse.BooleanOptionalAction, default=True)")
    assert found == {"--overlap": ("overlap", 0, None, None, True),
                     "--no-overlap": ("overlap", 0, None, None, True)}


def test_groups_and_helper_functions():
    source = read("""\
        import argparse

        def _add_network_args(parser):
            group = parser.add_argument_group(title='network')
            group.add_argument('--hidden-size', type=int)
            exclusive = group.add_mutually_exclusive_group()
            exclusive.add_argument('--fp16', action='store_true')
            exclusive.add_argument('--bf16', action='store_true')
            return parser

        def _print(args):
            print(args)

        def parse_args():
            parser = argparse.ArgumentParser()
            parser = _add_network_args(parser)
            return parser.parse_args()
        """)
    assert list(source.options) == ["--hidden-size", "--fp16", "--bf16"]
    assert source.lines == {"--hidden-size": 5, "--fp16": 7, "--bf16": 8}
    assert source.functions_adding == ("_add_network_args",)
    assert source.delegates == ()  # the file's own helper is read where it is
    assert source.complete


def test_options_under_a_condition_are_marked():
    source = read(HEADER + textwrap.dedent("""\
        parser.add_argument('--always', type=int)
        try:
            import kitchen
            HAVE_KITCHEN = True
        except ImportError:
            HAVE_KITCHEN = False
        if HAVE_KITCHEN:
            parser.add_argument('--kitchen-recipe', type=int)
        if __name__ == "__main__":
            parser.add_argument('--main', type=int)
        """))
    assert source.conditional == ("--kitchen-recipe",)
    assert set(source.options) == {"--always", "--kitchen-recipe", "--main"}


# what a static reading cannot know: gaps


def test_non_literal_option_strings_are_a_located_gap():
    source = read(HEADER + textwrap.dedent("""\
        parser.add_argument('--known', type=int)
        parser.add_argument(PREFIX + 'size', type=int)
        for name in computed_names():
            parser.add_argument(f'--{name}', type=int)
        """))
    assert not source.complete
    assert source.gaps == ("train.py:4: option strings not literal",
                           "train.py:6: option strings not literal (add_argument in a loop over a computed list)")
    assert list(source.options) == ["--known"]


def test_a_loop_over_a_literal_list_is_unrolled():
    source = read(HEADER + textwrap.dedent("""\
        for split in ('train', 'valid'):
            parser.add_argument(f'--{split}-data-path', nargs='*')
            parser.add_argument('--' + split + '-iters', type=int)
        """))
    assert source.complete
    assert list(source.options) == ["--train-data-path", "--train-iters", "--valid-data-path", "--valid-iters"]
    assert source.options["--valid-iters"] == ("valid_iters", 1, None, "int", None)


def test_star_args_and_kwargs_are_gaps():
    source = read(HEADER + textwrap.dedent("""\
        parser.add_argument('--lr', **float_option)
        parser.add_argument(*names, type=int)
        """))
    assert source.gaps == ("train.py:3: **kwargs / *args in add_argument",
                           "train.py:4: **kwargs / *args in add_argument")
    assert list(source.options) == ["--lr"]  # its flag is known, what it takes is not


def test_options_generated_from_dataclasses_are_gaps_not_delegates():
    source = read("""\
        import argparse
        from megatron.training.argument_utils import ArgumentGroupFactory

        def _add_training_args(parser):
            factory = ArgumentGroupFactory(TrainingConfig, exclude=['x'])
            group = factory.build_group(parser, 'training')
            group.add_argument('--extra', type=int)
            ArgumentGroupFactory(RNGConfig).build_group(parser, 'rng')
            EngineArgs.add_cli_args(parser)
            return parser
        """)
    assert source.gaps == (
        "train.py:5: options generated from dataclass fields (ArgumentGroupFactory(TrainingConfig))",
        "train.py:8: options generated from dataclass fields (ArgumentGroupFactory(RNGConfig))",
        "train.py:9: options generated from a config class (EngineArgs.add_cli_args(...))")
    assert source.delegates == ()
    assert list(source.options) == ["--extra"]


# how the parser is made and parses


@pytest.mark.parametrize(("calls", "expected"), [
    ("args, _ = parser.parse_known_args()", True),
    ("args = parser.parse_args()", False),
    ("if ignore_unknown:\n    args, _ = parser.parse_known_args()\nelse:\n    args = parser.parse_args()",
     "conditional"),
    ("", None),
])
def test_ignores_unknown(calls: str, expected):
    assert read(HEADER + calls + "\n").ignores_unknown == expected


@pytest.mark.parametrize(("made", "expected"), [
    ("parser = argparse.ArgumentParser(description='x', allow_abbrev=False)", False),
    ("parser = ArgumentParser()", True),  # argparse's default: prefixes of long options are accepted
    ("parser = argparse.ArgumentParser(allow_abbrev=ABBREV)", None),
    ("parser = make_parser()", None),
])
def test_allow_abbrev(made: str, expected):
    assert read(made + "\nparser.add_argument('--x')\n").allow_abbrev is expected


# delegates: functions from elsewhere that get the parser


def test_deepspeed_delegate_is_known_and_the_provider_is_not():
    source = read("""\
        import argparse
        import deepspeed
        from megatron.plugins import add_args as add_plugin_args

        def parse_args(extra_args_provider=None):
            parser = argparse.ArgumentParser()
            parser.add_argument('--lr', type=float)
            if extra_args_provider is not None:
                parser = extra_args_provider(parser)
            parser = deepspeed.add_config_arguments(parser)
            add_plugin_args(parser)
            print(parser)
            return parser.parse_args()
        """)
    assert source.delegates == (("extra_args_provider", 9), ("deepspeed.add_config_arguments", 10),
                                ("megatron.plugins.add_args", 11))
    assert source.complete  # delegates are the caller's to resolve, not gaps of this file
    assert source.unresolved_delegates == (("extra_args_provider", 9), ("megatron.plugins.add_args", 11))
    assert set(source.catalogue().defined) == {"--lr", "--deepspeed", "--deepspeed_config", "--deepscale",
                                               "--deepscale_config"}


def test_deepspeed_delegate_imported_by_name_resolves():
    source = read("""\
        from deepspeed import add_config_arguments as ds_args
        def build(parser):
            return ds_args(parser)
        """)
    assert source.delegates == (("deepspeed.add_config_arguments", 3),)
    assert source.unresolved_delegates == ()


def test_known_delegate():
    assert known_delegate("deepspeed.add_config_arguments") == {
        "--deepspeed": ("deepspeed", 0, None, None, False),
        "--deepspeed_config": ("deepspeed_config", 1, None, "str", None),
        "--deepscale": ("deepscale", 0, None, None, False),
        "--deepscale_config": ("deepscale_config", 1, None, "str", None)}
    assert known_delegate("extra_args_provider") is None


def test_known_delegate_is_what_deepspeeds_own_source_adds():
    """The fact written in known_delegate, read from the installed DeepSpeed's source (found,
    never imported)."""
    spec = importlib.util.find_spec("deepspeed")
    if spec is None or spec.origin is None:
        if os.environ.get("CI"):
            pytest.fail("deepspeed is required in CI (install the oracle extra)")
        pytest.skip("deepspeed not installed (pip install '.[oracle]')")
    source = read_parser_source(Path(spec.origin).read_text(encoding="utf-8"), spec.origin)
    assert source.options == known_delegate("deepspeed.add_config_arguments")
    assert source.functions_adding == ("_add_core_arguments",)


# bad input


@pytest.mark.parametrize(("text", "gap"), [
    ("import argparse\ndef f(:\n    pass\n", "train.py:2: does not parse: invalid syntax"),
    ("x = 1\0\n", "train.py:1: does not parse: source code string cannot contain null bytes"),
    ("x = " + "+".join(["a"] * 5000) + "\n", "train.py:1: not read: maximum recursion depth exceeded"),
    ("x" * 5_000_001, "train.py:1: not read: 5000001 characters (more than 5000000)"),
])
def test_a_file_that_does_not_parse_is_a_gap(text: str, gap: str):
    source = read_parser_source(text, "train.py")
    assert not source.complete and source.options == {}
    assert source.gaps[0].startswith(gap)


# attribute reads


def test_attribute_reads():
    text = textwrap.dedent("""\
        args = get_args()
        if args.fp16 and self.args.bf16:
            x = get_args().micro_batch_size
        y = getattr(args, "use_flash_attn", False)
        args.world_size = 8
        if args.rank == 0:
            pass
        other.config.seq_length
        margs.iteration, cli_args.lr, parse_args().seed
        if hasattr(self.args, 'moe_grouped_gemm'):
            pass
        """)
    assert attribute_reads(text) == {"fp16", "bf16", "micro_batch_size", "use_flash_attn", "rank",
                                     "moe_grouped_gemm"}
    assert attribute_reads("args.lr") == {"lr"}
    assert attribute_reads("import os\n") == frozenset()


# the real parsers (shared/oracles), against the catalogues extracted from the live parsers

PARSERS = {  # catalogue -> (archive, the parser's path in it)
    "megatron-deepspeed-bigscience": ("megatron-deepspeed-bigscience-8387ae17", "megatron/arguments.py"),
    "megatron-deepspeed-microsoft": ("megatron-deepspeed-microsoft-f4157bea", "megatron/arguments.py"),
    "megatron-lm-core_v0.16.1": ("megatron-lm-core_v0.16.1", "megatron/training/arguments.py"),
    "megatron-lm-main-2026-08-22": ("megatron-lm-main-d98e8a64dd", "megatron/training/arguments.py"),
}


@pytest.fixture(scope="module")
def parsers(tmp_path_factory) -> dict[str, ParserSource]:
    """Each oracle's parser file, unpacked from ../shared/oracles and read: {catalogue name: read}."""
    missing = [archive for archive, _ in PARSERS.values() if not (ORACLES / f"{archive}.tar.gz").is_file()]
    if missing:
        pytest.fail(f"oracle archives missing in {ORACLES}: {missing}")
    base = tmp_path_factory.mktemp("parser-oracles")
    out = {}
    for name, (archive, inner) in PARSERS.items():
        with tarfile.open(ORACLES / f"{archive}.tar.gz") as tar:
            tar.extractall(base / archive, members=[tar.getmember(f"./{inner}")], filter="data")
        path = base / archive / inner
        out[name] = read_parser_source(path.read_text(encoding="utf-8"), str(path))
    return out


def _differences(read_: dict[str, tuple], extracted: dict[str, tuple], fields: tuple[int, ...]) -> dict:
    """{(flag, field): (read, extracted)} where the two disagree (choices compared as tuples)."""
    out = {}
    for flag in read_.keys() & extracted.keys():
        for i in fields:
            mine, theirs = read_[flag][i], extracted[flag][i]
            if i == 2 and theirs is not None:
                theirs = tuple(theirs)
            if mine != theirs:
                out[flag, ("dest", "arity", "choices", "kind", "default")[i]] = (mine, theirs)
    return out


# choices taken at run time from objects the static reading does not evaluate (choices None,
# the flag in unknown_choices): list(PositionEmbeddingType), GLU_ACTIVATIONS.keys(),
# list(log_levels.keys())
RUNTIME_CHOICES = {
    "megatron-deepspeed-bigscience": {"--position-embedding-type", "--glu-activation", "--log-level",
                                      "--log-level-replica"},
    "megatron-deepspeed-microsoft": set(),
}


@pytest.mark.parametrize("name", ["megatron-deepspeed-bigscience", "megatron-deepspeed-microsoft"])
def test_megatron_deepspeed_parser_read_is_its_catalogue(parsers, name: str):
    source = parsers[name]
    extracted = catalogue(name).defined
    assert source.complete, source.gaps
    assert [d for d, _ in source.delegates] == ["extra_args_provider", "deepspeed.add_config_arguments"]
    assert (source.allow_abbrev, source.ignores_unknown) == (False, "conditional")
    read_ = source.catalogue().defined  # with DeepSpeed's four
    assert set(read_) == set(extracted)
    assert _differences(read_, extracted, (0, 1, 3)) == {}
    choices = _differences(read_, extracted, (2,))
    assert {flag for flag, _ in choices} == RUNTIME_CHOICES[name] == set(source.unknown_choices)
    assert all(mine is None for mine, _ in choices.values())
    # a default computed at run time (2**32, an enum member) is read as None, never as a guess
    defaults = _differences(read_, extracted, (4,))
    assert all(mine is None for mine, _ in _listless(defaults).values()), _listless(defaults)


def _listless(differences: dict) -> dict:
    """The differences left once a tuple read and its JSON list are taken as equal."""
    return {k: v for k, v in differences.items()
            if not (isinstance(v[0], tuple) and list(v[0]) == v[1])}


@pytest.mark.parametrize("name", ["megatron-lm-core_v0.16.1", "megatron-lm-main-2026-08-22"])
def test_megatron_lm_parser_is_incomplete_and_agrees_where_read(parsers, name: str):
    source = parsers[name]
    extracted = catalogue(name).defined
    assert not source.complete
    assert any("options generated from dataclass fields (ArgumentGroupFactory(TransformerConfig))" in gap
               for gap in source.gaps), source.gaps
    assert [d for d, _ in source.delegates] == ["extra_args_provider"]
    assert (source.allow_abbrev, source.ignores_unknown) == (False, "conditional")
    # --kitchen-config-file and --kitchen-recipe-number are added only `if HAVE_KITCHEN:` (the
    # optional kitchen extension, absent where the catalogue was extracted): the reader marks
    # them conditional; every other option read is in the catalogue
    assert set(source.options) - set(extracted) == set(source.conditional) == {
        "--kitchen-config-file", "--kitchen-recipe-number"}
    extracted_read = {flag: entry for flag, entry in source.options.items() if flag in extracted}
    assert _differences(extracted_read, extracted, (0, 1, 2, 3)) == {}
    assert len(extracted_read) > 350
