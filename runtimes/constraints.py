"""What Python a runtime accepts, as flags the prompt builder branches on (seed 000, step 4).

Defaults are True (full CPython): only restricted runtimes override them. Monty's values
are measured by ``tests/runtimes/test_monty_constraints.py`` against the installed Monty,
not copied from documentation.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pydantic import BaseModel, ConfigDict

from . import artifacts
from .signatures import ToolSignature, render_stubs


class CodeConstraints(BaseModel):
    model_config = ConfigDict(frozen=True)

    supports_imports: bool = True
    #: When imports are limited to some modules, which ones (None = any stdlib module).
    importable_modules: tuple[str, ...] | None = None
    supports_third_party_packages: bool = True
    supports_while_loops: bool = True
    supports_comprehensions: bool = True
    supports_lambdas: bool = True
    supports_fstrings: bool = True
    supports_try_except: bool = True
    supports_classes: bool = True
    supports_class_inheritance: bool = True
    supports_generators: bool = True
    supports_del: bool = True
    supports_match: bool = True
    supports_async: bool = True
    supports_filesystem: bool = True
    additional_instructions: str = ""


FULL_PYTHON = CodeConstraints()


def build_code_mode_prompt(
    signatures: Mapping[str, ToolSignature] | Sequence[ToolSignature],
    constraints: CodeConstraints = FULL_PYTHON,
) -> str:
    """The system-prompt section that tells a model how to write code for this sandbox."""
    c = constraints
    lines = [
        "Write Python code to accomplish the task. Call the functions below directly; each call",
        "runs a real tool on the host and returns its result. The value of the last expression",
        "is the result of the code; print() output is captured and shown too.",
        "A tool that fails raises an exception of the same type with the same message: catch it",
        "with try/except to recover.",
    ]
    sigs = list(signatures.values()) if isinstance(signatures, Mapping) else list(signatures)
    if not any(s.name == artifacts.SAVE_ARTIFACT for s in sigs):
        sigs.append(artifacts.SIGNATURE)  # built in: every runtime serves it
    if any(s.is_async for s in sigs) and c.supports_async:
        lines.append(
            "Functions declared `async def` must be awaited; run independent calls concurrently with"
            " `await asyncio.gather(...)` (top-level await is allowed)."
        )
    rules: list[str] = []
    if not c.supports_imports:
        rules.append("No imports.")
    elif c.importable_modules is not None:
        rules.append("Only these modules can be imported: " + ", ".join(c.importable_modules) + ".")
    if c.supports_imports and not c.supports_third_party_packages:
        rules.append("No third-party packages (only the standard library modules above).")
    if not c.supports_while_loops:
        rules.append("No while loops: use for loops over range() instead.")
    if not c.supports_comprehensions:
        rules.append("No comprehensions: build lists with a for loop and append().")
    if not c.supports_lambdas:
        rules.append("No lambda expressions: define a function with def.")
    if not c.supports_fstrings:
        rules.append("No f-strings: use str() and concatenation.")
    if not c.supports_try_except:
        rules.append("No try/except.")
    if not c.supports_classes:
        rules.append("No class definitions: use dicts.")
    elif not c.supports_class_inheritance:
        rules.append("Classes cannot inherit from other classes (no base classes, no metaclasses).")
    if not c.supports_generators:
        rules.append("No generator functions (no yield); return lists instead.")
    if not c.supports_del:
        rules.append("No del statement: reassign or use dict.pop().")
    if not c.supports_match:
        rules.append("No match statements.")
    if not c.supports_async:
        rules.append("No async/await.")
    if not c.supports_filesystem:
        rules.append("No file access (open() is denied): get data through the functions below.")
    parts = ["\n".join(lines)]
    if rules:
        parts.append("Restrictions of this sandbox:\n" + "\n".join(f"- {r}" for r in rules))
    else:
        parts.append("The sandbox runs full Python (CPython) with its standard library.")
    if c.additional_instructions.strip():
        parts.append(c.additional_instructions.strip())
    parts.append(artifacts.prompt_text(filesystem=c.supports_filesystem))
    parts.append("Available functions:\n```python\n" + render_stubs(sigs).strip() + "\n```")
    return "\n\n".join(parts) + "\n"
