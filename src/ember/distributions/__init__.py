"""Probability distributions, as ``torch.distributions``: parameterizable families with
sampling (``rsample`` where reparameterizable), ``log_prob``, moments and entropy,
constraints on parameters and supports, bijective transforms, and ``kl_divergence``.

Every distribution is written with ember ops, so its log-densities and reparameterized
samples are differentiable and run on any device.
"""

# ruff: noqa: F405  (__all__ names what the star imports below bring in)

from ember.distributions import constraints, transforms
from ember.distributions.distribution import *                  # noqa: F401,F403
from ember.distributions.exp_family import *                    # noqa: F401,F403
from ember.distributions.kl import *                            # noqa: F401,F403
from ember.distributions.normal import *                        # noqa: F401,F403
from ember.distributions.uniform import *                       # noqa: F401,F403
from ember.distributions.transforms import *                    # noqa: F401,F403
from ember.distributions.constraint_registry import *           # noqa: F401,F403
from ember.distributions.transformed_distribution import *      # noqa: F401,F403
from ember.distributions.independent import *                   # noqa: F401,F403
from ember.distributions.mixture_same_family import *           # noqa: F401,F403
from ember.distributions.exponential import *                   # noqa: F401,F403
from ember.distributions.cauchy import *                        # noqa: F401,F403
from ember.distributions.laplace import *                       # noqa: F401,F403
from ember.distributions.gumbel import *                        # noqa: F401,F403
from ember.distributions.log_normal import *                    # noqa: F401,F403
from ember.distributions.half_normal import *                   # noqa: F401,F403
from ember.distributions.half_cauchy import *                   # noqa: F401,F403
from ember.distributions.weibull import *                       # noqa: F401,F403
from ember.distributions.pareto import *                        # noqa: F401,F403
from ember.distributions.kumaraswamy import *                   # noqa: F401,F403
from ember.distributions.logistic_normal import *               # noqa: F401,F403
from ember.distributions.generalized_pareto import *            # noqa: F401,F403
from ember.distributions.gamma import *                         # noqa: F401,F403
from ember.distributions.chi2 import *                          # noqa: F401,F403
from ember.distributions.beta import *                          # noqa: F401,F403
from ember.distributions.dirichlet import *                     # noqa: F401,F403
from ember.distributions.studentT import *                      # noqa: F401,F403
from ember.distributions.fishersnedecor import *                # noqa: F401,F403
from ember.distributions.inverse_gamma import *                 # noqa: F401,F403
from ember.distributions.von_mises import *                     # noqa: F401,F403
from ember.distributions.continuous_bernoulli import *          # noqa: F401,F403
from ember.distributions.bernoulli import *                     # noqa: F401,F403
from ember.distributions.binomial import *                      # noqa: F401,F403
from ember.distributions.categorical import *                   # noqa: F401,F403
from ember.distributions.one_hot_categorical import *           # noqa: F401,F403
from ember.distributions.geometric import *                     # noqa: F401,F403
from ember.distributions.multinomial import *                   # noqa: F401,F403
from ember.distributions.negative_binomial import *             # noqa: F401,F403
from ember.distributions.poisson import *                       # noqa: F401,F403
from ember.distributions.relaxed_bernoulli import *             # noqa: F401,F403
from ember.distributions.relaxed_categorical import *           # noqa: F401,F403
from ember.distributions.multivariate_normal import *           # noqa: F401,F403
from ember.distributions.lowrank_multivariate_normal import *   # noqa: F401,F403
from ember.distributions.wishart import *                       # noqa: F401,F403
from ember.distributions.lkj_cholesky import *                  # noqa: F401,F403
from ember.distributions import (_kl_discrete, _kl_gamma, _kl_location_scale,  # noqa: F401
                                 _kl_multivariate, _kl_transformed)

__all__ = [
    "Bernoulli", "Beta", "Binomial", "Categorical", "Cauchy", "Chi2", "ContinuousBernoulli",
    "Dirichlet", "Distribution", "Exponential", "ExponentialFamily", "FisherSnedecor", "Gamma",
    "GeneralizedPareto", "Geometric", "Gumbel", "HalfCauchy", "HalfNormal", "Independent",
    "InverseGamma", "Kumaraswamy", "LKJCholesky", "Laplace", "LogNormal", "LogisticNormal",
    "LowRankMultivariateNormal", "MixtureSameFamily", "Multinomial", "MultivariateNormal",
    "NegativeBinomial", "Normal", "OneHotCategorical", "OneHotCategoricalStraightThrough",
    "Pareto", "RelaxedBernoulli", "RelaxedOneHotCategorical", "StudentT", "Poisson", "Uniform",
    "VonMises", "Weibull", "Wishart", "TransformedDistribution", "biject_to", "kl_divergence",
    "register_kl", "transform_to", *transforms.__all__,
]
