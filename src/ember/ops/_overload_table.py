"""PyTorch's overloads of the ops its parser declares several times, as its "invalid
combination" TypeError lists them (read from PyTorch's messages)."""

__all__ = ["FUNCTION_OVERLOADS", "METHOD_OVERLOADS", "SINGLE_METHODS", "FORWARDED_OVERLOADS"]

# name -> the signatures of ember.<name>; a method's are these without the tensor and out=
FUNCTION_OVERLOADS = {
    'addmm': (
        "Tensor input, Tensor mat1, Tensor mat2, *, Number beta = 1, Number alpha = 1, Tensor "
        "out = None",
        "Tensor input, Tensor mat1, Tensor mat2, ember.dtype out_dtype, *, Number beta = 1, "
        "Number alpha = 1, Tensor out = None",
    ),
    'all': (
        "Tensor input, *, Tensor out = None",
        "Tensor input, tuple of ints dim = None, bool keepdim = False, *, Tensor out = None",
        "Tensor input, int dim, bool keepdim = False, *, Tensor out = None",
    ),
    'any': (
        "Tensor input, *, Tensor out = None",
        "Tensor input, tuple of ints dim = None, bool keepdim = False, *, Tensor out = None",
        "Tensor input, int dim, bool keepdim = False, *, Tensor out = None",
    ),
    'arange': (
        "Number end, *, Tensor out = None, ember.dtype dtype = None, ember.layout layout = None,"
        " ember.device device = None, bool pin_memory = False, bool requires_grad = False",
        "Number start, Number end, *, ember.dtype dtype = None, ember.layout layout = None, "
        "ember.device device = None, bool pin_memory = False, bool requires_grad = False",
        "Number start, Number end, Number step = 1, *, Tensor out = None, ember.dtype dtype = "
        "None, ember.layout layout = None, ember.device device = None, bool pin_memory = False,"
        " bool requires_grad = False",
    ),
    'argsort': (
        "Tensor input, *, bool stable, int dim = -1, bool descending = False, Tensor out = None",
        "Tensor input, int dim = -1, bool descending = False",
    ),
    'baddbmm': (
        "Tensor input, Tensor batch1, Tensor batch2, *, Number beta = 1, Number alpha = 1, "
        "Tensor out = None",
        "Tensor input, Tensor batch1, Tensor batch2, ember.dtype out_dtype, *, Number beta = 1,"
        " Number alpha = 1, Tensor out = None",
    ),
    'bitwise_and': (
        "Tensor input, Tensor other, *, Tensor out = None",
        "Number self, Tensor other",
        "Tensor input, Number other, *, Tensor out = None",
    ),
    'bitwise_left_shift': (
        "Tensor input, Tensor other, *, Tensor out = None",
        "Number self, Tensor other",
        "Tensor input, Number other, *, Tensor out = None",
    ),
    'bitwise_or': (
        "Tensor input, Tensor other, *, Tensor out = None",
        "Number self, Tensor other",
        "Tensor input, Number other, *, Tensor out = None",
    ),
    'bitwise_right_shift': (
        "Tensor input, Tensor other, *, Tensor out = None",
        "Number self, Tensor other",
        "Tensor input, Number other, *, Tensor out = None",
    ),
    'bitwise_xor': (
        "Tensor input, Tensor other, *, Tensor out = None",
        "Number self, Tensor other",
        "Tensor input, Number other, *, Tensor out = None",
    ),
    'bmm': (
        "Tensor input, Tensor mat2, *, Tensor out = None",
        "Tensor input, Tensor mat2, ember.dtype out_dtype, *, Tensor out = None",
    ),
    'bucketize': (
        "Tensor input, Tensor boundaries, *, bool out_int32 = False, bool right = False, Tensor"
        " out = None",
        "Number self, Tensor boundaries, *, bool out_int32 = False, bool right = False",
    ),
    'clamp': (
        "Tensor input, Tensor min = None, Tensor max = None, *, Tensor out = None",
        "Tensor input, Number min = None, Number max = None, *, Tensor out = None",
    ),
    'clamp_': (
        "Tensor input, Tensor min = None, Tensor max = None",
        "Tensor input, Number min = None, Number max = None",
    ),
    'clamp_max': (
        "Tensor input, Tensor max, *, Tensor out = None",
        "Tensor input, Number max, *, Tensor out = None",
    ),
    'clamp_max_': (
        "Tensor input, Tensor max",
        "Tensor input, Number max",
    ),
    'clamp_min': (
        "Tensor input, Tensor min, *, Tensor out = None",
        "Tensor input, Number min, *, Tensor out = None",
    ),
    'clamp_min_': (
        "Tensor input, Tensor min",
        "Tensor input, Number min",
    ),
    'clip': (
        "Tensor input, Tensor min = None, Tensor max = None, *, Tensor out = None",
        "Tensor input, Number min = None, Number max = None, *, Tensor out = None",
    ),
    'clip_': (
        "Tensor input, Tensor min = None, Tensor max = None",
        "Tensor input, Number min = None, Number max = None",
    ),
    'conv1d': (
        "Tensor input, Tensor weight, Tensor bias = None, tuple of ints stride = 1, tuple of "
        "ints padding = 0, tuple of ints dilation = 1, int groups = 1",
        "Tensor input, Tensor weight, Tensor bias = None, tuple of ints stride = 1, str padding"
        " = \"valid\", tuple of ints dilation = 1, int groups = 1",
    ),
    'conv2d': (
        "Tensor input, Tensor weight, Tensor bias = None, tuple of ints stride = 1, tuple of "
        "ints padding = 0, tuple of ints dilation = 1, int groups = 1",
        "Tensor input, Tensor weight, Tensor bias = None, tuple of ints stride = 1, str padding"
        " = \"valid\", tuple of ints dilation = 1, int groups = 1",
    ),
    'conv3d': (
        "Tensor input, Tensor weight, Tensor bias = None, tuple of ints stride = 1, tuple of "
        "ints padding = 0, tuple of ints dilation = 1, int groups = 1",
        "Tensor input, Tensor weight, Tensor bias = None, tuple of ints stride = 1, str padding"
        " = \"valid\", tuple of ints dilation = 1, int groups = 1",
    ),
    'copysign': (
        "Tensor input, Tensor other, *, Tensor out = None",
        "Tensor input, Number other, *, Tensor out = None",
    ),
    'count_nonzero': (
        "Tensor input, int dim = None",
        "Tensor input, tuple of ints dim",
    ),
    'ctc_loss': (
        "Tensor log_probs, Tensor targets, tuple of ints input_lengths, tuple of ints "
        "target_lengths, int blank = 0, int reduction = at::Reduction::Mean, bool zero_infinity"
        " = False",
        "Tensor log_probs, Tensor targets, Tensor input_lengths, Tensor target_lengths, int "
        "blank = 0, int reduction = at::Reduction::Mean, bool zero_infinity = False",
    ),
    'cumulative_trapezoid': (
        "Tensor y, Tensor x, *, int dim = -1",
        "Tensor y, *, Number dx = 1, int dim = -1",
    ),
    'div': (
        "Tensor input, Tensor other, *, Tensor out = None",
        "Tensor input, Tensor other, *, str rounding_mode, Tensor out = None",
        "Tensor input, Number other, *, str rounding_mode",
    ),
    'divide': (
        "Tensor input, Tensor other, *, Tensor out = None",
        "Tensor input, Tensor other, *, str rounding_mode, Tensor out = None",
        "Tensor input, Number other",
        "Tensor input, Number other, *, str rounding_mode",
    ),
    'eq': (
        "Tensor input, Tensor other, *, Tensor out = None",
        "Tensor input, Number other, *, Tensor out = None",
    ),
    'fake_quantize_per_tensor_affine': (
        "Tensor input, Tensor scale, Tensor zero_point, int quant_min, int quant_max",
        "Tensor input, float scale, int zero_point, int quant_min, int quant_max",
    ),
    'fill': (
        "Tensor input, Tensor value",
        "Tensor input, Number value",
    ),
    'float_power': (
        "Tensor input, Tensor exponent, *, Tensor out = None",
        "Number self, Tensor exponent, *, Tensor out = None",
        "Tensor input, Number exponent, *, Tensor out = None",
    ),
    'floor_divide': (
        "Tensor input, Tensor other, *, Tensor out = None",
        "Tensor input, Number other",
    ),
    'fmod': (
        "Tensor input, Tensor other, *, Tensor out = None",
        "Tensor input, Number other, *, Tensor out = None",
    ),
    'ge': (
        "Tensor input, Tensor other, *, Tensor out = None",
        "Tensor input, Number other, *, Tensor out = None",
    ),
    'greater': (
        "Tensor input, Tensor other, *, Tensor out = None",
        "Tensor input, Number other, *, Tensor out = None",
    ),
    'greater_equal': (
        "Tensor input, Tensor other, *, Tensor out = None",
        "Tensor input, Number other, *, Tensor out = None",
    ),
    'gt': (
        "Tensor input, Tensor other, *, Tensor out = None",
        "Tensor input, Number other, *, Tensor out = None",
    ),
    'histogram': (
        "Tensor input, Tensor bins, *, Tensor weight = None, bool density = False, tuple of "
        "Tensors out = None",
        "Tensor input, int bins = 100, *, tuple of floats range = None, Tensor weight = None, "
        "bool density = False, tuple of Tensors out = None",
    ),
    'histogramdd': (
        "Tensor input, int bins, tuple of floats range = None, Tensor weight = None, bool "
        "density = False",
        "Tensor input, tuple of ints bins, tuple of floats range = None, Tensor weight = None, "
        "bool density = False",
        "Tensor input, tuple of Tensors bins, tuple of floats range = None, Tensor weight = "
        "None, bool density = False",
    ),
    'index_fill': (
        "Tensor input, int dim, Tensor index, Tensor value",
        "Tensor input, int dim, Tensor index, Number value",
    ),
    'isin': (
        "Tensor elements, Tensor test_elements, *, bool assume_unique = False, bool invert = "
        "False, Tensor out = None",
        "Number element, Tensor test_elements, *, bool assume_unique = False, bool invert = "
        "False, Tensor out = None",
        "Tensor elements, Number test_element, *, bool assume_unique = False, bool invert = "
        "False, Tensor out = None",
    ),
    'le': (
        "Tensor input, Tensor other, *, Tensor out = None",
        "Tensor input, Number other, *, Tensor out = None",
    ),
    'lerp': (
        "Tensor input, Tensor end, Tensor weight, *, Tensor out = None",
        "Tensor input, Tensor end, Number weight, *, Tensor out = None",
    ),
    'less': (
        "Tensor input, Tensor other, *, Tensor out = None",
        "Tensor input, Number other, *, Tensor out = None",
    ),
    'less_equal': (
        "Tensor input, Tensor other, *, Tensor out = None",
        "Tensor input, Number other, *, Tensor out = None",
    ),
    'linalg_matrix_norm': (
        "Tensor input, Number ord, tuple of ints dim = {-2,-1}, bool keepdim = False, *, "
        "ember.dtype dtype = None, Tensor out = None",
        "Tensor input, str ord = \"fro\", tuple of ints dim = {-2,-1}, bool keepdim = False, *, "
        "ember.dtype dtype = None, Tensor out = None",
    ),
    'linalg_matrix_rank': (
        "Tensor input, *, Tensor atol = None, Tensor rtol = None, bool hermitian = False, "
        "Tensor out = None",
        "Tensor input, *, float atol = None, float rtol = None, bool hermitian = False, Tensor "
        "out = None",
        "Tensor input, Tensor tol, bool hermitian = False, *, Tensor out = None",
        "Tensor input, float tol, bool hermitian = False, *, Tensor out = None",
    ),
    'linalg_norm': (
        "Tensor input, Number ord = None, tuple of ints dim = None, bool keepdim = False, *, "
        "ember.dtype dtype = None, Tensor out = None",
        "Tensor input, str ord, tuple of ints dim = None, bool keepdim = False, *, ember.dtype "
        "dtype = None, Tensor out = None",
    ),
    'linalg_pinv': (
        "Tensor input, *, Tensor atol = None, Tensor rtol = None, bool hermitian = False, "
        "Tensor out = None",
        "Tensor input, *, float atol = None, float rtol = None, bool hermitian = False, Tensor "
        "out = None",
        "Tensor input, Tensor rcond, bool hermitian = False, *, Tensor out = None",
        "Tensor input, float rcond, bool hermitian = False, *, Tensor out = None",
    ),
    'lt': (
        "Tensor input, Tensor other, *, Tensor out = None",
        "Tensor input, Number other, *, Tensor out = None",
    ),
    'masked_fill': (
        "Tensor input, Tensor mask, Tensor value",
        "Tensor input, Tensor mask, Number value",
    ),
    'max': (
        "Tensor input, *, Tensor out = None",
        "Tensor input, Tensor other, *, Tensor out = None",
        "Tensor input, int dim, bool keepdim = False, *, tuple of Tensors out = None",
    ),
    'mean': (
        "Tensor input, *, ember.dtype dtype = None, Tensor out = None",
        "Tensor input, tuple of ints dim, bool keepdim = False, *, ember.dtype dtype = None, "
        "Tensor out = None",
    ),
    'median': (
        "Tensor input",
        "Tensor input, int dim, bool keepdim = False, *, tuple of Tensors out = None",
    ),
    'min': (
        "Tensor input, *, Tensor out = None",
        "Tensor input, Tensor other, *, Tensor out = None",
        "Tensor input, int dim, bool keepdim = False, *, tuple of Tensors out = None",
    ),
    'mm': (
        "Tensor input, Tensor mat2, *, Tensor out = None",
        "Tensor input, Tensor mat2, ember.dtype out_dtype, *, Tensor out = None",
    ),
    'moveaxis': (
        "Tensor input, int source, int destination",
        "Tensor input, tuple of ints source, tuple of ints destination",
    ),
    'movedim': (
        "Tensor input, int source, int destination",
        "Tensor input, tuple of ints source, tuple of ints destination",
    ),
    'multiply': (
        "Tensor input, Tensor other, *, Tensor out = None",
        "Tensor input, Number other",
    ),
    'nanmedian': (
        "Tensor input",
        "Tensor input, int dim, bool keepdim = False, *, tuple of Tensors out = None",
    ),
    'nanquantile': (
        "Tensor input, Tensor q, int dim = None, bool keepdim = False, *, str interpolation = "
        "\"linear\", Tensor out = None",
        "Tensor input, float q, int dim = None, bool keepdim = False, *, str interpolation = "
        "\"linear\", Tensor out = None",
    ),
    'narrow': (
        "Tensor input, int dim, Tensor start, int length",
        "Tensor input, int dim, int start, int length",
    ),
    'ne': (
        "Tensor input, Tensor other, *, Tensor out = None",
        "Tensor input, Number other, *, Tensor out = None",
    ),
    'not_equal': (
        "Tensor input, Tensor other, *, Tensor out = None",
        "Tensor input, Number other, *, Tensor out = None",
    ),
    'pow': (
        "Tensor input, Tensor exponent, *, Tensor out = None",
        "Number self, Tensor exponent, *, Tensor out = None",
        "Tensor input, Number exponent, *, Tensor out = None",
    ),
    'prod': (
        "Tensor input, *, ember.dtype dtype = None",
        "Tensor input, int dim, bool keepdim = False, *, ember.dtype dtype = None, Tensor out ="
        " None",
    ),
    'quantile': (
        "Tensor input, Tensor q, int dim = None, bool keepdim = False, *, str interpolation = "
        "\"linear\", Tensor out = None",
        "Tensor input, float q, int dim = None, bool keepdim = False, *, str interpolation = "
        "\"linear\", Tensor out = None",
    ),
    'remainder': (
        "Tensor input, Tensor other, *, Tensor out = None",
        "Number self, Tensor other",
        "Tensor input, Number other, *, Tensor out = None",
    ),
    'repeat_interleave': (
        "Tensor input, Tensor repeats, int dim = None, *, int output_size = None",
        "Tensor repeats, *, int output_size = None",
        "Tensor input, int repeats, int dim = None, *, int output_size = None",
    ),
    'round': (
        "Tensor input, *, Tensor out = None",
        "Tensor input, *, int decimals, Tensor out = None",
    ),
    'round_': (
        "Tensor input",
        "Tensor input, *, int decimals",
    ),
    'rsub': (
        "Tensor input, Tensor other, *, Number alpha = 1",
        "Tensor input, Number other, Number alpha = 1",
    ),
    'scatter': (
        "Tensor input, int dim, Tensor index, Tensor src, *, Tensor out = None",
        "Tensor input, int dim, Tensor index, Tensor src, *, str reduce, Tensor out = None",
        "Tensor input, int dim, Tensor index, Number value, *, Tensor out = None",
        "Tensor input, int dim, Tensor index, Number value, *, str reduce, Tensor out = None",
    ),
    'searchsorted': (
        "Tensor sorted_sequence, Tensor input, *, bool out_int32 = False, bool right = False, "
        "str side = None, Tensor sorter = None, Tensor out = None",
        "Tensor sorted_sequence, Number self, *, bool out_int32 = False, bool right = False, "
        "str side = None, Tensor sorter = None, Tensor out = None",
    ),
    'sort': (
        "Tensor input, *, bool stable, int dim = -1, bool descending = False, tuple of Tensors "
        "out = None",
        "Tensor input, int dim = -1, bool descending = False, *, tuple of Tensors out = None",
    ),
    'special_xlog1py': (
        "Tensor input, Tensor other, *, Tensor out = None",
        "Number self, Tensor other, *, Tensor out = None",
        "Tensor input, Number other, *, Tensor out = None",
    ),
    'special_zeta': (
        "Tensor input, Tensor other, *, Tensor out = None",
        "Number self, Tensor other, *, Tensor out = None",
        "Tensor input, Number other, *, Tensor out = None",
    ),
    'squeeze': (
        "Tensor input",
        "Tensor input, int dim",
        "Tensor input, tuple of ints dim",
    ),
    'std': (
        "Tensor input, tuple of ints dim, bool unbiased = True, bool keepdim = False, *, Tensor"
        " out = None",
        "Tensor input, tuple of ints dim = None, *, Number correction = None, bool keepdim = "
        "False, Tensor out = None",
        "Tensor input, bool unbiased = True",
    ),
    'std_mean': (
        "Tensor input, tuple of ints dim, bool unbiased = True, bool keepdim = False",
        "Tensor input, tuple of ints dim = None, *, Number correction = None, bool keepdim = "
        "False",
        "Tensor input, bool unbiased = True",
    ),
    'subtract': (
        "Tensor input, Tensor other, *, Number alpha = 1, Tensor out = None",
        "Tensor input, Number other, Number alpha = 1",
    ),
    'sum': (
        "Tensor input, *, ember.dtype dtype = None",
        "Tensor input, tuple of ints dim, bool keepdim = False, *, ember.dtype dtype = None, "
        "Tensor out = None",
    ),
    'tensor_split': (
        "Tensor input, tuple of ints indices, int dim = 0",
        "Tensor input, Tensor tensor_indices_or_sections, int dim = 0",
        "Tensor input, int sections, int dim = 0",
    ),
    'trapezoid': (
        "Tensor y, Tensor x, *, int dim = -1",
        "Tensor y, *, Number dx = 1, int dim = -1",
    ),
    'trapz': (
        "Tensor y, *, float dx = 1, int dim = -1",
        "Tensor y, Tensor x, *, int dim = -1",
    ),
    'true_divide': (
        "Tensor input, Tensor other, *, Tensor out = None",
        "Tensor input, Number other",
    ),
    'var': (
        "Tensor input, tuple of ints dim, bool unbiased = True, bool keepdim = False, *, Tensor"
        " out = None",
        "Tensor input, tuple of ints dim = None, *, Number correction = None, bool keepdim = "
        "False, Tensor out = None",
        "Tensor input, bool unbiased = True",
    ),
    'var_mean': (
        "Tensor input, tuple of ints dim, bool unbiased = True, bool keepdim = False",
        "Tensor input, tuple of ints dim = None, *, Number correction = None, bool keepdim = "
        "False",
        "Tensor input, bool unbiased = True",
    ),
    'where': (
        "Tensor condition",
        "Tensor condition, Tensor input, Tensor other, *, Tensor out = None",
        "Tensor condition, Number self, Tensor other",
        "Tensor condition, Tensor input, Number other",
        "Tensor condition, Number self, Number other",
    ),
    'xlogy': (
        "Tensor input, Tensor other, *, Tensor out = None",
        "Number self, Tensor other, *, Tensor out = None",
        "Tensor input, Number other, *, Tensor out = None",
    ),
    'xlogy_': (
        "Tensor input, Tensor other",
        "Tensor input, Number other",
    ),
}

# the window functions: the window length, then each overload one more optional parameter
_FACTORY = (", *, ember.dtype dtype = None, ember.layout layout = None, ember.device device = "
            "None, bool pin_memory = False, bool requires_grad = False")
for _name, _extras in (("bartlett_window", ()), ("blackman_window", ()), ("hann_window", ()),
                       ("hamming_window", ("float alpha", "float beta")),
                       ("kaiser_window", ("float beta",))):
    _params = ("int window_length", "bool periodic") + _extras
    FUNCTION_OVERLOADS[_name] = tuple(", ".join(_params[:n]) + _FACTORY
                                      for n in range(1, len(_params) + 1))
del _name, _extras, _params

# the random factories: each form with a generator (required), then without one
_DRAWN = ("Tensor out = None, ember.dtype dtype = None, ember.layout layout = None, ember.device "
          "device = None, bool pin_memory = False, bool requires_grad = False")
for _name, _forms in (("rand", ("tuple of ints size",)), ("randn", ("tuple of ints size",)),
                      ("randperm", ("int n",)),
                      ("randint", ("int high, tuple of ints size",
                                   "int low, int high, tuple of ints size"))):
    FUNCTION_OVERLOADS[_name] = tuple(f"{form}, *, {gen}{_DRAWN}" for form in _forms
                                      for gen in ("ember.Generator generator, ", ""))
FUNCTION_OVERLOADS["bernoulli"] = (
    "Tensor input, *, ember.Generator generator = None, Tensor out = None",
    "Tensor input, float p, *, ember.Generator generator = None",
)
FUNCTION_OVERLOADS["normal"] = (
    "Tensor mean, Tensor std, *, ember.Generator generator = None, Tensor out = None",
    "Tensor mean, float std = 1, *, ember.Generator generator = None, Tensor out = None",
    "float mean, Tensor std, *, ember.Generator generator = None, Tensor out = None",
    "float mean, float std, tuple of ints size, *, ember.Generator generator = None, " + _DRAWN,
)
del _name, _forms

# special_xlogy is xlogy's; the orthogonal polynomials take a Number x or a Number n
FUNCTION_OVERLOADS["special_xlogy"] = FUNCTION_OVERLOADS["xlogy"]
for _name in ("chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v",
              "chebyshev_polynomial_w", "shifted_chebyshev_polynomial_t",
              "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v",
              "shifted_chebyshev_polynomial_w", "hermite_polynomial_h", "hermite_polynomial_he",
              "laguerre_polynomial_l", "legendre_polynomial_p"):
    FUNCTION_OVERLOADS["special_" + _name] = tuple(
        f"{x} x, {n} n, *, Tensor out = None"
        for x, n in (("Tensor", "Tensor"), ("Number", "Tensor"), ("Tensor", "Number")))
del _name

# the methods whose signatures are not the functions' (or that have no function)
METHOD_OVERLOADS = {
    'random_': (
        "*, ember.Generator generator = None",
        "int from, int to, *, ember.Generator generator = None",
        "int to, *, ember.Generator generator = None",
    ),
    'nonzero': (
        "",
        "*, bool as_tuple",
    ),
    'to': (
        "ember.device device = None, ember.dtype dtype = None, bool non_blocking = False, bool "
        "copy = False, *, ember.memory_format memory_format = None",
        "ember.dtype dtype, bool non_blocking = False, bool copy = False, *, "
        "ember.memory_format memory_format = None",
        "Tensor tensor, bool non_blocking = False, bool copy = False, *, ember.memory_format "
        "memory_format = None",
    ),
    'view': (
        "ember.dtype dtype",
        "tuple of ints size",
    ),
    'where': (
        "Tensor condition, Tensor other",
        "Tensor condition, Number other",
    ),
}

# the functions whose method PyTorch declares once
SINGLE_METHODS = frozenset((
    "addmm", "baddbmm", "bmm", "conv1d", "conv2d", "conv3d", "histogramdd", "mm",
    "rsub", "std_mean", "var_mean",
))

# the native functions PyTorch's Python methods call with every argument by position, whose
# listing only their "invalid combination" errors give (``_dims.invalid_combination``)
FORWARDED_OVERLOADS = {
    'split': (
        "Tensor input, int split_size, int dim = 0",
        "Tensor input, tuple of ints split_size, int dim = 0",
    ),
}
