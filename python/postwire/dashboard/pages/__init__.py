"""One module a page (or a small family of pages): each exposes `routes(ctx) -> Blueprint`."""
