"""The course's lessons, one folder each: the exercises' observers and checks, the arithmetic the
lesson teaches and its reports (docs/architecture.md)."""
