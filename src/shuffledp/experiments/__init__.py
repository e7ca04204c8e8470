"""Reproductions of the source documents' experiments: tables, figures and their data."""
