"""Merging a job: its gate, the join of its segments (or pictures), its audio and its preview."""
