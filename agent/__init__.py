"""Edge text-to-speech deployment agent."""

__all__ = ["__version__"]

__version__ = "0.1.0"
