"""Limits of the code tools' calls (standard library only: ``vtb sandbox exec`` checks them without
importing LangChain)."""

MAX_CODE_CHARS = 5_000
"""Longest code a call may carry (VTB's limit for the vision tool)."""
