"""A run's configuration: what ``tinker.yaml`` holds and how it is checked.

``machine train sft`` (and ``dpo``) writes ``tinker.yaml`` into the run
folder; the generated ``train_sft.py`` and ``machine train smoke/run`` both
read it back here, checked field by field (:class:`records.TinkerFile`), so
hyper-parameters edited in the file are the ones that train. The data it names
is pinned: :func:`check_export` refuses a ``data.jsonl`` whose sha256 is not
the one recorded when the run was prepared.
"""

from __future__ import annotations

import hashlib
import string
from dataclasses import asdict
from dataclasses import dataclass
from dataclasses import field
from dataclasses import fields
from pathlib import Path
from typing import Any

from machine_git import bundled
from machine_git.core import jsonio
from machine_git.core.errors import TrainingError

# Its tokenizer ships offline in tml-renderers, and its family's published chat
# template is a test fixture that machine's rendering is checked against.
DEFAULT_BASE_MODEL = "Qwen/Qwen3-30B-A3B"
CONFIG_FILE = "tinker.yaml"
SCRIPT_FILE = "train_sft.py"
DATA_FILE = "data.jsonl"
KINDS = ("train", "traces")
DPO_BETA = 0.1  # the cookbook's default KL weight for DPO


@dataclass(frozen=True)
class Hyper:
    """Hyper-parameters of a LoRA SFT run (defaults suit a few hundred rows)."""

    learning_rate: float = 2e-4
    batch_size: int = 8
    num_epochs: int = 1
    lora_rank: int = 32
    max_length: int = 32768
    save_every: int = 20  # steps between checkpoints; 0 = only the final one
    ttl_seconds: int = 604800  # periodic checkpoints expire; the final one stays
    seed: int = 0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class RunConfig:
    """Everything a run needs; the dataset commit and export sha256 pin its data."""

    run_id: str
    dataset_commit: str
    revision: str
    kind: str
    export_sha256: str
    rows: int
    base_model: str
    renderer: str
    train_on_what: str
    held_out_eval: str | None = None
    data_file: str = DATA_FILE
    hyper: Hyper = field(default_factory=Hyper)
    method: str = "sft"  # or "dpo": pairs from rows rewritten with --as
    dpo_beta: float = DPO_BETA
    context: bool = True  # system prompts and tools are in the export


def sha256_file(path: Path) -> str:
    """The hex sha256 of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def check_export(cfg: RunConfig, folder: Path) -> Path:
    """The run's data file, if it still hashes to the recorded sha256."""
    path = folder / cfg.data_file
    try:
        actual = sha256_file(path)
    except OSError as e:
        raise TrainingError(f"cannot read {path}: {e.strerror or e}") from None
    if actual != cfg.export_sha256:
        raise TrainingError(
            f"{path} changed since run {cfg.run_id} was prepared (sha256 "
            f"{actual[:12]} is not {cfg.export_sha256[:12]}); prepare a new run "
            "with 'machine train sft'"
        )
    return path


# -- tinker.yaml ---------------------------------------------------------------


def render(cfg: RunConfig) -> str:
    """``tinker.yaml`` from the template; every value a JSON scalar (valid YAML)."""
    values: dict[str, str] = {
        "run_id": cfg.run_id,
        "dataset_commit": cfg.dataset_commit,
        "export_sha256": cfg.export_sha256,
    }
    flat = {
        "run_id": cfg.run_id,
        "commit": cfg.dataset_commit,
        "revision": cfg.revision,
        "kind": cfg.kind,
        "file": cfg.data_file,
        "sha256": cfg.export_sha256,
        "rows": cfg.rows,
        "held_out_eval": cfg.held_out_eval,
        "context": cfg.context,
        "method": cfg.method,
        "dpo_beta": cfg.dpo_beta,
        "base_model": cfg.base_model,
        "renderer": cfg.renderer,
        "train_on_what": cfg.train_on_what,
        **cfg.hyper.as_dict(),
    }
    for key, value in flat.items():
        values[f"{key}_v"] = _scalar(value)
    text = bundled.read_bytes("templates", "tinker.yaml.tmpl").decode()
    return string.Template(text).substitute(values)


def _scalar(value: Any) -> str:
    # JSON scalars are YAML scalars, except that PyYAML (YAML 1.1) reads an
    # exponent without a dot ("1e-05") as a string: write "1.0e-05".
    if isinstance(value, float):
        text = repr(value)
        if "e" in text and "." not in text:
            text = text.replace("e", ".0e", 1)
        return text
    return jsonio.compact(value)


def load(path: Path) -> RunConfig:
    """Read and check ``tinker.yaml``; a one-line error names the bad key."""
    import yaml

    try:
        data = yaml.safe_load(path.read_text())
    except OSError as e:
        raise TrainingError(f"cannot read {path}: {e.strerror or e}") from None
    except yaml.YAMLError as e:
        raise TrainingError(
            f"{path}: not valid YAML ({' '.join(str(e).split())})"
        ) from None
    return parse(data, str(path))


def parse(data: Any, where: str) -> RunConfig:
    """A RunConfig from the parsed YAML mapping; one line names a bad field."""
    from machine_git.train import records

    if not isinstance(data, dict):
        raise TrainingError(f"{where}: expected a mapping")
    found = records.parse(records.TinkerFile, data, where)
    dataset, hyper = found.dataset, found.hyperparameters
    values = hyper.model_dump()
    return RunConfig(
        run_id=found.run_id,
        dataset_commit=dataset.commit,
        revision=dataset.revision,
        kind=dataset.kind,
        export_sha256=dataset.sha256,
        rows=dataset.rows,
        base_model=found.model.base_model,
        renderer=found.model.renderer,
        train_on_what=found.model.train_on_what,
        held_out_eval=dataset.held_out_eval or None,
        data_file=dataset.file,
        hyper=Hyper(**{f.name: values[f.name] for f in fields(Hyper)}),
        method=found.method,
        dpo_beta=hyper.dpo_beta,
        context=dataset.context,
    )
