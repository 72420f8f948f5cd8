"""How to install one of machine's optional extras, in a form that works.

machine is not on the package index yet, so ``pip install
'machine-git[train]'`` finds nothing: an extra is installed from a checkout
(``'.[train]'``, as the README says) or from a built wheel. The training
stack pins the CPU build of torch first, or pip fetches a 6 GB CUDA one.
"""

from __future__ import annotations

from machine_git import __version__

# The first torch whose CPU wheel the training stack is tested with.
TORCH = "torch==2.13.0"


def install_hint(extra: str) -> str:
    """``pip install ...`` for ``extra`` from a checkout, and from a wheel."""
    before = f"{TORCH} " if extra == "train" else ""
    wheel = f"machine_git-{__version__}-py3-none-any.whl[{extra}]"
    return (
        f"pip install {before}'.[{extra}]' in a machine checkout, or "
        f"pip install {before}'{wheel}' from a wheel"
    )
