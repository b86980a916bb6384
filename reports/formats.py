"""The formats a table is printed in (`--format`), declared once. Kept apart from
reports/render.py, which imports pandas, so that the CLI's options can name them at start-up
without making `gprof-orch --help` slow."""

FORMATS = ("table", "csv", "json", "markdown")
