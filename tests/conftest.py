"""Root test configuration: stdlib and pytest only (GPU hosts run a subset with few packages)."""
