"""Bad input to the reference: each case is a ValueError whose message names the problem."""
import pytest

from flashproof.verified import dense_attention, merge, resolve, summarize, tiled_backward, tiled_forward

Q = [[1.0, 0.0], [0.0, 1.0]]
K = [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]
V = [[1.0], [2.0], [3.0]]
G = [[1.0], [1.0]]
NAN = float("nan")

CASES = [
    # id, callable, expected message fragment
    ("ragged-Q", lambda: tiled_forward([[1.0, 2.0], [1.0]], K, V, scale=1, block=1), "Q is ragged"),
    ("Q-not-matrix", lambda: tiled_forward(3.0, K, V, scale=1, block=1), "Q must be a matrix"),
    ("Q-no-rows", lambda: tiled_forward([], K, V, scale=1, block=1), "at least one row"),
    ("K-width-mismatch", lambda: tiled_forward(Q, [[1.0]] * 3, V, scale=1, block=1), "K must have 2 columns"),
    ("V-rows-mismatch", lambda: tiled_forward(Q, K, V[:2], scale=1, block=1), "V must have 3 rows"),
    ("G-shape", lambda: tiled_backward(Q, K, V, [[1.0, 2.0]] * 2, None, scale=1, block=1), "G must have 1 columns"),
    ("block-zero", lambda: tiled_forward(Q, K, V, scale=1, block=0), "block must be a key-block size b >= 1"),
    ("block-float", lambda: tiled_forward(Q, K, V, scale=1, block=1.5), "block must be an integer"),
    ("block-bool", lambda: tiled_forward(Q, K, V, scale=1, block=True), "block must be an integer"),
    ("empty-row-theorem-mode", lambda: tiled_forward(Q, K, V, scale=1, block=1, allowed=[{0}, set()]),
     "query row 1 has no allowed key"),
    ("empty-row-dense", lambda: dense_attention(Q, K, V, scale=1, allowed=lambda i, j: False),
     "query row 0 has no allowed key"),
    ("allowed-wrong-length", lambda: tiled_forward(Q, K, V, scale=1, block=1, allowed=[{0}]),
     "one key set per query row (2 rows)"),
    ("allowed-index-out-of-range", lambda: tiled_forward(Q, K, V, scale=1, block=1, allowed=[{0}, {3}]),
     "key indices run over 0..2"),
    ("allowed-bad-type", lambda: tiled_forward(Q, K, V, scale=1, block=1, allowed=7), "allowed must be None"),
    ("empty-rows-mode", lambda: tiled_forward(Q, K, V, scale=1, block=1, empty_rows="nan"), "empty_rows must be"),
    ("unknown-number-system", lambda: tiled_forward(Q, K, V, scale=1, block=1, num="decimal"),
     "unknown number system 'decimal'"),
    ("num-bad-type", lambda: resolve(3), "num must be a name or a NumberSystem"),
    ("nan-in-read-entry", lambda: tiled_forward([[NAN, 0.0], [0.0, 1.0]], K, V, scale=1, block=1),
     "Q[0][0] = nan is not finite"),
    ("inf-in-read-value", lambda: tiled_forward(Q, K, [[1.0], [float("inf")], [3.0]], scale=1, block=1),
     "V[1][0] = inf is not finite"),
    ("nan-scale", lambda: tiled_forward(Q, K, V, scale=NAN, block=1), "scale must be finite"),
    ("forward-rows", lambda: tiled_backward(Q, K, V, G, tiled_forward(Q[:1], K, V, scale=1, block=1),
                                            scale=1, block=1), "forward holds 1 rows, expected 2"),
    ("exp-domain-needs-scores", lambda: tiled_forward(Q, K, V, scale=1, block=1, num="fraction"),
     "takes scores as weights"),
]


@pytest.mark.parametrize("build,fragment", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_is_a_clear_value_error(build, fragment):
    with pytest.raises((ValueError, TypeError)) as e:
        build()
    assert fragment in str(e.value)


def test_summaries_do_not_depend_on_a_python_if_on_data():
    """Running summarize/merge on z3 terms works at all only if no Python `if` inspects a value."""
    import z3
    num = resolve("z3")
    w = [z3.Real(f"w{j}") for j in range(3)]
    s = summarize(w, [[z3.Real(f"v{j}")] for j in range(3)], num, allowed=[z3.Bool(f"a{j}") for j in range(3)])
    t = merge(s, s, num)
    assert isinstance(t.l, z3.ArithRef) and isinstance(t.nonempty, z3.BoolRef)
