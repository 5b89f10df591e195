"""Random distributions for round 36's distributions fuzzer: a seeded generator draws a family
(every family of ``torch.distributions``, Bernoulli/Binomial/... by probs or by logits, the
three parameterizations of MultivariateNormal, wrappers: Independent, MixtureSameFamily,
TransformedDistribution with random transforms), a batch shape, parameters of broadcastable
(now and then not) shapes, as tensors or Python numbers, float32 or float64, and now and then
a parameter out of its constraint. ``ctor(lib, validate_args)`` builds it in either library."""
import numpy as np


_GRAD = [False]
BAD = [False]
_LEAVES = []


def _t(lib, x, dtype):
    t = lib.tensor(x, dtype=getattr(lib, dtype))
    if _GRAD[0] and t.is_floating_point():
        t.requires_grad_(True)
        _LEAVES.append(t)
    return t


def _bshape(rng, base):
    """A shape broadcastable to base (now and then one that is not)."""
    if base and rng.random() < 0.02:
        return tuple(b + 1 for b in base)
    out = list(base)
    for i in range(len(out)):
        if rng.random() < 0.3:
            out[i] = 1
    k = rng.randrange(0, len(out) + 1)
    return tuple(out[len(out) - k:]) if rng.random() < 0.4 else tuple(out)


def _raw(npr, shape, kind, bad):
    if kind == "real":
        a = npr.standard_normal(shape)
    elif kind == "pos":
        a = np.exp(npr.standard_normal(shape) * 0.5) + 0.2
    elif kind == "unit":
        a = npr.uniform(0.1, 0.9, shape)
    elif kind == "count":
        a = npr.integers(0, 6, shape).astype(np.float64)
    elif kind == "nu":
        a = npr.uniform(2.5, 6, shape)
    else:
        raise AssertionError(kind)
    if bad and a.size:
        flat = np.asarray(a).reshape(-1)
        flat[0] = {"real": np.nan, "pos": -0.5, "unit": 1.5, "count": -1.0, "nu": -1.0}[kind]
    return a


# family -> (params: list of (name, kind)), extra event dim for params, ctor hook
SCALAR = {
    "Normal": [("loc", "real"), ("scale", "pos")],
    "Laplace": [("loc", "real"), ("scale", "pos")],
    "Cauchy": [("loc", "real"), ("scale", "pos")],
    "Gumbel": [("loc", "real"), ("scale", "pos")],
    "LogNormal": [("loc", "real"), ("scale", "pos")],
    "HalfNormal": [("scale", "pos")],
    "HalfCauchy": [("scale", "pos")],
    "Exponential": [("rate", "pos")],
    "Poisson": [("rate", "pos")],
    "Gamma": [("concentration", "pos"), ("rate", "pos")],
    "InverseGamma": [("concentration", "pos"), ("rate", "pos")],
    "Beta": [("concentration1", "pos"), ("concentration0", "pos")],
    "Kumaraswamy": [("concentration1", "pos"), ("concentration0", "pos")],
    "Chi2": [("df", "pos")],
    "StudentT": [("df", "nu"), ("loc", "real"), ("scale", "pos")],
    "FisherSnedecor": [("df1", "nu"), ("df2", "nu")],
    "Weibull": [("scale", "pos"), ("concentration", "pos")],
    "Pareto": [("scale", "pos"), ("alpha", "nu")],
    "VonMises": [("loc", "real"), ("concentration", "pos")],
    "Uniform": [("low", "real"), ("high", "real")],
    "Bernoulli": [("probs", "unit")],
    "BernoulliL": [("logits", "real")],
    "Geometric": [("probs", "unit")],
    "GeometricL": [("logits", "real")],
    "ContinuousBernoulli": [("probs", "unit")],
    "ContinuousBernoulliL": [("logits", "real")],
    "Binomial": [("total_count", "count"), ("probs", "unit")],
    "BinomialL": [("total_count", "count"), ("logits", "real")],
    "NegativeBinomial": [("total_count", "pos"), ("probs", "unit")],
    "NegativeBinomialL": [("total_count", "pos"), ("logits", "real")],
    "RelaxedBernoulli": [("temperature", "pos"), ("probs", "unit")],
    "GeneralizedPareto": [("loc", "real"), ("scale", "pos"), ("concentration", "real")],
}
VECTOR = ["Categorical", "CategoricalL", "OneHotCategorical", "OneHotCategoricalL", "Dirichlet",
          "Multinomial", "MultinomialL", "RelaxedOneHotCategorical", "MVNcov", "MVNprec",
          "MVNtril", "LowRankMVN", "LogisticNormal", "Independent", "LKJCholesky", "Wishart",
          "MixtureSameFamily", "TransformedExp", "TransformedAffine"]


def _strip(n):
    return n[:-1] if n.endswith("L") and n not in ("MVNtril",) else n


def make_family(rng, npr, good=False, fam=None, dtype=None):
    """(label, ctor(lib, validate), dtype)"""
    dtype = rng.choice(["float32", "float64", "float64"]) if dtype is None else dtype
    bad = rng.random() < 0.15 and not good
    BAD[0] = bad
    batch = tuple(rng.choice([1, 2, 3]) for _ in range(rng.choice([0, 0, 1, 1, 2])))
    fam = rng.choice(list(SCALAR) * 1 + VECTOR) if fam is None else fam
    if fam in SCALAR:
        params = {}
        badname = rng.choice(SCALAR[fam])[0] if bad else None
        for name, kind in SCALAR[fam]:
            shp = _bshape(rng, batch)
            a = _raw(npr, shp, kind, name == badname)
            if fam == "Uniform" and name == "high":
                a = a + 3.0
            if rng.random() < (0.05 if name == "temperature" else 0.2):
                a = float(np.asarray(a).reshape(-1)[0]) if np.asarray(a).size else 1.0
                if rng.random() < 0.3:
                    if a == a:      # (a Python int)
                        a = int(round(a)) if kind != "pos" else max(1, int(round(a)))
            params[name] = a
        cls = _strip(fam)

        intp = rng.random() < 0.04

        def ctor(lib, validate, params=params, cls=cls):
            kw = {k: (v if isinstance(v, (float, int)) else _t(lib, v, dtype))
                  for k, v in params.items()}
            if intp:
                k0 = next(iter(kw))
                if not isinstance(kw[k0], (float, int)):
                    kw[k0] = kw[k0].detach().round().long()
            if cls in ("Binomial", "NegativeBinomial") and rng_int[0] and \
                    isinstance(kw.get("total_count"), float):
                kw["total_count"] = int(kw["total_count"])
            return getattr(lib.distributions, cls)(**kw, validate_args=validate)
        rng_int = [rng.random() < 0.5]
        return f"{fam}({params}, {dtype})", ctor, dtype
    k = rng.choice([1, 2, 3])
    pshape = _bshape(rng, batch) + (k,)
    if fam in ("Categorical", "OneHotCategorical", "Multinomial", "RelaxedOneHotCategorical",
               "Dirichlet"):
        a = npr.uniform(0.1, 2.0, pshape)
        if rng.random() < 0.15 and fam != "Dirichlet":
            a.reshape(-1)[-1] = 0.0
        if bad:
            a.reshape(-1)[0] = -0.5
        pname = "concentration" if fam == "Dirichlet" else "probs"
        extra = {}
        if fam == "Multinomial":
            extra["total_count"] = rng.choice([1, 3, 5])
        if fam == "RelaxedOneHotCategorical":
            extra["temperature"] = rng.choice([0.5, 1.0])
        tt = rng.random() < 0.7

        def ctor(lib, validate):
            if "temperature" in extra and tt:
                extra["temperature"] = lib.tensor(float(extra["temperature"]),
                                                  dtype=getattr(lib, dtype))
            return getattr(lib.distributions, fam)(
                **{pname: _t(lib, a, dtype)}, **extra,
                validate_args=validate)
        return f"{fam}({pname}={a.tolist()}, {extra}, {dtype})", ctor, dtype
    if fam in ("CategoricalL", "OneHotCategoricalL", "MultinomialL"):
        a = npr.standard_normal(pshape)
        if bad:
            a.reshape(-1)[0] = np.inf
        extra = {"total_count": rng.choice([1, 3])} if fam == "MultinomialL" else {}

        def ctor(lib, validate):
            return getattr(lib.distributions, fam[:-1])(
                logits=_t(lib, a, dtype), **extra,
                validate_args=validate)
        return f"{fam}(logits={a.tolist()}, {extra}, {dtype})", ctor, dtype
    if fam in ("MVNcov", "MVNprec", "MVNtril", "LowRankMVN"):
        loc = npr.standard_normal(_bshape(rng, batch) + (k,))
        m = npr.standard_normal(_bshape(rng, batch) + (k, k))
        cov = m @ np.swapaxes(m, -1, -2) + np.eye(k)
        if bad:
            cov = cov.copy()
            cov[..., 0, 0] = -1.0
        if fam == "LowRankMVN":
            r = rng.choice([1, 2])
            cf = npr.standard_normal(_bshape(rng, batch) + (k, r))
            cd = np.exp(npr.standard_normal(_bshape(rng, batch) + (k,)))
            if bad:
                cd.reshape(-1)[0] = -1.0

            def ctor(lib, validate):
                t = lambda x: _t(lib, x, dtype)  # noqa: E731
                return lib.distributions.LowRankMultivariateNormal(
                    t(loc), t(cf), t(cd), validate_args=validate)
            return f"LowRankMVN({loc.tolist()}, {cf.tolist()}, {cd.tolist()})", ctor, dtype
        key = {"MVNcov": "covariance_matrix", "MVNprec": "precision_matrix",
               "MVNtril": "scale_tril"}[fam]
        mat = np.linalg.cholesky(cov) if fam == "MVNtril" and not bad else cov

        def ctor(lib, validate):
            t = lambda x: _t(lib, x, dtype)  # noqa: E731
            return lib.distributions.MultivariateNormal(t(loc), **{key: t(mat)},
                                                        validate_args=validate)
        return f"{fam}({loc.tolist()}, {key}={mat.tolist()}, {dtype})", ctor, dtype
    if fam == "LogisticNormal":
        loc = npr.standard_normal(pshape)
        sc = np.exp(npr.standard_normal(pshape) * 0.3)

        def ctor(lib, validate):
            t = lambda x: _t(lib, x, dtype)  # noqa: E731
            return lib.distributions.LogisticNormal(t(loc), t(sc), validate_args=validate)
        return f"LogisticNormal({loc.tolist()},{sc.tolist()})", ctor, dtype
    if fam == "Independent":
        loc = npr.standard_normal(batch + (k,))
        sc = np.exp(npr.standard_normal(batch + (k,)) * 0.3)
        rn = rng.randrange(0, len(batch) + 2)
        inner = rng.choice(["Normal", "Laplace", "Gamma"])

        def ctor(lib, validate):
            t = lambda x: _t(lib, x, dtype)  # noqa: E731
            b = getattr(lib.distributions, inner)(t(loc) if inner != "Gamma" else t(sc),
                                                   t(sc))
            return lib.distributions.Independent(b, rn, validate_args=validate)
        return f"Independent({inner}, {loc.shape}, rn={rn})", ctor, dtype
    if fam == "LKJCholesky":
        dim = rng.choice([1, 2, 3])
        conc = np.exp(npr.standard_normal(_bshape(rng, batch)) * 0.3)
        if bad:
            conc = conc - 5.0

        def ctor(lib, validate):
            return lib.distributions.LKJCholesky(
                dim, _t(lib, conc, dtype), validate_args=validate)
        return f"LKJCholesky({dim}, {conc.tolist()})", ctor, dtype
    if fam == "Wishart":
        m = npr.standard_normal(batch + (k, k))
        cov = m @ np.swapaxes(m, -1, -2) + np.eye(k)
        df = float(k + rng.choice([0.5, 1, 3]))
        if bad:
            df = float(k - 2)

        def ctor(lib, validate):
            return lib.distributions.Wishart(
                _t(lib, df, dtype),
                covariance_matrix=_t(lib, cov, dtype),
                validate_args=validate)
        return f"Wishart({df}, {cov.tolist()})", ctor, dtype
    if fam == "MixtureSameFamily":
        mix = npr.uniform(0.1, 1, batch + (k,))
        loc = npr.standard_normal(batch + (k,))
        sc = np.exp(npr.standard_normal(batch + (k,)) * 0.3)

        def ctor(lib, validate):
            t = lambda x: _t(lib, x, dtype)  # noqa: E731
            D = lib.distributions
            return D.MixtureSameFamily(D.Categorical(probs=t(mix)), D.Normal(t(loc), t(sc)),
                                       validate_args=validate)
        return f"MixtureSameFamily({mix.tolist()}, {loc.tolist()}, {sc.tolist()})", ctor, dtype
    if fam in ("TransformedExp", "TransformedAffine"):
        loc = npr.standard_normal(batch)
        sc = np.exp(npr.standard_normal(batch) * 0.3)
        a = float(npr.standard_normal())
        names = rng.sample(["exp", "aff", "sig", "tanh", "pow", "softplus", "abs", "inv", "affv"],
                           rng.choice([1, 1, 2]))
        if fam == "TransformedExp":
            names = ["exp"] + names[1:]

        def ctor(lib, validate):
            t = lambda x: _t(lib, x, dtype)  # noqa: E731
            D = lib.distributions
            trs = {"exp": lambda: D.ExpTransform(), "aff": lambda: D.AffineTransform(a, 2.0),
                   "sig": lambda: D.SigmoidTransform(), "tanh": lambda: D.TanhTransform(),
                   "pow": lambda: D.PowerTransform(2.0), "softplus": lambda: D.SoftplusTransform(),
                   "abs": lambda: D.AbsTransform(), "inv": lambda: D.ExpTransform().inv,
                   "affv": lambda: D.AffineTransform(t(loc), t(sc))}
            tr = [trs[n]() for n in names]
            return D.TransformedDistribution(D.Normal(t(loc), t(sc)), tr if len(tr) != 1 or
                                             names[0] != "exp" else tr[0],
                                             validate_args=validate)
        return f"{fam}({loc.tolist()}, {sc.tolist()}, {a}, {names})", ctor, dtype
    raise AssertionError(fam)
