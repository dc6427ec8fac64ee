"""Reports: aggregate a Bundle (summary.py) and format it (table.py). No torch."""
