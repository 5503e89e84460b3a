"""LIBERO-PRO evaluation at scale: grids of episodes, parallel workers, resumable results, reports."""
