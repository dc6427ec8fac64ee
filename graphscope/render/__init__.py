"""Output formatting only: terminal tables (table.py), HTML (html.py + templates/), DOT (dot.py),
Perfetto/Chrome trace JSON (perfetto.py), JUnit XML (junit.py), shared formatting (fmt.py).
Renderers import the model, analysis and fmt, never each other. Nothing is imported here:
capture imports fmt without loading any renderer."""
