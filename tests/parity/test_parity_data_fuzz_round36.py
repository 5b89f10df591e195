"""Random ember.utils.data programs, run in ember and torch side by side.

A seeded generator builds one program from random choices: samples (tensors of several dtypes
and shapes, NumPy arrays and scalars, Python numbers, bools, strings and bytes, None, nested in
dicts, tuples, lists and named tuples, with now and then a sample whose shape, length or type
differs from the others), a dataset over them (a list, TensorDataset, Subset, ConcatDataset,
StackDataset, an IterableDataset with or without ``__len__``, ChainDataset, random_split's
parts), and a call: default_collate, default_convert, a sampler (Sequential, Random,
SubsetRandom, WeightedRandom, Batch, Distributed) or a DataLoader with random options
(batch_size None too, shuffle, sampler / batch_sampler and their conflicts, drop_last,
collate_fn, a generator). The outcome is compared after each step: batch structure (tuple vs
list, named tuples kept), tensor dtypes, shapes and values, lengths, errors (type and message)
and warnings. Random orders are compared as multisets (the two libraries' streams differ).
"""

import collections
import random
import re
import warnings

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

Point = collections.namedtuple("Point", ["x", "y"])


def _msg(text):
    text = re.sub(r" at 0x[0-9a-f]+", "", str(text))
    text = re.sub(r"<U\d+", "<U", text)       # a string array's width (random orders)
    text = text.replace("ember.", "torch.").replace("ember", "torch").split("\n")[0]
    return text.split(" (Triggered internally")[0]


def _dtype(d):
    return str(d).split(".")[-1]


# ---------------------------------------------------------------- describing results

def describe(x, lib, depth=0):
    """A library-free description of ``x``: containers by kind, tensors by dtype, shape,
    values and requires_grad."""
    if depth > 8:
        return ("deep",)
    if isinstance(x, lib.Tensor):
        v = x.detach()
        if v.dtype in (lib.bfloat16, lib.float16):
            v = v.float()
        vals = v.numpy().tolist()
        node = None if x.grad_fn is None else type(x.grad_fn).__name__
        # (an empty tensor's strides: torch keeps NumPy's zeros, not compared here)
        return ("T", _dtype(x.dtype), tuple(x.shape), repr(vals), x.requires_grad, node,
                x.stride() if x.numel() else None)
    if isinstance(x, np.ndarray):
        return ("np", x.dtype.str, x.shape, repr(x.tolist()))
    if isinstance(x, np.generic):
        return ("npscalar", type(x).__name__, repr(x.item()))
    if isinstance(x, (bool, int, float, str, bytes, type(None))):
        return (type(x).__name__, repr(x))
    if isinstance(x, dict):
        return ("dict", type(x).__name__, tuple((k, describe(v, lib, depth + 1))
                                                for k, v in x.items()))
    if isinstance(x, tuple) and hasattr(x, "_fields"):
        return ("namedtuple", type(x).__name__,
                tuple(describe(v, lib, depth + 1) for v in x))
    if isinstance(x, (list, tuple)):
        return (type(x).__name__, tuple(describe(v, lib, depth + 1) for v in x))
    name = type(x).__name__
    if name == "Subset":
        return ("Subset", len(x))
    return ("other", name)


def _structure(d):
    """A description with the values dropped (for random orders)."""
    if not isinstance(d, tuple) or not d:
        return d
    if d[0] == "T":
        return d[:3]
    if d[0] == "np":
        return d[0], d[1][:2], d[2]
    if d[0] == "npscalar":
        return d[:2]
    if d[0] in ("bool", "int", "float", "str", "bytes", "NoneType"):
        return d[:1]
    if d[0] in ("list", "tuple"):     # a batch of samples in another order
        return d[0], tuple(sorted((_structure(e) for e in d[1]), key=repr))
    return tuple(_structure(e) for e in d)


# warnings each library gives once a process: whether they come depends on earlier programs
_ONCE = ("TypedStorage", "Creating a tensor from a list of numpy.ndarrays")


def _call(fn):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            out = ("ok", fn())
        except Exception as exc:  # noqa: BLE001 - the error itself is compared
            out = ("err", type(exc).__name__, _msg(exc))
    warns = sorted({(w.category.__name__, _msg(w.message)[:80]) for w in caught
                    if not any(m in str(w.message) for m in _ONCE)})
    return out, warns


# ---------------------------------------------------------------- samples

_NP_DTYPES = ["float32", "float64", "int64", "int32", "uint8", "bool", "float16", "int16"]
_T_DTYPES = ["float32", "float64", "int64", "int32", "bool", "uint8", "float16"]


def _values(rng, dtype, shape):
    n = int(np.prod(shape)) if shape else 1
    if dtype == "bool":
        vals = [rng.random() < 0.5 for _ in range(n)]
    elif dtype.startswith(("int", "uint")):
        vals = [rng.randrange(0, 9) for _ in range(n)]
    else:
        vals = [rng.choice([0.5, -1.25, 2.0, 3.5, -0.0, 7.0]) for _ in range(n)]
    return np.array(vals, dtype=dtype).reshape(shape)


def _shape(rng):
    return tuple(rng.choice([1, 2, 3]) for _ in range(rng.choice([0, 1, 1, 2])))


def _template(rng, depth=0):
    """A sample's type: what each sample of a batch has in common."""
    kinds = ["tensor", "tensor", "ndarray", "int", "float", "bool", "str", "npscalar"]
    if depth < 2:
        kinds += ["dict", "tuple", "list", "namedtuple"]
    if rng.random() < 0.04:
        kinds += ["bytes", "none", "npstr", "set", "complex"]
    kind = rng.choice(kinds)
    if kind == "tensor":
        return (kind, rng.choice(_T_DTYPES), _shape(rng))
    if kind == "ndarray":
        return (kind, rng.choice(_NP_DTYPES + ["U"]), _shape(rng))
    if kind == "npscalar":
        return (kind, rng.choice(["float32", "float64", "int64", "int32", "bool", "uint8"]))
    if kind == "dict":
        keys = rng.sample(["a", "b", "c", 3], rng.randint(0, 3))
        return (kind, tuple((k, _template(rng, depth + 1)) for k in keys))
    if kind in ("tuple", "list"):
        return (kind, tuple(_template(rng, depth + 1) for _ in range(rng.randint(0, 3))))
    if kind == "namedtuple":
        return (kind, (_template(rng, depth + 1), _template(rng, depth + 1)))
    return (kind,)


def _perturb(rng, t):
    """A variant of template ``t``: another shape, length or type somewhere inside."""
    kind = t[0]
    if kind in ("tensor", "ndarray") and rng.random() < 0.6:
        return (kind, t[1], _shape(rng))
    if kind in ("tuple", "list") and t[1] and rng.random() < 0.5:
        return (kind, t[1][:-1]) if rng.random() < 0.5 else (kind, t[1] + t[1][:1])
    if kind == "dict" and t[1] and rng.random() < 0.5:
        return (kind, t[1][1:] + (("z", ("int",)),))
    if kind in ("dict", "tuple", "list", "namedtuple") and t[1]:
        i = rng.randrange(len(t[1]))
        items = list(t[1])
        items[i] = ((items[i][0], _perturb(rng, items[i][1])) if kind == "dict"
                    else _perturb(rng, items[i]))
        return (kind, tuple(items))
    return _template(rng, 2)


def _raw(rng, t):
    """A library-free sample of template ``t`` (tensors as ("tensor", array))."""
    kind = t[0]
    if kind == "tensor":
        return ("tensor", _values(rng, t[1], t[2]))
    if kind == "ndarray":
        if t[1] == "U":
            return np.array([rng.choice(["p", "qq"]) for _ in range(int(np.prod(t[2])))]
                            ).reshape(t[2])
        return _values(rng, t[1], t[2])
    if kind == "npscalar":
        return _values(rng, t[1], ())[()]
    if kind == "int":
        return rng.randrange(-3, 9)
    if kind == "float":
        return rng.choice([0.5, -2.0, 3.25, 1e-3])
    if kind == "bool":
        return rng.random() < 0.5
    if kind == "str":
        return rng.choice(["a", "bc", ""])
    if kind == "bytes":
        return rng.choice([b"x", b"yz"])
    if kind == "none":
        return None
    if kind == "npstr":
        return np.str_(rng.choice(["u", "v"]))
    if kind == "set":
        return ("set", rng.randrange(3))
    if kind == "complex":
        return complex(rng.randrange(3), 1)
    if kind == "dict":
        return ("dict", tuple((k, _raw(rng, s)) for k, s in t[1]))
    if kind in ("tuple", "list", "namedtuple"):
        return (kind, tuple(_raw(rng, s) for s in t[1]))
    raise AssertionError(kind)


def build(lib, raw):
    """The sample ``raw`` in library ``lib`` (fresh objects each call)."""
    if isinstance(raw, tuple) and raw:
        tag = raw[0]
        if tag == "tensor":
            return lib.as_tensor(raw[1].copy())
        if tag == "set":
            return {raw[1]}
        if tag == "dict":
            return {k: build(lib, v) for k, v in raw[1]}
        if tag == "tuple":
            return tuple(build(lib, v) for v in raw[1])
        if tag == "list":
            return [build(lib, v) for v in raw[1]]
        if tag == "namedtuple":
            return Point(*(build(lib, v) for v in raw[1]))
    if isinstance(raw, np.ndarray):
        return raw.copy()
    return raw


def _samples_of(rng, n, same=False, t=None):
    t = _template(rng) if t is None else t
    out = []
    for _ in range(n):
        s = _perturb(rng, t) if rng.random() < 0.08 and not same else t
        out.append(_raw(rng, s))
    return out


# ---------------------------------------------------------------- datasets

def _make_iterable(lib, items, length):
    class Stream(lib.utils.data.IterableDataset):
        def __iter__(self):
            return iter(build(lib, r) for r in items)

    class SizedStream(Stream):
        def __len__(self):
            return length

    return SizedStream() if length is not None else Stream()


def _dataset_spec(rng, same):
    """A dataset's description; ``same``: all samples of one type and shape (the order of a
    shuffled loader differs between the libraries, and so would the batches' errors)."""
    n = rng.choice([0, 1, 2, 3, 4, 5, 7, 8])
    kind = rng.choice(["list", "tensor", "tensor", "subset", "concat", "stack", "stackdict",
                       "iterable", "iterable", "chain", "split"])
    spec = {"kind": kind, "n": n}
    same = same or kind == "split"
    common = _template(rng)

    def _samples(rng, n, t=None):
        return _samples_of(rng, n, same, t)
    if kind == "tensor":
        k = rng.randint(1, 3)
        spec["arrays"] = [_values(rng, rng.choice(_T_DTYPES), (n,) + _shape(rng))
                          for _ in range(k)]
        spec["grad"] = [a.dtype.kind == "f" and rng.random() < 0.3 for a in spec["arrays"]]
        if rng.random() < 0.05:
            spec["arrays"].append(_values(rng, "float32", (n + 1,)))
    elif kind in ("stack", "stackdict"):
        spec["parts"] = [_samples(rng, n) for _ in range(rng.randint(1, 3))]
        if rng.random() < 0.1:
            spec["parts"].append(_samples(rng, n + 1))
    elif kind == "concat":
        spec["parts"] = [_samples(rng, rng.choice([0, 1, 2, 3]), common)
                         for _ in range(rng.randint(1, 3))]
        spec["n"] = sum(len(p) for p in spec["parts"])
    elif kind == "chain":
        spec["parts"] = [_samples(rng, rng.choice([0, 1, 2, 3]), common)
                         for _ in range(rng.randint(1, 3))]
        spec["n"] = sum(len(p) for p in spec["parts"])
        spec["sized"] = rng.random() < 0.5
    else:
        spec["items"] = _samples(rng, n)
        if kind == "subset":
            spec["indices"] = [rng.randrange(n) for _ in range(rng.randrange(n + 1))] if n else []
            spec["n"] = len(spec["indices"])
        if kind == "iterable":
            spec["length"] = rng.choice([None, n, n, max(n - 2, 0), n + 3])
        if kind == "split":
            spec["n"] = n
    return spec


def make_dataset(lib, spec):
    data = lib.utils.data
    kind = spec["kind"]
    if kind == "list":
        return [build(lib, r) for r in spec["items"]]
    if kind == "tensor":
        grad = spec.get("grad", [False] * len(spec["arrays"]))
        return data.TensorDataset(*(lib.as_tensor(a.copy()).requires_grad_(g)
                                    for a, g in zip(spec["arrays"], grad)))
    if kind == "subset":
        return data.Subset([build(lib, r) for r in spec["items"]], spec["indices"])
    if kind == "concat":
        return data.ConcatDataset([[build(lib, r) for r in p] for p in spec["parts"]])
    if kind == "stack":
        return data.StackDataset(*([build(lib, r) for r in p] for p in spec["parts"]))
    if kind == "stackdict":
        return data.StackDataset(**{f"k{i}": [build(lib, r) for r in p]
                                    for i, p in enumerate(spec["parts"])})
    if kind == "iterable":
        return _make_iterable(lib, spec["items"], spec["length"])
    if kind == "chain":
        parts = [_make_iterable(lib, p, len(p) if spec["sized"] else None)
                 for p in spec["parts"]]
        return data.ChainDataset(parts)
    if kind == "split":
        base = [build(lib, r) for r in spec["items"]]
        n = len(base)
        parts = data.random_split(base, [n // 2, n - n // 2],
                                  generator=lib.Generator().manual_seed(1))
        return parts[0] + parts[1]
    raise AssertionError(kind)


# ---------------------------------------------------------------- programs

def _collate_program(rng):
    batch = _samples_of(rng, rng.choice([1, 2, 3, 4]))
    which = rng.choice(["collate", "collate", "collate", "convert"])

    def prog(lib):
        data = lib.utils.data
        samples = [build(lib, r) for r in batch]
        if which == "convert":
            return [_call(lambda: data.default_convert(samples[0]))]
        return [_call(lambda: data.default_collate(samples))]
    return prog, False


def _sampler_program(rng):
    n = rng.choice([0, 1, 2, 3, 5, 8])
    kind = rng.choice(["seq", "random", "subset", "weighted", "batch", "dist", "dist"])
    opts = {}
    if kind == "random":
        opts["replacement"] = rng.choice([False, True, True, 0, "yes"] if rng.random() < 0.1
                                         else [False, True])
        opts["num_samples"] = rng.choice([None, None, 1, 3, 7, 11, 0, -1, 2.0])
        opts["gen"] = rng.random() < 0.5
    elif kind == "subset":
        opts["indices"] = [rng.randrange(10) for _ in range(rng.randrange(6))]
    elif kind == "weighted":
        opts["weights"] = [rng.choice([0.0, 1.0, 2.5, 3.0]) for _ in range(max(n, 1))]
        if rng.random() < 0.1:
            opts["weights"] = [opts["weights"]]
        opts["num_samples"] = rng.choice([1, 2, 3, 5, 0, True, 2.0])
        opts["replacement"] = rng.choice([True, True, False, 1])
    elif kind == "batch":
        opts["inner"] = rng.choice(["seq", "random", "list"])
        opts["batch_size"] = rng.choice([1, 2, 3, 4, 0, -1, 2.0, True, None])
        opts["drop_last"] = rng.choice([False, True, False, True, 0, None])
    elif kind == "dist":
        opts["num_replicas"] = rng.choice([1, 2, 3, 4])
        opts["rank"] = rng.choice([0, 1, 2, 3, -1, 4])
        opts["shuffle"] = rng.random() < 0.5
        opts["drop_last"] = rng.random() < 0.5
        opts["seed"] = rng.choice([0, 5])
        opts["epoch"] = rng.choice([None, 0, 3])
    random_order = None
    if kind in ("random", "weighted") or (kind == "dist" and opts["shuffle"]) or (
            kind == "batch" and opts["inner"] == "random"):
        random_order = "draw"
    if kind == "subset" or kind == "random" and opts["replacement"] is False and (
            opts["num_samples"] is None or isinstance(opts["num_samples"], int)
            and n and opts["num_samples"] % n == 0):
        random_order = "perm"

    def make(lib):
        data = lib.utils.data
        src = list(range(n))
        if kind == "seq":
            return data.SequentialSampler(src)
        if kind == "random":
            g = lib.Generator().manual_seed(4) if opts["gen"] else None
            return data.RandomSampler(src, opts["replacement"], opts["num_samples"], g)
        if kind == "subset":
            return data.SubsetRandomSampler(opts["indices"])
        if kind == "weighted":
            return data.WeightedRandomSampler(opts["weights"], opts["num_samples"],
                                              opts["replacement"])
        if kind == "batch":
            inner = {"seq": lambda: data.SequentialSampler(src),
                     "random": lambda: data.RandomSampler(src),
                     "list": lambda: list(range(n))}[opts["inner"]]()
            return data.BatchSampler(inner, opts["batch_size"], opts["drop_last"])
        s = data.DistributedSampler(src, opts["num_replicas"], opts["rank"], opts["shuffle"],
                                    opts["seed"], opts["drop_last"])
        if opts["epoch"] is not None:
            s.set_epoch(opts["epoch"])
        return s

    def prog(lib):
        made = _call(lambda: make(lib))
        steps = [made]
        if made[0][0] != "ok":
            return steps
        s = made[0][1]
        steps[0] = (("ok", type(s).__name__), made[1])
        steps.append(_call(lambda: len(s)))
        steps.append(_call(lambda: list(s)))
        if kind == "dist":
            steps.append(_call(lambda: (s.num_samples, s.total_size)))
        return steps
    return prog, random_order


def _loader_program(rng):
    opts = {}
    if rng.random() < 0.7:
        opts["batch_size"] = rng.choice([1, 2, 3, 4, None, 2, 3])
    if rng.random() < 0.4:
        opts["shuffle"] = rng.choice([True, False, True])
    if rng.random() < 0.3:
        opts["drop_last"] = rng.choice([True, False, True])
    sampler = rng.choice([None] * 6 + ["seq", "random", "list"])
    batch_sampler = rng.choice([None] * 8 + ["batch2", "lists", "odd", "odd"])
    # batches of odd indices: negative, past the end, NumPy ints, bools, floats, tensors
    odd = [[rng.choice([0, 1, -1, 2, -3, 9, -9, "np", True, 1.0, "t", "t1"])
            for _ in range(rng.randint(0, 3))] for _ in range(rng.randint(1, 3))]
    collate = rng.choice([None] * 6 + ["identity", "first", "convert", "collate"])
    gen = rng.random() < 0.3
    want_len = rng.random() < 0.7
    random_order = "draw" if opts.get("shuffle") or sampler == "random" else None
    spec = _dataset_spec(rng, random_order is not None)
    if spec["kind"] == "split":
        random_order = "draw"

    def make(lib):
        data = lib.utils.data
        ds = make_dataset(lib, spec)
        kw = dict(opts)
        n = spec["n"]
        if sampler == "seq":
            kw["sampler"] = data.SequentialSampler(range(n))
        elif sampler == "random":
            kw["sampler"] = data.RandomSampler(range(n)) if n else data.SequentialSampler([])
        elif sampler == "list":
            kw["sampler"] = list(range(n))[::-1]
        if batch_sampler == "batch2":
            kw["batch_sampler"] = data.BatchSampler(data.SequentialSampler(range(n)), 2, False)
        elif batch_sampler == "lists":
            kw["batch_sampler"] = [[i, 0] for i in range(n)] if n else []
        elif batch_sampler == "odd":
            special = {"np": np.int64(1), "t": lib.tensor(0), "t1": lib.tensor([1])}
            kw["batch_sampler"] = [[special.get(i, i) if isinstance(i, str) else i
                                    for i in b] for b in odd]
        if collate == "identity":
            kw["collate_fn"] = lambda b: b
        elif collate == "first":
            kw["collate_fn"] = lambda b: b[0] if isinstance(b, list) else b
        elif collate == "convert":
            kw["collate_fn"] = data.default_convert
        elif collate == "collate":
            kw["collate_fn"] = data.default_collate
        if gen:
            kw["generator"] = lib.Generator().manual_seed(7)
        return data.DataLoader(ds, **kw)

    def prog(lib):
        made = _call(lambda: make(lib))
        if made[0][0] != "ok":
            return [made]
        loader = made[0][1]
        steps = [(("ok", "made"), made[1])]
        if want_len:
            steps.append(_call(lambda: len(loader)))
        steps.append(_call(lambda: list(loader)))
        steps.append(_call(lambda: (loader.batch_size, loader.drop_last,
                                    type(loader.sampler).__name__,
                                    type(loader.batch_sampler).__name__)))
        return steps
    return prog, random_order


def _split_program(rng):
    n = rng.choice([0, 1, 2, 3, 5, 10])
    if rng.random() < 0.5:
        k = rng.randint(1, 4)
        lengths = [rng.random() for _ in range(k)]
        total = sum(lengths)
        lengths = [x / total for x in lengths]
        if rng.random() < 0.2:
            lengths = rng.choice([[0.5, 0.5], [0.3, 0.7], [0.1, 0.9, 0.0], [1.2, -0.2],
                                  [0.5, 0.6], [0.25] * 4, [1.0], [0.0, 1.0]])
    else:
        cut = sorted(rng.randint(0, n) for _ in range(rng.randint(0, 2)))
        lengths = [b - a for a, b in zip([0] + cut, cut + [n])]
        if rng.random() < 0.2:
            lengths = lengths + [1]
    gen = rng.random() < 0.5
    as_tuple = rng.random() < 0.3

    def prog(lib):
        src = list(range(n))
        g = lib.Generator().manual_seed(3) if gen else None
        ls = tuple(lengths) if as_tuple else list(lengths)
        out = _call(lambda: lib.utils.data.random_split(src, ls, generator=g))
        if out[0][0] != "ok":
            return [out]
        parts = out[0][1]
        return [(("ok", [len(p) for p in parts], sorted(i for p in parts for i in p)),
                 out[1]), _call(lambda: [type(p).__name__ for p in parts])]
    return prog, False


def _dataset_program(rng):
    """Indexing, len() and ``+`` of a dataset, and the errors of bad ones."""
    spec = _dataset_spec(rng, False)
    n = spec["n"]
    keys = [rng.choice([0, 1, n - 1, n, -1, -n, -n - 1, 2]) for _ in range(rng.randint(1, 3))]
    if rng.random() < 0.2:
        keys.append(rng.choice([[0, 1], [-1], slice(0, 2), 1.0]))
    other = rng.choice([None, "same", "iterable", "list"])

    def prog(lib):
        data = lib.utils.data
        made = _call(lambda: make_dataset(lib, spec))
        if made[0][0] != "ok":
            return [made]
        ds = made[0][1]
        steps = [(("ok", type(ds).__name__), made[1]), _call(lambda: len(ds))]
        for k in keys:
            steps.append(_call(lambda k=k: ds[k]))
        if other is not None:
            right = {"same": lambda: make_dataset(lib, spec),
                     "iterable": lambda: _make_iterable(lib, [1, 2], 2),
                     "list": lambda: data.TensorDataset(lib.arange(3))}[other]
            both = _call(lambda: ds + right())
            steps.append(((both[0][0], type(both[0][1]).__name__ if both[0][0] == "ok"
                           else both[0][1:]), both[1]))
            if both[0][0] == "ok":
                steps.append(_call(lambda: len(both[0][1])))
                steps.append(_call(lambda: list(both[0][1]) if n < 9 else None))
        return steps
    return prog, "struct" if spec["kind"] == "split" else None


def _constructor_program(rng):
    """Constructors with odd arguments: their errors."""
    kind = rng.choice(["tensor", "stack", "concat", "chain", "subset", "loader", "loader",
                       "random", "dist", "weighted"])
    arg = rng.randrange(8)

    def prog(lib):
        data = lib.utils.data
        a, b = lib.arange(3), lib.arange(4)
        calls = {
            "tensor": [lambda: data.TensorDataset(a, b), lambda: data.TensorDataset(),
                       lambda: data.TensorDataset(a, a.reshape(3, 1))[1],
                       lambda: len(data.TensorDataset(lib.tensor(1.)))],
            "stack": [lambda: data.StackDataset(), lambda: data.StackDataset([1], x=[2]),
                      lambda: data.StackDataset([1, 2], [3]), lambda: data.StackDataset(x=[1],
                                                                                    y=[2, 3]),
                      lambda: data.StackDataset([1, 2], [3, 4])[1],
                      lambda: data.StackDataset(x=[1, 2])[-1]],
            "concat": [lambda: data.ConcatDataset([]),
                       lambda: data.ConcatDataset([_make_iterable(lib, [1], 1)]),
                       lambda: data.ConcatDataset([[1], [2, 3]])[-4],
                       lambda: data.ConcatDataset([[1], [2, 3]])[3],
                       lambda: data.ConcatDataset([[], [2, 3]]).cumulative_sizes,
                       lambda: data.ConcatDataset(([1], [2]))[1]],
            "chain": [lambda: len(data.ChainDataset([[1, 2]])),
                      lambda: list(data.ChainDataset([[1, 2]])),
                      lambda: list(data.ChainDataset([_make_iterable(lib, [1], None)])),
                      lambda: len(data.ChainDataset([_make_iterable(lib, [1], None)]))],
            "subset": [lambda: data.Subset([1, 2, 3], [2, 0])[1],
                       lambda: data.Subset([1, 2, 3], [2, 0])[[0, 1]],
                       lambda: len(data.Subset([1, 2, 3], range(2))),
                       lambda: data.Subset([1, 2, 3], [5])[0]],
            "loader": [lambda: data.DataLoader([1], batch_size=0),
                       lambda: data.DataLoader([1], batch_size=-1),
                       lambda: data.DataLoader([1], num_workers=-1),
                       lambda: data.DataLoader([1], timeout=-1),
                       lambda: data.DataLoader([1], prefetch_factor=2),
                       lambda: data.DataLoader([1], persistent_workers=True),
                       lambda: data.DataLoader([1], batch_size=None, drop_last=True),
                       lambda: data.DataLoader([1], shuffle=True, sampler=[0]),
                       lambda: data.DataLoader([1], batch_sampler=[[0]], batch_size=2),
                       lambda: data.DataLoader([1], batch_sampler=[[0]], drop_last=True),
                       lambda: data.DataLoader([1], batch_sampler=[[0]], shuffle=True),
                       lambda: data.DataLoader([1], batch_sampler=[[0]], sampler=[0]),
                       lambda: data.DataLoader(_make_iterable(lib, [1], 1), shuffle=True),
                       lambda: data.DataLoader(_make_iterable(lib, [1], 1), sampler=[0]),
                       lambda: data.DataLoader(_make_iterable(lib, [1], 1),
                                               batch_sampler=[[0]]),
                       lambda: setattr(data.DataLoader([1]), "batch_size", 3),
                       lambda: setattr(data.DataLoader([1]), "dataset", [2]),
                       lambda: setattr(data.DataLoader([1]), "collate_fn", None),
                       lambda: data.DataLoader([1], shuffle="yes").sampler.__class__.__name__,
                       lambda: list(data.DataLoader([1, 2], batch_size=True)),
                       lambda: list(data.DataLoader([1.5, 2], batch_size=2.0))],
            "random": [lambda: data.RandomSampler([1], num_samples=0),
                       lambda: data.RandomSampler([], num_samples=None),
                       lambda: list(data.RandomSampler([], replacement=True, num_samples=2)),
                       lambda: data.RandomSampler([1], replacement=1),
                       lambda: len(data.RandomSampler([1, 2], num_samples=5)),
                       lambda: data.RandomSampler([1], num_samples=True),
                       lambda: list(data.SubsetRandomSampler([])),
                       lambda: len(data.SequentialSampler(range(4)))],
            "dist": [lambda: data.DistributedSampler([1], 2, 2),
                     lambda: data.DistributedSampler([1], 2, -1),
                     lambda: list(data.DistributedSampler([], 2, 1)),
                     lambda: list(data.DistributedSampler([1, 2, 3], 2, 1, shuffle=False,
                                                          drop_last=True)),
                     lambda: list(data.DistributedSampler([1, 2, 3, 4, 5], 4, 3,
                                                          shuffle=False)),
                     lambda: list(data.DistributedSampler([1], 3, 2, shuffle=False)),
                     lambda: len(data.DistributedSampler([1, 2], 3, 0, drop_last=True))],
            "weighted": [lambda: list(data.WeightedRandomSampler([0., 1.], 2, False)),
                         lambda: list(data.WeightedRandomSampler([0., 0.], 2)),
                         lambda: list(data.WeightedRandomSampler([-1., 1.], 2)),
                         lambda: data.WeightedRandomSampler([1.], 1, replacement=None),
                         lambda: len(data.WeightedRandomSampler(lib.tensor([1., 2.]), 3)),
                         lambda: list(data.WeightedRandomSampler([1.], 2, False)),
                         lambda: list(data.WeightedRandomSampler([[1.]], 1))],
        }[kind]
        fn = calls[arg % len(calls)]
        out = _call(fn)
        if out[0][0] == "ok" and not isinstance(out[0][1], (int, list, str, type(None))):
            out = (("ok", type(out[0][1]).__name__), out[1])
        return [out]
    return prog, None


_KINDS = [(_collate_program, 4), (_sampler_program, 2), (_loader_program, 5),
          (_split_program, 1), (_dataset_program, 2), (_constructor_program, 2)]


def make_program(seed):
    rng = random.Random(seed)
    maker = rng.choices([k for k, _ in _KINDS], [w for _, w in _KINDS])[0]
    return maker(rng)


def _canon(steps, lib, random_order):
    out = []
    for res, warns in steps:
        if res[0] == "ok":
            d = describe(res[1], lib)
            if random_order == "struct":
                d = _structure(d)
            elif random_order and d[0] == "list":
                items = d[1] if random_order == "perm" else (_structure(e) for e in d[1])
                d = ("list", tuple(sorted(items, key=repr)))
            res = ("ok", d)
        out.append((res, warns))
    return out


def run_program(seed):
    """None when both libraries agree; else (step, ember's, torch's)."""
    prog, random_order = make_program(seed)
    ours = _canon(prog(ember), ember, random_order)
    theirs = _canon(prog(torch), torch, random_order)
    for i, (a, b) in enumerate(zip(ours, theirs)):
        if a != b:
            return i, str(a)[:600], str(b)[:600]
    if len(ours) != len(theirs):
        return len(ours), str(ours[-1])[:300], str(theirs[-1])[:300]
    return None


_KNOWN = {
    # torch reads a NumPy string (np.str_, a 0-dim string array) among numbers into an
    # explicit float dtype by __float__ ("could not convert string to float"); ember refuses
    # its dtype as torch does without a dtype
    "NumPy strings read by __float__": (7014, 7862, 8987, 9418),
}
# programs that differed before this round's fixes (of 12,000: 104 -> 4)
_FOUND = [1231, 1256, 1578, 1866, 1998, 2118, 2119, 2229, 2354, 2377, 2731, 2960, 3079, 3114,
          3287, 3523, 3611, 3847, 3938, 3968, 4015, 4163, 4313, 4437, 4445, 4792, 4795, 4828,
          4910, 4980, 5208, 5346, 5420, 5538, 5627, 5739, 5898, 6092, 6154, 6182, 6281, 6352,
          6651, 6739, 6891, 7203, 7448, 7633, 7694, 7697, 7860, 7975, 8066, 8114, 8127, 8188,
          8221, 8379, 8524, 8545, 8666, 8686, 9147, 9221, 9344, 9561, 9599, 10027, 10248, 10361,
          10662, 10849, 10863, 11000, 11104, 11133, 11256, 11570, 11596, 11709, 11734, 11876]
_SKIP_SEEDS = {s for seeds in _KNOWN.values() for s in seeds}
_SEEDS = [s for s in range(1200) if s not in _SKIP_SEEDS] + _FOUND


@pytest.mark.parametrize("chunk", range(4))
def test_random_data_programs_agree(chunk):
    bad = [(s, run_program(s)) for s in _SEEDS[chunk::4]]
    bad = [b for b in bad if b[1] is not None]
    assert not bad, bad[:3]


if __name__ == "__main__":
    import sys
    lo, hi = int(sys.argv[1]), int(sys.argv[2])
    buckets = collections.defaultdict(list)
    for s in range(lo, hi):
        r = run_program(s)
        if r is not None:
            key = f"{make_program(s)[0].__qualname__.split('.')[0]} step{r[0]} " + r[2][:70]
            buckets[key].append((s, r))
    for k, v in sorted(buckets.items(), key=lambda kv: -len(kv[1])):
        print(f"{len(v):4d} {k}")
        for s, r in v[:2]:
            print("      ", s, str(r)[:700])
    print("total mismatches", sum(map(len, buckets.values())), "of", hi - lo)
