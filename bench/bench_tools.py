"""Tools for the Temporal benchmarks: as cheap as a tool can be."""


async def noop(i: int) -> int:
    return i
