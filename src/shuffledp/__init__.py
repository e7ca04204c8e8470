"""shuffledp: differential privacy in the Encode-Shuffle-Analyze (ESA) framework.

Layers (data flows one way): ``core`` -> ``local`` / ``central`` -> ``shuffle`` ->
``accounting`` -> ``pipeline`` -> ``service`` / ``experiments`` / ``cli``.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
