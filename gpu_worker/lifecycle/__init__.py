"""The worker process's life on its host: one per GPU, taking work only with capacity, seen by its
presence record, protected from scale-in while it works, and stopped warm or cold."""
