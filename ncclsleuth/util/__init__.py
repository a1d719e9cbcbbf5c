"""Helpers every stage may use: the per-user cache folder and its files, the gc pause."""
