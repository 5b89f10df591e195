"""(being written)"""

ALIASES = {}
