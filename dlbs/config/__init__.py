"""Loading, merging and evaluating experiment specs: pure functions, no I/O beyond reading files."""
