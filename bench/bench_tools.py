"""Tools for the Temporal benchmarks: as cheap as a tool can be."""


async def noop(i: int) -> int:
    return i


async def echo(text: str) -> str:
    """Returns its argument: a call that carries a payload both ways."""
    return text
