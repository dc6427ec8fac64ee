"""graphscope's command line (installed as ``graphscope.cli``)."""

if __name__ != "graphscope.cli":  # the checkout root is on sys.path in an editable install
    raise ImportError(f"graphscope's command line is `graphscope.cli`, not `{__name__}`")
