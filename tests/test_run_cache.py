"""The cache folder only ever saves time: the parsed data files and the compiled templates a run
keeps there give the same files as a run without them, and a damaged or unwritable cache is
ignored (generator.resources.cache_dir, read_yaml; generator.render's template cache)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from .conftest import ROOT

SAMPLE = ROOT / "samples" / "seed-pretrain-256.yaml"


def _generate(cache: Path, out: Path) -> dict[str, str]:
    env = {**os.environ, "GEN_LAUNCH_CACHE": str(cache)}
    proc = subprocess.run([sys.executable, "-m", "generator", "generate", str(SAMPLE), "--out", str(out), "-q"],
                          env=env, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "internal error" not in proc.stderr and "Traceback" not in proc.stderr
    return {p.name: p.read_text() for p in sorted(out.iterdir())}


def test_a_warm_cache_gives_the_files_a_cold_run_gives(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    cold = _generate(cache, tmp_path / "cold")
    kept = sorted(p.relative_to(cache).parts[0] for p in cache.rglob("*") if p.is_file())
    # dialect tables, presets; 3 templates and the 3 launch.sbatch includes (environment, arguments, command)
    assert kept.count("data") >= 5 and kept.count("templates") == 6, kept
    assert _generate(cache, tmp_path / "warm") == cold


def test_damaged_cache_files_are_read_again_from_the_source(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    cold = _generate(cache, tmp_path / "cold")
    for index, path in enumerate(p for p in cache.rglob("*") if p.is_file()):
        path.write_bytes([b"", b"\x00garbage", b"{not marshal"][index % 3])
    assert _generate(cache, tmp_path / "damaged") == cold


def test_a_cache_path_that_is_a_file_is_ignored(tmp_path: Path) -> None:
    """Nothing can be created below a plain file (unlike a read-only folder, also not by root)."""
    cache = tmp_path / "cache"
    cache.write_text("not a folder")
    assert _generate(cache, tmp_path / "one") == _generate(tmp_path / "real", tmp_path / "two")


def test_read_yaml_keeps_the_parsed_document_by_its_text(tmp_path: Path, monkeypatch) -> None:
    """A changed data file is parsed anew (the key is its text), never read from the old entry."""
    from generator import resources

    monkeypatch.setenv("GEN_LAUNCH_CACHE", str(tmp_path / "cache"))
    data = tmp_path / "table.yaml"
    data.write_text("a: 1\nb: [x, y]\n")
    assert resources.read_yaml.__wrapped__(data) == {"a": 1, "b": ["x", "y"]}
    assert len(list((tmp_path / "cache" / "data").iterdir())) == 1
    data.write_text("a: 2\n")
    assert resources.read_yaml.__wrapped__(data) == {"a": 2}
    data.write_text("when: 2024-01-01\n")  # a value marshal cannot keep: parsed, not kept
    assert str(resources.read_yaml.__wrapped__(data)["when"]) == "2024-01-01"
    assert len(list((tmp_path / "cache" / "data").iterdir())) == 2


def test_a_cache_folder_others_can_write_to_is_not_used(tmp_path: Path) -> None:
    """What the cache keeps is used as it is (the compiled templates run), so a folder other
    users can write to is neither read nor written: a changed entry there changes nothing; the
    same entry in the user's own folder is read."""
    import marshal

    import yaml

    cache = tmp_path / "cache"
    cold = _generate(cache, tmp_path / "cold")
    (entry,) = [p for p in (cache / "data").iterdir() if p.name.startswith("gpus-")]
    gpus = yaml.safe_load((ROOT / "generator" / "presets" / "gpus.yaml").read_text())
    gpus["a100-80gb"]["efficiency"] = 0.31  # the seed sample's GPU: every step time doubles
    entry.write_bytes(marshal.dumps(gpus))
    for template in (cache / "templates").iterdir():
        template.write_bytes(b"garbage")
    for folder in (cache / "data", cache / "templates"):
        folder.chmod(0o777)
    assert _generate(cache, tmp_path / "shared") == cold
    assert marshal.loads(entry.read_bytes()) == gpus  # not rewritten either
    for folder in (cache / "data", cache / "templates"):
        folder.chmod(0o700)
    own = _generate(cache, tmp_path / "own")
    assert own["plan.json"] != cold["plan.json"]  # the halved efficiency: longer steps


def test_a_catalogue_kept_in_the_cache_is_the_one_its_json_gives(tmp_path: Path, monkeypatch) -> None:
    """A parser catalogue is kept as its options' fields (read_kept, kind "options"): read back,
    every option is the one parsed from the JSON, and a kind names its own entry (the same file
    kept by another reader is not mistaken for it)."""
    from generator import dialects, resources

    monkeypatch.setenv("GEN_LAUNCH_CACHE", str(tmp_path / "cache"))
    path = ROOT / "generator" / "dialects" / "catalogues" / "megatron-lm-core_v0.16.1.json"
    parsed = dialects._options(path.read_text(encoding="utf-8"))
    assert resources.read_kept(path, "options", dialects._options) == parsed  # parsed and kept
    assert resources.read_kept(path, "options", lambda text: 1 / 0) == parsed  # read back
    assert resources.read_kept(path, "other", lambda text: "other") == "other"
    source, defined = parsed
    fresh = dialects.Catalogue(source, defined)
    option = fresh.get("--tensor-model-parallel-size")
    assert (option.arity, option.kind, option.default) == (1, "int", 1)
    assert fresh.get("--sequence-parallel").arity == 0 and fresh.get("--no-such-flag") is None
    assert fresh.get("--tensor-model-parallel-size") is option  # made once
    assert "--ckpt-format" in fresh and "--no-such-flag" not in fresh
