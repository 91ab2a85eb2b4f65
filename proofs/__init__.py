"""flashproof.proofs"""
