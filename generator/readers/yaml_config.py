"""A YAML config file read as data (safe loader, nothing constructed or run): the document, or
the located problem a linter reports instead (accelerate, Trainer and GPT-NeoX configs)."""

from __future__ import annotations

from generator.errors import UserError
from generator.spec.load import Document, load_yaml


def read_mapping(text: str, file: str, what: str, article: str = "a") -> tuple[Document | None,
                                                                             list[tuple[str, str]]]:
    """(the document, []) for a YAML mapping; (None, [(where, why)]) otherwise. ``what`` names
    the kind of config in the message ("accelerate config")."""
    try:
        doc = load_yaml(text, file)
    except UserError as exc:
        return None, [(str(exc.location or file), f"not readable as {article} {what}: {exc.message}")]
    if not isinstance(doc.data, dict):
        return None, [(file, f"{article} {what} is a YAML mapping")]
    return doc, []
