"""VonMises: the circular normal distribution with mean direction ``loc`` and
``concentration`` kappa."""

import math

import ember
from ember.distributions import constraints
from ember.distributions.distribution import Distribution
from ember.distributions.utils import broadcast_all, refuse_vmap_different

__all__ = ["VonMises"]


class VonMises(Distribution):
    """The von Mises distribution on the circle: density exp(kappa cos(x - loc)) /
    (2 pi I0(kappa)), samples in [-pi, pi)."""

    arg_constraints = {"loc": constraints.real, "concentration": constraints.positive}
    support = constraints.real
    has_rsample = False

    def __init__(self, loc, concentration, validate_args=None):
        self.loc, self.concentration = broadcast_all(loc, concentration)
        super().__init__(self.loc.shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expanded(VonMises, batch_shape, _instance, ("loc", "concentration"))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        # log I0(kappa) = log(i0e(kappa)) + kappa
        kappa = self.concentration
        return (kappa * (ember.cos(value - self.loc) - 1) - math.log(2 * math.pi)
                - ember.log(ember.special.i0e(kappa)))

    def sample(self, sample_shape=()):
        """Samples by Best and Fisher's (1979) rejection sampler from a wrapped Cauchy
        envelope, drawn in float64 on the parameters' device until every one is accepted."""
        shape = self._extended_shape(sample_shape)
        refuse_vmap_different("control flow")
        with ember.no_grad():
            f64 = ember.float64
            kappa = self.concentration.to(f64).expand(shape)
            # envelope parameter r = (1 + rho^2) / (2 rho), rho = (tau - sqrt(2 tau)) /
            # (2 kappa), tau = 1 + sqrt(1 + 4 kappa^2), rho written to keep small kappa exact
            tau = 1 + ember.sqrt(1 + 4 * kappa.pow(2))
            rho = 2 * kappa / (tau + ember.sqrt(2 * tau))
            r = (1 + rho.pow(2)) / (2 * rho)
            angle = ember.zeros(shape, dtype=f64, device=kappa.device)
            done = ember.zeros(shape, dtype=ember.bool, device=kappa.device)
            while not bool(done.all()):
                u = ember.rand((3,) + tuple(shape), dtype=f64, device=kappa.device)
                z = ember.cos(math.pi * u[0])
                f = ((1 + r * z) / (r + z)).clamp(-1.0, 1.0)
                c = kappa * (r - f)
                accept = (c * (2 - c) > u[1]) | (ember.log(c / u[1]) + 1 - c >= 0)
                new = accept & ~done
                angle = ember.where(new, ember.sign(u[2] - 0.5) * ember.acos(f), angle)
                done = done | accept
            value = ember.remainder(angle + self.loc.to(f64) + math.pi, 2 * math.pi) - math.pi
            return value.to(self.loc.dtype)

    @property
    def mean(self):
        """The circular mean, ``loc``."""
        return self.loc

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        """The circular variance 1 - I1(kappa) / I0(kappa)."""
        kappa = self.concentration
        return 1 - ember.special.i1e(kappa) / ember.special.i0e(kappa)
