"""DeepSpeed's dialect (deepspeed.yaml): the ds_config.json keys, walked forward into the
config a plan renders and backward by the JSON reader and `import`."""

from __future__ import annotations

from generator.dialects.keyed import KeyedDialect, keyed_dialect


def dialect() -> KeyedDialect:
    return keyed_dialect("deepspeed")


