"""A Kubernetes executor's file (TrainJob, PyTorchJob, JobSet with its ConfigMap) -> the files
its pods mount: each ConfigMap's data as {"FILE#CONFIGMAP/KEY": text}, so that the linter reads
the pods' launch.sh and the argument files beside it as it reads an sbatch script and its
companions. Read as YAML data only (safe loader: nothing constructed, nothing run)."""

from __future__ import annotations

import yaml


def mounted_files(text: str, file: str) -> dict[str, str]:
    """The text of every ConfigMap key in the documents of ``text`` (none if it is not YAML)."""
    try:
        documents = list(yaml.safe_load_all(text))
    except yaml.YAMLError:
        return {}
    out = {}
    for doc in documents:
        if not isinstance(doc, dict) or doc.get("kind") != "ConfigMap":
            continue
        name = (doc.get("metadata") or {}).get("name", "configmap")
        for key, value in (doc.get("data") or {}).items():
            if isinstance(value, str):
                out[f"{file}#{name}/{key}"] = value
    return out
