"""A static reader for bash launch scripts: a lexer (lexer.py) and a flat evaluator
(evaluate.py). Nothing is executed: command substitutions and runtime values stay unknown.
Its budgets against hostile input (commands, value bytes, array elements, nesting) are the
MAX_* constants of evaluate.py; a reading that hits one is reported (lint: GL902)."""

from generator.readers.bash.evaluate import Command, Field, Script, read_script

__all__ = ["Command", "Field", "Script", "read_script"]
