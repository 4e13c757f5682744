"""Rendering a segment: its sources, the job's content verdict and its frames in, the decode → engine → encode
pipeline with its checks and checkpoints, and the winner rule when two copies render it."""
