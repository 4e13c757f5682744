"""A job's content analysis: its own task before the Map, and the verdict every render reads."""
