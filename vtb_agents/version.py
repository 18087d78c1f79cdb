"""The package's version, in a module of its own (standard library only).

Modules that record it (``run.json``, LangSmith metadata) import it from here, not from the
package root, whose lazy Python API would otherwise put ``api`` under every layer that imports it.
"""

__version__ = "0.1.0"
