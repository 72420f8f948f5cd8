"""machine inside the agents: installed extensions, observed runs, forks, the student.

``install`` writes the Pi extension and the Letta Code mod (rendered from
templates/) and Pi's Tinker provider; ``observe`` records unlabeled runs and
labels them later; ``fork`` builds correction prompts and reruns them in Pi;
``student`` keeps the model to chat with and samples it through Tinker's
OpenAI-compatible endpoint.

May use: releases, train, tagging, export, sync, recovery, history, store,
sessions, rows, secrets, core, bundled (pyproject.toml: [tool.importlinter]).
"""

from __future__ import annotations
