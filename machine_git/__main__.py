from __future__ import annotations

from machine_git.entry import main

if __name__ == "__main__":
    main()
