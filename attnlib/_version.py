"""The version of attnlib (shared ground: the cache keys results by it; ``pyproject.toml`` repeats it)."""

__version__ = "0.1.0"
