"""ONNX Runtime benchmark backend of dlbs (stand-alone: standard library, numpy, onnxruntime).

`benchmarks.py` is the entry point; docs/backends/onnxruntime.md describes it.
"""
