"""JSON Schemas of machine's rows, shipped as package data (rows/schemas.py)."""
