"""graphscope's command line (installed as ``graphscope.cli``)."""
