"""annotate-trace (annotate_trace.py): annotations joined onto traces graphscope did not record.
DOT and Perfetto output are in graphscope/render/."""
