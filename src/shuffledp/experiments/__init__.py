"""Reproductions of the source documents' experiments, data generators and plots."""
