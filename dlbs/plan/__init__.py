"""Sweep expansion, extensions, resolution and validation; returns plain data."""
