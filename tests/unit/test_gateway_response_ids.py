"""The gateway's response-id map (surfaces.ResponseIds: ``resp_…`` -> the route and backend that made it),
filled through the path relay.py takes (IdSniffer on the reply's first event, then ``remember``): its
memory is bounded by the cap, an entry holds an id and two shared names, and it stays flat past the cap.
The bound written in docs/guide/gateway.md is what this measures (tracemalloc, ~2.2 MiB)."""

from __future__ import annotations

import gc
import json
import tracemalloc
import uuid

from llmdeck.gateway.surfaces import IdSniffer, ResponseIds

ALIAS, URL = "coder", "http://127.0.0.1:8001"  # the route's and backend state's strings, shared


def _created(rid: str) -> bytes:
    """vLLM's first Responses event (``response.created``) as the relay sees it."""
    response = {"id": rid, "created_at": 1, "model": "qwen", "object": "response", "status": "in_progress"}
    data = {"type": "response.created", "response": response, "sequence_number": 0}
    return b"event: response.created\ndata: " + json.dumps(data).encode() + b"\n\n"


def _fill(ids: ResponseIds, n: int) -> tuple[str, str]:
    """``n`` ids remembered; the first and the last (no list of them: it would be measured too)."""
    first = rid = ""
    for i in range(n):
        rid = f"resp_{uuid.uuid4().int & (2**64 - 1):016x}"  # vLLM 0.32's id: 16 hex digits
        sniffer = IdSniffer()
        sniffer.feed(_created(rid))
        assert sniffer.rid == rid
        ids.remember(sniffer.rid, ALIAS, URL)
        first = first if i else rid
    return first, rid


def test_the_map_holds_the_newest_ids_in_bounded_memory() -> None:
    """10,000 ids take ~1.9 MiB (~190 bytes each: the id, a tuple of the two shared names, the ordered
    dict's slot); another 20,000 past the cap leave it at ~2.2 MiB (the table's free slots), not more."""
    ids = ResponseIds()
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        oldest, _ = _fill(ids, ids.limit)
        gc.collect()
        at_cap = tracemalloc.get_traced_memory()[0] - base
        _, newest = _fill(ids, 2 * ids.limit)
        gc.collect()
        after = tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()
    assert ids.limit == 10000
    assert at_cap / ids.limit < 300, at_cap  # bytes an entry: no body, no buffer kept
    assert after < 2.5 * 2**20, after
    assert ids.get(oldest) is None and len(ids._ids) == ids.limit
    alias, url = ids.get(newest) or ("", "")
    assert alias is ALIAS and url is URL  # shared, not copied per entry
