"""The MXNet benchmark backend: a stand-alone program that `dlbs` runs and whose log it reads.

It imports only the standard library, numpy and mxnet, so it runs inside containers and
batch jobs where `dlbs` is not installed. Entry point: `benchmarks.py`; the multi-process
parameter-server launcher for `dist_*` kvstores: `launch_dist.py`.
"""
