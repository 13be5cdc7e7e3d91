"""A function is a stub while it raises NotImplementedError, whatever comments it keeps."""

from __future__ import annotations

from course.contracts.stubs import stubbed_functions

SOURCE = """
def untouched(train):
    # PUT YOUR CODE HERE
    raise NotImplementedError()


def written_below_the_comment(train):
    # PUT YOUR CODE HERE
    return train[:10]


def raise_left_after_the_code(train):
    part = train[:10]
    raise NotImplementedError


def main():
    untouched([])
"""


def test_stubs_are_found_by_their_raise_not_their_comment():
    assert stubbed_functions(SOURCE) == ["untouched", "raise_left_after_the_code"]
    assert stubbed_functions("import chainer\n") == []
