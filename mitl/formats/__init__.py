"""File readers of the platform's inputs, Django-free: captions, positives, instances, JSON."""
