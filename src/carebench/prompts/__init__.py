"""Prompt templates of the core and the support suite (package data, ``*.txt``)."""
