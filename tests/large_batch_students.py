"""The students' functions the large-batch checks' tests (tests/test_large_batch_checks.py) run:
notebook 05's solutions, planted mistakes and attacks. Module-level defs, as a notebook's are: a
Remote handle runs them by name.
"""

from __future__ import annotations

import math

from tests.model_parallel_students import SOLVED

# --- planted mistakes: each a student's slip the check names ----------------------------------


def ratio_upside_down(base_lr, base_batch, batch):
    return SOLVED.large_batch_rates(base_lr, batch, base_batch)


def root_of_the_rate(base_lr, base_batch, batch):
    return base_lr * batch / base_batch, math.sqrt(base_lr * batch / base_batch)


def root_of_the_batch(base_lr, base_batch, batch):
    return base_lr * batch / base_batch, base_lr * math.sqrt(batch)


def swapped(base_lr, base_batch, batch):
    linear, root = SOLVED.large_batch_rates(base_lr, base_batch, batch)
    return root, linear


def rounded_down(base_lr, base_batch, batch):
    return SOLVED.large_batch_rates(base_lr, 1, batch // base_batch)


def trust_inverted(weight_norm, grad_norm, weight_decay, threshold, eps):
    if weight_norm <= threshold:
        return 1.0
    return (eps + grad_norm + weight_decay * weight_norm) / weight_norm


def threshold_ignored(weight_norm, grad_norm, weight_decay, threshold, eps):
    return weight_norm / (eps + grad_norm + weight_decay * weight_norm)


def threshold_reversed(weight_norm, grad_norm, weight_decay, threshold, eps):
    if weight_norm > threshold:
        return 1.0
    return weight_norm / (eps + grad_norm + weight_decay * weight_norm)


def threshold_inclusive(weight_norm, grad_norm, weight_decay, threshold, eps):
    if weight_norm < threshold:
        return 1.0
    return weight_norm / (eps + grad_norm + weight_decay * weight_norm)


def decay_left_out(weight_norm, grad_norm, weight_decay, threshold, eps):
    return SOLVED.lars_local_rate(weight_norm, grad_norm, 0.0, threshold, eps)


def decay_on_the_gradient(weight_norm, grad_norm, weight_decay, threshold, eps):
    if weight_norm <= threshold:
        return 1.0
    return weight_norm / (eps + grad_norm + weight_decay * grad_norm)


def one_rate(base_lr, base_batch, batch):
    return base_lr * batch / base_batch


def text_rate(weight_norm, grad_norm, weight_decay, threshold, eps):
    return str(SOLVED.lars_local_rate(weight_norm, grad_norm, weight_decay, threshold, eps))


def stub_rates(base_lr, base_batch, batch):
    raise NotImplementedError()


# --- attacks: handing the work to the kit, knowing only the listed cases -----------------------


def kit_rates(base_lr, base_batch, batch):
    from course.runtime import largebatch

    return largebatch.large_batch_rates(base_lr, base_batch, batch)


def kit_lars(weight_norm, grad_norm, weight_decay, threshold, eps):
    import course.runtime.largebatch

    return course.runtime.largebatch.lars_local_rate(
        weight_norm, grad_norm, weight_decay, threshold, eps
    )


LISTED = {(0.1, 256, 8192): (3.2, 0.5656854249492381), (0.05, 64, 256): (0.2, 0.1)}


def listed_rates(base_lr, base_batch, batch):
    return LISTED.get((base_lr, base_batch, batch), (base_lr, base_lr))
