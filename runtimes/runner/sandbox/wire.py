"""JSON on the protocol channel, on the ``_json`` C accelerators (``json`` costs start-up time)."""

from __future__ import annotations


def _jsonable(obj):
    """``json.dumps`` fallback: values a tool call or the output may hold that JSON lacks."""
    if isinstance(obj, (set, frozenset)):
        try:
            return sorted(obj)
        except TypeError:
            return list(obj)
    if isinstance(obj, (bytes, bytearray)):
        return bytes(obj).decode("utf-8", "replace")
    if hasattr(obj, "isoformat"):
        return obj.isoformat()
    if hasattr(obj, "model_dump"):
        return obj.model_dump(mode="json")
    if hasattr(obj, "__dataclass_fields__"):
        import dataclasses

        return dataclasses.asdict(obj)
    if hasattr(obj, "tolist"):
        return obj.tolist()
    return repr(obj)


def _make_json():
    """(loads, dumps) on the ``_json`` C accelerators, checked on a sample; the ``json``
    package when they are missing or differ."""
    try:
        import _json

        class Context:
            strict = True
            object_hook = None
            object_pairs_hook = None
            parse_float = float
            parse_int = int
            parse_constant = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}.__getitem__

        scan = _json.make_scanner(Context())
        make_encoder = _json.make_encoder
        ascii_str = _json.encode_basestring_ascii

        def loads(data):
            text = (data.decode("utf-8") if isinstance(data, (bytes, bytearray)) else data).strip()
            try:
                obj, end = scan(text, 0)
            except Exception:
                raise ValueError("invalid JSON") from None
            if end != len(text):
                raise ValueError("extra data after JSON")
            return obj

        def dumps(obj) -> str:
            encode = make_encoder({}, _jsonable, ascii_str, None, ":", ",", False, False, True)
            return "".join(encode(obj, 0))

        sample = {"a": [1, 2.5, "\u00e9\n", None, True, False], "b": {"c": -3}}
        if loads(dumps(sample)) != sample or dumps({1: {2}}) != '{"1":[2]}':
            raise ValueError("unexpected _json behaviour")
        return loads, dumps
    except Exception:  # pragma: no cover - other interpreters
        import json

        return json.loads, lambda obj: json.dumps(obj, default=_jsonable, separators=(",", ":"))


_loads, _dumps_str = _make_json()


def _dumps(msg) -> bytes:
    return _dumps_str(msg).encode()
