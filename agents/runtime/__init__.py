"""The agent runtime: plain Python, no database; the models and tasks wrap it."""
