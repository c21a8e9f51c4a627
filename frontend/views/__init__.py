"""Server-rendered pages, one module per area (pages, work, review, …)."""
