"""The loss functions of ember.nn.functional. The ops and compositions live in loss_*.py and
ctc.py by family; this module gathers their tables.

PyTorch also exposes some losses at the top level (``torch.kl_div``), taking the reduction as
its enum (0 none, 1 mean, 2 sum) and without the deprecated size_average/reduce arguments.
Called without one, those parse their reduction as 0 ('none'), unlike their documented
default: ember's do the same.
"""

from ember.ops import ctc, loss_bce, loss_ce, loss_kernels, loss_linear_ce, loss_margin  # noqa: F401
from ember.ops import loss_pointwise  # noqa: F401
from ember.ops._loss_common import reduce_loss, reduction_name
from ember.ops.loss_margin import (cosine_embedding_loss, hinge_embedding_loss,
                                   margin_ranking_loss, multi_margin_loss, multilabel_margin_loss,
                                   multilabel_soft_margin_loss, triplet_margin_loss,
                                   triplet_margin_with_distance_loss)
from ember.ops.loss_pointwise import (binary_cross_entropy_with_logits, gaussian_nll_loss,
                                      huber_loss, kl_div, l1_loss, mse_loss, poisson_nll_loss,
                                      smooth_l1_loss, soft_margin_loss)

FUNCTIONAL = {
    "l1_loss": l1_loss, "mse_loss": mse_loss, "huber_loss": huber_loss,
    "smooth_l1_loss": smooth_l1_loss, "soft_margin_loss": soft_margin_loss,
    "binary_cross_entropy_with_logits": binary_cross_entropy_with_logits, "kl_div": kl_div,
    "poisson_nll_loss": poisson_nll_loss, "gaussian_nll_loss": gaussian_nll_loss,
    "margin_ranking_loss": margin_ranking_loss, "hinge_embedding_loss": hinge_embedding_loss,
    "cosine_embedding_loss": cosine_embedding_loss, "multi_margin_loss": multi_margin_loss,
    "multilabel_margin_loss": multilabel_margin_loss,
    "multilabel_soft_margin_loss": multilabel_soft_margin_loss,
    "triplet_margin_loss": triplet_margin_loss,
    "triplet_margin_with_distance_loss": triplet_margin_with_distance_loss,
    "ctc_loss": ctc.functional_ctc_loss,
    "cross_entropy": "nn.functional.cross_entropy",
    "nll_loss": "nn.functional.nll_loss",
    "binary_cross_entropy": "nn.functional.binary_cross_entropy",
    **loss_linear_ce.FUNCTIONAL,
}


def _top_level(name, fn):
    fn.__name__ = fn.__qualname__ = name
    fn.__module__ = "ember"
    fn.__doc__ = f"``nn.functional.{name}`` with the reduction as PyTorch's enum."
    return fn


PUBLIC = {name: _top_level(name, fn) for name, fn in {
    "binary_cross_entropy_with_logits":
        lambda input, target, weight=None, pos_weight=None, reduction=0:
        binary_cross_entropy_with_logits(input, target, weight, reduction=reduction_name(
            reduction), pos_weight=pos_weight),
    "kl_div": lambda input, target, reduction=0, *, log_target=False: reduce_loss(
        kl_div(input, target, reduction="none", log_target=log_target),
        reduction_name(reduction)),
    "hinge_embedding_loss": lambda input, target, margin=1.0, reduction=0: hinge_embedding_loss(
        input, target, margin, reduction=reduction_name(reduction)),
    "margin_ranking_loss": lambda input1, input2, target, margin=0.0, reduction=0:
        margin_ranking_loss(input1, input2, target, margin,
                            reduction=reduction_name(reduction)),
    "cosine_embedding_loss": lambda input1, input2, target, margin=0.0, reduction=0:
        cosine_embedding_loss(input1, input2, target, margin,
                              reduction=reduction_name(reduction)),
    "triplet_margin_loss": lambda anchor, positive, negative, margin=1.0, p=2.0, eps=1e-6,
        swap=False, reduction=0: triplet_margin_loss(
            anchor, positive, negative, margin, p, eps, swap,
            reduction=reduction_name(reduction)),
    "poisson_nll_loss": lambda input, target, log_input, full, eps, reduction: poisson_nll_loss(
        input, target, log_input, full, eps=eps, reduction=reduction_name(reduction)),
}.items()}
