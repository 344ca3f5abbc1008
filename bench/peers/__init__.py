"""Real peers that Ariane's benchmarks measure against (not tests): each fetches and runs here."""

__all__: list[str] = []
