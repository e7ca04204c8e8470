"""``python -m shuffledp``: the same command line as the ``shuffledp`` console script."""

from .cli import main

main()
