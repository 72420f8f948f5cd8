"""Images for vision models: Qwen3-VL's image processor, offline.

The cookbook's Qwen3-VL renderer turns each image into a
``tinker.types.ImageChunk`` whose ``expected_tokens`` it computes with the
model's image processor (``image_to_chunk``: patches over ``merge_size**2``).
The cookbook gets that processor with ``AutoImageProcessor.from_pretrained``,
a Hugging Face download; machine builds the same processor class
(transformers' Qwen2VLImageProcessor, the slow PIL one: the fast one needs
torchvision) from the published parameters it keeps in
``templates/qwen3_vl_preprocessor.json``, with their provenance. Nothing is
downloaded. Heavy: imports transformers. Import after ``stack.require()``.
"""

from __future__ import annotations

import functools
from typing import Any

from machine_git.core import jsonio
from machine_git.core.errors import TrainingError

PARAMETERS = "qwen3_vl_preprocessor.json"
# The processor reads these; the rest name the classes (not constructor args).
_KEYS = ("size", "patch_size", "temporal_patch_size", "merge_size")
_NORMALIZE = ("image_mean", "image_std")


def parameters() -> dict[str, Any]:
    """The published preprocessor parameters machine keeps (with provenance)."""
    from machine_git import bundled

    found = jsonio.loads(bundled.read_bytes("templates", PARAMETERS))
    config = found.get("preprocessor_config") if isinstance(found, dict) else None
    if not isinstance(config, dict):
        raise TrainingError(f"templates/{PARAMETERS}: no preprocessor_config")
    return config


@functools.cache
def image_processor() -> Any:
    """Qwen3-VL's image processor, built offline from :func:`parameters`."""
    # transformers 5 has the PIL build in its own module; in 4.57 (which the
    # cookbook allows too) the default class is the PIL one.
    try:
        from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import (
            Qwen2VLImageProcessorPil as Processor,
        )
    except ImportError:
        from transformers.models.qwen2_vl.image_processing_qwen2_vl import (  # type: ignore[assignment]
            Qwen2VLImageProcessor as Processor,
        )

    config = parameters()
    kwargs = {k: config[k] for k in (*_KEYS, *_NORMALIZE) if k in config}
    return Processor(**kwargs)


def image_tokens(width: int, height: int) -> int:
    """How many tokens an image of this size is to Qwen3-VL (as the cookbook
    counts them)."""
    processor = image_processor()
    patches = processor.get_number_of_image_patches(height, width, images_kwargs={})
    return int(patches // processor.merge_size**2)
