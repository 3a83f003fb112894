"""The project as a whole: its layers, its public names and the docs that describe it."""
