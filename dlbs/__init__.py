"""dlbs: a deep-learning benchmarking suite."""

# The one place the version is written: pyproject.toml reads it from here. A constant, not
# importlib.metadata, which costs every command about 20 ms of start-up (every run writes
# the version into its logs).
__version__ = "0.1.0"
