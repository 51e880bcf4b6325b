"""What every dlbs backend shares for inference evaluation (docs/evaluation.md).

A stand-alone package beside the backends (``python/benchmark_common``): the standard library,
plus numpy, Pillow and MLCommons LoadGen (``mlperf_loadgen``) where a module says so, and
imported only when a run needs it. It never imports ``dlbs`` or a framework: each backend
adapts its framework to the small interface in ``system.py``, and this package drives it.

- ``options``: the evaluation flags every backend accepts (docs/backends/protocol.md section 1).
- ``harness``: runs an MLPerf scenario with LoadGen, the backend being the system under test
  and the query sample library; ``loadgen_log`` reads LoadGen's own measurements back.
- ``datasets``, ``preprocess``, ``caffe_datum``: the samples of an image folder, a Caffe LMDB
  or a RecordIO file, and the one preprocessing of the backends.
- ``accuracy``, ``predict``: top-k over a dataset, and the classes of single images.
"""
