"""Deep dive: the gradient exchange up close: parameter server, overlap, half precision, and when
the exchange dominates the step."""
