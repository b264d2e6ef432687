"""accelerate's dialect (accelerate.yaml): the keys of accelerate_config.yaml, walked forward
into the config a plan renders and backward by the config reader."""

from __future__ import annotations

from generator.dialects.keyed import KeyedDialect, keyed_dialect


def dialect() -> KeyedDialect:
    return keyed_dialect("accelerate")


