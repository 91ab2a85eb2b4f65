"""A user's kernel in the (B, N, H, D) layout of flash-attn's dense API: correct when fuzzed with
``--layout bnhd`` (its LSE is (B, H, Nq), as flash-attn returns it)."""
import correct


def attention(q, k, v, *, causal=False, scale=None, enable_gqa=False, return_lse=False):
    """q (B, Nq, Hq, D), k (B, Nk, Hkv, D), v (B, Nk, Hkv, Dv) -> out (B, Nq, Hq, Dv)[, lse (B, Hq, Nq)]."""
    r = correct.attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), causal=causal, scale=scale,
                          enable_gqa=enable_gqa, return_lse=True)
    out = r[0].transpose(1, 2)
    return (out, r[1]) if return_lse else out
