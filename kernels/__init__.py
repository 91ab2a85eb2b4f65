"""flashproof.kernels"""
