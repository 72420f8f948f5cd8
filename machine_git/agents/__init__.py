"""machine inside the agents: installed extensions, observed runs, forks, the student.

``install`` writes the Pi extension and the Letta Code mod (rendered from
templates/) and Pi's Tinker provider; ``observe`` records unlabeled runs and
labels them later; ``fork`` builds correction prompts and reruns them in Pi;
``student`` keeps the model to chat with and samples it through Tinker's
OpenAI-compatible endpoint.
"""

from __future__ import annotations
