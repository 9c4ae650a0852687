"""Temporal activities: sandbox steps and host tools.

``from activities import tool, current_call`` is what a tools module needs.
"""

from .tools import CallContext, ToolOptions, ToolRegistry, ToolSpec, current_call, tool

__all__ = ["CallContext", "ToolOptions", "ToolRegistry", "ToolSpec", "current_call", "tool"]
