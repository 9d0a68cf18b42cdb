"""ha-bot: what a model change costs on the hardware you ship to."""

from __future__ import annotations

__version__ = "0.1.0"
