"""Reading and analysing the Chrome traces the backends write (docs/tracing.md).

- `reader`: one trace file, gzip-compressed or not, streamed event by event with a pinned
  streaming JSON parser (ijson), so a trace of hundreds of MB is read in bounded memory;
  a file that is not a Chrome trace raises `TraceError`.
- `events`: the trace's conventions: dlbs's span categories and the frameworks' categories
  of operators, kernels and copies.
- `locate`: the trace of a log, a results database (and an experiment id) or a trace file.
- `views`: the tables of `dlbs trace` (summary, layers, layer_tree, kernels, eventflow,
  duration), each computed in one or two streaming passes.
- `compare`: two traces' tables side by side, with the ratio.

Nothing here prints; `dlbs/cli/trace.py` renders the tables.
"""
