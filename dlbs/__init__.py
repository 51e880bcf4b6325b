"""dlbs: a deep-learning benchmarking suite."""


def __getattr__(name: str) -> str:
    # `__version__` is read when asked for: importing importlib.metadata costs every command
    # about 20 ms of start-up, most of the time of `dlbs report --help`.
    if name != "__version__":
        raise AttributeError(f"module 'dlbs' has no attribute {name!r}")
    from importlib.metadata import PackageNotFoundError, version

    try:
        found = version("dlbs")
    except PackageNotFoundError:  # running from a checkout that was never installed
        found = "0.0.0+checkout"
    globals()["__version__"] = found
    return found
