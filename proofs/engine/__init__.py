"""The proof engine: the obligation API (``core``), discovery (``discover``), the runner, the
result cache, the trail, derived status and ``flashproof prove`` (``cli``)."""
