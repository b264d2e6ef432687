"""A static reader for bash launch scripts: a lexer (lexer.py) and a flat evaluator
(evaluate.py). Nothing is executed: command substitutions and runtime values stay unknown.
See reference/bash-reading.md for the design and its budgets against hostile input."""

from generator.readers.bash.evaluate import Command, Field, Script, read_script

__all__ = ["Command", "Field", "Script", "read_script"]
