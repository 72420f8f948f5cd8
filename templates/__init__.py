"""Templates machine renders (Tinker scripts, agent extensions): package data."""
