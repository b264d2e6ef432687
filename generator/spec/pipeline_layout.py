"""A pipeline layout in Megatron-LM's notation (--pipeline-model-parallel-layout, core_v0.14 and
later): which layers each pipeline stage holds, for layer counts no pp × vpp divides (DeepSeek-V3's
61 layers and its MTP layer on pp 8 × vpp 4).

The notation: one letter per layer (E the embedding, t a transformer layer, m an MTP layer, L
the loss), stages separated by ``|``, ``x*n`` and ``(...)*n`` repeat, commas are cosmetic:
``Et*3|(tt|)*29,m|L`` is 32 stages. Stage k belongs to pipeline rank k mod pp, as its virtual
stage k // pp. The checks are Megatron's (TransformerConfig and its PipelineParallelLayerLayout),
written here as messages for GL235."""

from __future__ import annotations

import re

from generator.values import value

_LETTERS = {"E": "embedding", "t": "transformer layer", "m": "MTP layer", "L": "loss"}
_GROUP = re.compile(r"\(([^()]*)\)\*(\d+)")
_ONE = re.compile(r"(.)\*(\d+)")
# at most this many layers written out (a typo like t*99999999 is refused, not expanded)
_MAX_LETTERS = 100_000


class LayoutError(ValueError):
    """A layout that is not Megatron's notation, or that its model and pp do not fit."""


@value
class PipelineLayout:
    """The stages of a layout, each the letters of its layers."""

    text: str
    stages: tuple[str, ...]

    @classmethod
    def parse(cls, text: str) -> PipelineLayout:
        written = text.replace(",", "").replace(" ", "")
        for pattern in (_GROUP, _ONE):
            while True:
                match = pattern.search(written)
                if match is None:
                    break
                times = int(match.group(2))
                if len(match.group(1)) * times > _MAX_LETTERS:
                    raise LayoutError(f"{match.group(0)!r} writes out more than {_MAX_LETTERS:,} layers")
                written = written[:match.start()] + match.group(1) * times + written[match.end():]
        stray = sorted(set(written) - set(_LETTERS) - {"|"})
        if stray:
            raise LayoutError(f"{stray[0]!r} is not a layer letter (E embedding, t transformer layer, "
                              "m MTP layer, L loss; | between stages, x*n and (...)*n repeat)")
        return cls(text, tuple(written.split("|")))

    def count(self, letter: str) -> int:
        return sum(stage.count(letter) for stage in self.stages)

    def vpp(self, pp: int) -> int:
        return len(self.stages) // pp

    def rank_layers(self, pp: int, letter: str = "t") -> tuple[int, ...]:
        """The layers of ``letter`` each pipeline rank holds, over its virtual stages."""
        return tuple(sum(stage.count(letter) for stage in self.stages[rank::pp]) for rank in range(pp))

    def problem(self, pp: int, num_layers: int, mtp_layers: int) -> str | None:
        """Why Megatron refuses this layout for the model and pp (None: it takes it)."""
        if len(self.stages) % pp:
            return f"its {len(self.stages)} stages are not a multiple of pp {pp}"
        letters = "".join(self.stages)
        if not letters.startswith("E") or self.count("E") != 1:
            return "it must start with the embedding E, once"
        if not letters.endswith("L") or self.count("L") != 1:
            return "it must end with the loss L, once"
        if self.count("t") != num_layers:
            return f"it places {self.count('t')} transformer layers t, the model has {num_layers}"
        if self.count("m") != mtp_layers:
            return f"it places {self.count('m')} MTP layers m, the model has {mtp_layers}"
        if "m" in letters and "t" in letters[letters.index("m"):]:
            return "its MTP layers m must follow every transformer layer t"
        holding = [k for k, stage in enumerate(self.stages) if "m" in stage]
        if holding and (len(set(holding)) > 1 or holding[0] // pp != self.vpp(pp) - 1):
            return "its MTP layers must all be in one stage, the last virtual stage of their rank"
        return None
