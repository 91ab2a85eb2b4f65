"""flashproof.kernels.kvcache: attention of new queries over a contiguous or paged KV cache
(decode, speculative verification), split-KV with the proved merge. See docs/kvcache.md."""
from .api import KVCacheOut, attention_with_kvcache  # noqa: F401
