"""Digital twins: robot assets (MJCF), the batched twin, tasks, domain randomisation, physics backends."""
