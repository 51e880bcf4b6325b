"""Small helpers shared by several stages."""
