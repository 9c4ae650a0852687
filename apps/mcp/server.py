"""The MCP server (official SDK, ``MCPServer``) and its four tools: ``search`` and
``get_schema`` to discover the host tools, ``execute`` to run code against them durably,
``result`` to get the outcome of a run that waited. None of them decides an approval."""

from datetime import timedelta
from importlib.metadata import version
from typing import Annotated

from mcp.server import MCPServer
from mcp.server.auth.provider import TokenVerifier
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.request_state import RequestStateSecurity
from mcp_types import CallToolResult, InputRequiredResult, TextContent, ToolAnnotations
from pydantic import BaseModel, Field

from codemode.apps.mcp import reports
from codemode.apps.mcp.artifacts import artifact_contents
from codemode.apps.mcp.catalog import MAX_CODE_CHARS, ToolCatalog, UnknownTools
from codemode.apps.mcp.execute import BadInput, Executions, TemporalUnavailable
from codemode.apps.mcp.reports import ExecutionReport
from codemode.runtimes import RUNTIMES

#: Results ``search`` returns at most, whatever ``limit`` asks.
SEARCH_LIMIT_MAX = 50
#: How long a question sent back in an ``InputRequiredResult`` stays answerable (its sealed
#: state expires then; the run itself keeps waiting for ``codemode approve``).
QUESTION_TTL = timedelta(days=7)

INSTRUCTIONS = (
    "Durable code mode: write Python that calls host tools, run it with execute. Discover the tools "
    "first: search(query) finds them, get_schema([names]) gives their exact Python stubs. Each "
    "execution is durable (retried, audited); calls that need approval are put to the person, "
    "never to you; a run that waits for a person is finished later with result(execution_id)."
)


class SearchHitModel(BaseModel):
    name: str
    description: str
    #: ``get_weather(city: str) -> dict``
    signature: str


class SearchResult(BaseModel):
    query: str
    #: How many tools the catalog has in all.
    total_tools: int
    tools: list[SearchHitModel]


def build_server(
    catalog: ToolCatalog,
    executions: Executions,
    *,
    name: str = "codemode",
    token_verifier: TokenVerifier | None = None,
    auth: AuthSettings | None = None,
) -> MCPServer:
    server: MCPServer = MCPServer(
        name,
        title="Durable code mode",
        instructions=INSTRUCTIONS,
        version=version("durable-codemode"),
        log_level="WARNING",
        token_verifier=token_verifier,
        auth=auth,
        request_state_security=RequestStateSecurity.ephemeral(ttl=QUESTION_TTL.total_seconds()),
    )
    runtimes = ", ".join(sorted(RUNTIMES))

    async def execute(
        ctx: Context,
        code: Annotated[
            str,
            Field(description=f"Python code to run (at most {MAX_CODE_CHARS:,} characters)."),
        ],
        runtime: Annotated[
            str | None,
            Field(description=f"The sandbox ({runtimes}); default {executions.runtime}."),
        ] = None,
        session: Annotated[
            str | None,
            Field(
                description=(
                    "Run the code as the next cell of this session (letters, digits, '.', '_', '-'): it sees "
                    "the variables, functions and imports earlier cells left. Cells run one at a time, in order."
                )
            ),
        ] = None,
        restart: Annotated[bool, Field(description="With session: clear its namespace before this cell.")] = False,
    ) -> Annotated[CallToolResult, ExecutionReport] | InputRequiredResult:
        try:
            got = await executions.execute(ctx, code, runtime, session, restart)
        except (BadInput, TemporalUnavailable) as err:
            raise ToolError(str(err)) from None
        return await _with_files(_answer(got, executions.ui_url), got, executions)

    async def search(
        query: Annotated[str, Field(description="What the tool should do, in a few words.")],
        limit: Annotated[int, Field(description=f"How many tools to return (1 to {SEARCH_LIMIT_MAX}).")] = 10,
    ) -> SearchResult:
        if limit < 1:
            raise ToolError("limit must be at least 1")
        hits = catalog.index.search(query, min(limit, SEARCH_LIMIT_MAX))
        return SearchResult(
            query=query,
            total_tools=len(catalog),
            tools=[SearchHitModel(name=h.name, description=h.description, signature=h.signature) for h in hits],
        )

    async def get_schema(
        tools: Annotated[list[str], Field(description="Tool names, as search returns them.")],
    ) -> CallToolResult:
        if not tools:
            raise ToolError("name at least one tool; find them with search(query)")
        try:
            stubs = catalog.stubs(tools)
        except UnknownTools as err:
            raise ToolError(str(err)) from None
        return CallToolResult(content=[TextContent(type="text", text=stubs)])

    async def result(
        ctx: Context,
        execution_id: Annotated[str, Field(description="The execution_id execute returned.")],
        wait_seconds: Annotated[
            int,
            Field(
                description=f"How long to wait for the outcome (at most {executions.max_wait:g}); 0 answers at once."
            ),
        ] = 0,
    ) -> Annotated[CallToolResult, ExecutionReport] | InputRequiredResult:
        try:
            got = await executions.result(ctx, execution_id, wait_seconds)
        except (BadInput, TemporalUnavailable) as err:
            raise ToolError(str(err)) from None
        return await _with_files(_answer(got, executions.ui_url), got, executions)

    server.add_tool(
        execute,
        name="execute",
        description=catalog.execute_description(),
        annotations=ToolAnnotations(title="Run Python durably", read_only_hint=False, open_world_hint=True),
    )
    server.add_tool(
        search,
        name="search",
        description="Find host tools the code can call, best matches first: signatures and one-line descriptions.",
        annotations=ToolAnnotations(title="Search tools", read_only_hint=True, open_world_hint=False),
    )
    server.add_tool(
        get_schema,
        name="get_schema",
        description="The Python stubs of the named host tools: exactly what the code is type-checked against.",
        annotations=ToolAnnotations(title="Tool stubs", read_only_hint=True, open_world_hint=False),
    )
    server.add_tool(
        result,
        name="result",
        description="The outcome of an execution that was awaiting_approval or running, in execute's shape.",
        # Not read-only: while it waits, it may put a pending call to the person and record the answer.
        annotations=ToolAnnotations(title="Execution outcome", read_only_hint=False, open_world_hint=False),
    )
    return server


async def _with_files(
    answer: CallToolResult | InputRequiredResult, got: ExecutionReport | InputRequiredResult, executions: Executions
) -> CallToolResult | InputRequiredResult:
    """The answer with the run's artifacts after its text (images, embedded files)."""
    if isinstance(answer, InputRequiredResult) or isinstance(got, InputRequiredResult) or not got.artifacts:
        return answer
    answer.content.extend(await artifact_contents(executions.backend.client, got.execution_id, got.artifacts))
    return answer


def _answer(got: ExecutionReport | InputRequiredResult, ui_url: str | None) -> CallToolResult | InputRequiredResult:
    if isinstance(got, InputRequiredResult):
        return got
    return CallToolResult(
        content=[TextContent(type="text", text=reports.text(got, ui_url=ui_url))],
        structured_content=got.model_dump(mode="json"),
        is_error=got.status in ("failed", "cancelled", "timed_out"),
    )
