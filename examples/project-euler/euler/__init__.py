"""Sequential coding-agent evaluation on Project-Euler-style problems.

Self-written problems in the style of Project Euler (no Project Euler text or
answers are bundled); hidden variants are drawn per run from a seed and their
answer keys are computed at run time by the reference solvers in problems.py.
"""

from __future__ import annotations
