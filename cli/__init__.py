"""graphscope's command line (installed as ``graphscope.cli``)."""

if __name__ != "graphscope.cli":  # e.g. `import cli` run from the checkout root
    raise ImportError(f"graphscope's command line is `graphscope.cli`, not `{__name__}`")
