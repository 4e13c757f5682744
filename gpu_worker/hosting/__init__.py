"""Hosting an engine: the engine runs in a child process the worker supervises."""
