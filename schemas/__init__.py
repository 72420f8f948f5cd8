"""JSON Schemas of machine's rows, shipped as package data (machine_git.rows.schemas)."""
