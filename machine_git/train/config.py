"""A run's configuration: what ``tinker.yaml`` holds and how it is checked.

``machine train sft`` writes ``tinker.yaml`` into the run folder; the
generated ``train_sft.py`` and ``machine train smoke/run`` both read it back
here, so hyper-parameters edited in the file are the ones that train. The data
it names is pinned: :func:`check_export` refuses a ``data.jsonl`` whose sha256
is not the one recorded when the run was prepared.
"""

from __future__ import annotations

import contextlib
import hashlib
import string
from dataclasses import asdict
from dataclasses import dataclass
from dataclasses import field
from dataclasses import fields
from pathlib import Path
from typing import Any

from machine_git import bundled
from machine_git import jsonio
from machine_git.errors import TrainingError

# Its tokenizer ships offline in tml-renderers, and its family's published chat
# template is a test fixture that machine's rendering is checked against.
DEFAULT_BASE_MODEL = "Qwen/Qwen3-30B-A3B"
CONFIG_FILE = "tinker.yaml"
SCRIPT_FILE = "train_sft.py"
DATA_FILE = "data.jsonl"
KINDS = ("train", "traces")


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
    """A RunConfig from the parsed YAML mapping."""
    if not isinstance(data, dict):
        raise TrainingError(f"{where}: expected a mapping")
    dataset = _section(data, "dataset", where)
    model = _section(data, "model", where)
    hyper_in = _section(data, "hyperparameters", where)
    hyper_values: dict[str, Any] = {}
    for f in fields(Hyper):
        default = getattr(Hyper(), f.name)
        value = hyper_in.get(f.name, default)
        hyper_values[f.name] = _number(
            value, type(default), f"hyperparameters.{f.name}", where
        )
    hyper = Hyper(**hyper_values)
    for name in ("batch_size", "num_epochs", "lora_rank", "max_length"):
        if getattr(hyper, name) < 1:
            raise TrainingError(f"{where}: 'hyperparameters.{name}' must be at least 1")
    if hyper.learning_rate <= 0:
        raise TrainingError(
            f"{where}: 'hyperparameters.learning_rate' must be positive"
        )
    kind = _text(dataset, "kind", "dataset", where)
    if kind not in KINDS:
        raise TrainingError(
            f"{where}: 'dataset.kind' must be one of {', '.join(KINDS)}"
        )
    held_out = dataset.get("held_out_eval")
    data_file = _text(dataset, "file", "dataset", where)
    if "/" in data_file or "\\" in data_file or data_file.startswith("."):
        raise TrainingError(
            f"{where}: 'dataset.file' must be a file name in the run folder"
        )
    return RunConfig(
        run_id=_text(data, "run_id", "", where),
        dataset_commit=_text(dataset, "commit", "dataset", where),
        revision=_text(dataset, "revision", "dataset", where),
        kind=kind,
        export_sha256=_text(dataset, "sha256", "dataset", where),
        rows=int(_number(dataset.get("rows"), int, "dataset.rows", where)),
        base_model=_text(model, "base_model", "model", where),
        renderer=_text(model, "renderer", "model", where),
        train_on_what=_text(model, "train_on_what", "model", where),
        held_out_eval=str(held_out) if held_out else None,
        data_file=data_file,
        hyper=hyper,
    )


def _section(data: dict[str, Any], key: str, where: str) -> dict[str, Any]:
    value = data.get(key)
    if not isinstance(value, dict):
        raise TrainingError(f"{where}: '{key}' must be a mapping")
    return value


def _text(data: dict[str, Any], key: str, section: str, where: str) -> str:
    value = data.get(key)
    name = f"{section}.{key}" if section else key
    if not isinstance(value, str) or not value:
        raise TrainingError(f"{where}: '{name}' must be a non-empty string")
    return value


def _number(value: Any, kind: type, name: str, where: str) -> Any:
    if isinstance(value, str):  # "1e-5" in a hand-edited file is a YAML string
        with contextlib.suppress(ValueError):
            value = float(value) if kind is float else int(value)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TrainingError(f"{where}: '{name}' must be a number")
    if kind is int and not isinstance(value, int):
        raise TrainingError(f"{where}: '{name}' must be a whole number")
    return kind(value)
