from __future__ import annotations

from ha_bot.main import entry

entry()
