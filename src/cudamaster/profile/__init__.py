"""Profile filter: Nsight Compute metrics, Otsu-calibrated bottleneck classes, summaries."""
