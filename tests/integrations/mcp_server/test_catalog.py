"""What the model is shown, without a server: the ``execute`` description stays bounded
however many tools there are, ``search`` ranks with BM25, ``get_schema`` names close
matches; and the HTTP guards (tokens, Origin, Host) on their own."""

from __future__ import annotations

import pytest

from codemode.apps.mcp.catalog import STUBS_IN_DESCRIPTION_MAX, ToolCatalog, UnknownTools
from codemode.apps.mcp.http import BearerToken, OriginGuard, StaticTokens, is_loopback
from codemode.apps.mcp.search import one_line, tokens
from tests.integrations.mcp_server.catalogs import generated_signatures


def test_description_lists_stubs_up_to_the_threshold_then_points_at_search() -> None:
    small = ToolCatalog(generated_signatures(STUBS_IN_DESCRIPTION_MAX)).execute_description()
    # (and save_artifact, which every execution has built in)
    assert small.count("\ndef ") == STUBS_IN_DESCRIPTION_MAX + 1 and "Available functions:" in small
    sizes = {}
    for n in (STUBS_IN_DESCRIPTION_MAX + 1, 100, 1000, 5000):
        text = ToolCatalog(generated_signatures(n)).execute_description()
        assert f"There are {n} host tools" in text and "search(query)" in text and "get_schema" in text
        assert "def " not in text and "below" not in text  # no stub, and nothing points at missing ones
        assert "Only these modules can be imported" in text  # the runtime's rules stay
        sizes[n] = len(text.encode())
    assert max(sizes.values()) <= 2048
    assert max(sizes.values()) - min(sizes.values()) <= 3  # only the number's digits change


def test_search_ranks_names_descriptions_and_parameters() -> None:
    catalog = ToolCatalog(generated_signatures(300))
    assert [h.name for h in catalog.index.search("export invoices as csv", 3)][0] == "export_invoice"
    assert catalog.index.search("carrier", 12)[0].name.endswith("_shipment")  # a parameter name
    hit = catalog.index.search("restore archived server", 1)[0]
    assert hit.name == "restore_server"
    assert hit.signature == "restore_server(server_id: str, region: str = ..., note: str = '') -> dict[str, Any]"
    assert hit.description == "Restore an archived a cloud server."
    assert catalog.index.search("zzz qqq") == []
    assert catalog.index.search("") == []


def test_get_schema_stubs_and_close_matches() -> None:
    catalog = ToolCatalog(generated_signatures(300))
    stubs = catalog.stubs(["get_order", "get_order", "list_order"])
    assert stubs.count("def get_order(") == 1 and "def list_order(" in stubs
    assert stubs.startswith("from typing import Any, Literal")
    with pytest.raises(UnknownTools) as err:
        catalog.stubs(["get_ordr", "invoice"])
    assert err.value.suggestions["get_ordr"][0] == "get_order"
    assert all(name.endswith("invoice") for name in err.value.suggestions["invoice"])
    assert "did you mean get_order" in str(err.value)


def test_words() -> None:
    assert tokens("getWeatherForecasts for_3 cities") == ["get", "weather", "forecast", "for", "3", "city"]
    assert tokens("HTTPServer address") == ["http", "server", "address"]
    assert one_line("First sentence. Second one.\n\nMore.") == "First sentence."
    assert len(one_line("x" * 500)) == 160


async def test_tokens_and_their_holders() -> None:
    assert BearerToken.parse("ana:" + "s" * 20) == BearerToken("s" * 20, "ana")
    assert BearerToken.parse("t" * 24) == BearerToken("t" * 24, None)
    assert BearerToken.parse("ab:cd" + "e" * 20).subject == "ab"
    with pytest.raises(ValueError, match="at least 16"):
        BearerToken.parse("ana:short")
    verifier = StaticTokens([BearerToken("s" * 20, "ana"), BearerToken("t" * 24)])
    ana = await verifier.verify_token("s" * 20)
    assert ana is not None and ana.subject == "ana"
    anonymous = await verifier.verify_token("t" * 24)
    assert anonymous is not None and anonymous.subject is None
    assert await verifier.verify_token("s" * 19) is None


def test_origin_and_host_rules() -> None:
    local = OriginGuard(app=None, host="127.0.0.1", allow_origins=["https://app.example.com"])  # type: ignore[arg-type]
    assert local.origin_allowed("http://localhost:6274") and local.origin_allowed("http://127.0.0.1")
    assert local.origin_allowed("https://app.example.com")
    assert not local.origin_allowed("http://evil.example.com") and not local.origin_allowed("http://localhost.evil.com")
    assert not local.origin_allowed("https://localhost:1")  # scheme counts
    assert local.host_allowed("127.0.0.1:8765") and local.host_allowed("[::1]:8765") and local.host_allowed("localhost")
    assert not local.host_allowed("evil.example.com:8765") and not local.host_allowed(None)
    named = OriginGuard(app=None, host="10.0.0.5", allow_origins=[])  # type: ignore[arg-type]
    assert named.host_allowed("10.0.0.5:8765") and named.origin_allowed("http://10.0.0.5:8765")
    anywhere = OriginGuard(app=None, host="0.0.0.0", allow_origins=[])  # type: ignore[arg-type]
    assert anywhere.host_allowed("whatever:1") and not anywhere.origin_allowed("http://evil.example.com")
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("10.0.0.5")
