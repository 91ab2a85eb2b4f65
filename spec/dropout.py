"""The theorem page's dropout remark, made a theorem of ours (EXT-DROPOUT)."""
from .attention import OURS, PAGE
from .registry import item

item("EXT-DROPOUT", "extension", "Dropout replays its realised mask: the reverse pass is the exact gradient",
     source=PAGE, provenance=OURS, uses=("ALG-TILED", "THM-EXACT"), statement="""
The page's reverse procedure remarks that the base algorithm has no dropout and that a dropout extension must
replay the same realised mask in its reverse pass. We state it as a theorem: given keep bits M_ij in {0, 1}
(keep probability 1 − p, kept entries scaled by 1/(1 − p)), let Y_i = Σ_{j∈A_i} (M_ij/(1 − p)) P_ij V_j with P
the undropped masked softmax. The tiled forward that weights each key's value row by M_ij/(1 − p) returns this
Y, with row statistics m, ℓ, lse of the undropped softmax; the reverse procedure run with the SAME M, with
dP_ij = (M_ij/(1 − p))⟨G_i, V_j⟩, dV_j += (M_ij/(1 − p)) p_ij G_i and δ_i = ⟨G_i, Y_i⟩ (the row sum of G ∘ Y,
dropped-out Y), returns the exact gradients of Φ = Σ G ∘ Y with respect to Q, K, V. A mask drawn afresh for
the reverse pass, or kept entries left unscaled, gives wrong gradients (the obligation's controls). Checked
at bounded sizes for every mask and every p (both symbolic).
""",
     checked_by=("ATT-DROPOUT",), assumptions=("A-NONEMPTY-ROW",))
