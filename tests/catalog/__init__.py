"""Collections as data: the loaders, the shipped definitions and a collection declared outside the
project."""
