"""The PyTorch benchmark backend of dlbs.

A stand-alone program (``benchmarks.py``) that imports only the standard library, numpy,
torch, torchvision and Pillow (plus ``lmdb`` for Caffe LMDB datasets). It never imports
``dlbs``: it runs inside containers and batch jobs where only the framework is installed.
"""
