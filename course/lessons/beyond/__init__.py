"""Deep dive: beyond data parallelism: a network split over ranks, its bytes and its idle time,
against data parallelism."""
