"""sagents: the capability layer of an LLM agent (tools, MCP, Agent Skills, run_script, progress).

See docs/architecture.md for the architecture; the public modules and names are in docs/api.md.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
