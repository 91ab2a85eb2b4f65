"""flashproof.spec"""
