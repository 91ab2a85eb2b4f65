"""flashproof.fuzz — differential fuzzing of attention kernels against the verified oracle."""
