"""The one argv splitter: an entry point's words read as an argparse parser with
``allow_abbrev=False`` reads them, each option taking as many values as its arity says."""

from __future__ import annotations

from collections.abc import Callable

from generator.values import value


@value
class Word:
    """One option as given: the flag, the index of its word, and its values' indexes (or the
    inline value of ``--flag=value``)."""

    flag: str
    index: int
    values: tuple[int, ...]
    inline: str | None = None

    def texts(self, words: list) -> list:
        return [self.inline] if self.inline is not None else [words[k] for k in self.values]


def is_flag(text: str | None) -> bool:
    return text is not None and text.startswith("--") and len(text) > 2


def split(words: list[str | None], arity: Callable[[str], int | str | None]
          ) -> tuple[list[Word], list[int]]:
    """([options in order], [indexes of the words that are no option's]). ``arity(flag)`` is a
    count, argparse's "?" / "*" / "+", or None for an option the table does not know (then it
    takes the next word unless that is a flag, as a reader of an unknown parser must guess)."""
    options: list[Word] = []
    stray: list[int] = []
    k = 0
    while k < len(words):
        text = words[k]
        if not is_flag(text):
            stray.append(k)
            k += 1
            continue
        name, eq, inline = text.partition("=")
        if eq:
            options.append(Word(name, k, (), inline))
            k += 1
            continue
        count = arity(name)
        most = {None: 1, "?": 1, "*": None, "+": None}.get(count, count) if not isinstance(count, int) \
            else count
        start = k + 1
        end = start
        while end < len(words) and (most is None or end - start < most) and not is_flag(words[end]):
            end += 1
        options.append(Word(name, k, tuple(range(start, end))))
        k = end
    return options, stray
