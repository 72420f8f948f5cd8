"""Git hooks machine installs in stores and clones, shipped as package data."""
