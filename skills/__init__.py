"""Agent skills machine ships (one folder with a SKILL.md each): package data."""
