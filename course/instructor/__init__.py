"""What the instructor runs: the student release, autograding with nbgrader and its scores, the
demo."""
