"""A job: manifest, identity, engine options and decisions, plan and encoding, runs, timeouts, state, loss."""
