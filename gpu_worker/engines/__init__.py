"""Engines: what turns a segment's frames into output frames (FaceFusion, classic, copy), by name, and the pool
that loads each once per worker process."""
