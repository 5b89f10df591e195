"""``ember.nn.attention.flex_attention``: attention with user-written score and mask functions.

ember has no compiler, so ``flex_attention`` is always PyTorch's eager ("unfused") path: it
forms the full (B, H, L, S) score matrix. ``score_mod(score, b, h, q_idx, kv_idx)`` and the
block mask's ``mask_mod(b, h, q_idx, kv_idx)`` are called once, on index tensors shaped to
broadcast against the scores (b: (B,1,1,1), h: (1,H,1,1), q_idx: (1,1,L,1), kv_idx:
(1,1,1,S)), which for pointwise functions is what PyTorch's vmap over scalars computes. Being
ember ops, they give autograd and CUDA for free. As in PyTorch's eager path, only the mask_mod
decides what is masked; the block structure of a BlockMask describes it (for kernels that skip
empty tiles) but does not change the result. PyTorch also warns there that this path is
unfused and asks for ``torch.compile``; ember has no compiler, so it does not warn.
"""

import inspect
import itertools
import math
import warnings
from typing import NamedTuple, TypedDict

import ember
from ember._tensor import Tensor
from ember.nn.attention._validate import check_same_device_and_rank

__all__ = ["BlockMask", "flex_attention", "AuxOutput", "AuxRequest", "FlexKernelOptions",
           "create_block_mask", "create_mask", "or_masks", "and_masks", "noop_mask"]

_BACKENDS = ("AUTO", "TRITON", "FLASH", "TRITON_DECODE")
_WARNED = set()
# PyTorch's switch that silences the eager-path warning (for debugging score/mask mods)
_FLEX_ATTENTION_DISABLE_COMPILE_DEBUG = False
# PyTorch refuses inputs that require grad on the CPU (its kernels have no CPU backward);
# ember's eager path has one, which its own tests reach by setting this
_CPU_BACKWARD = False
_EAGER_WARNING = (
    "flex_attention called without torch.compile() - this will use an unfused implementation "
    "that materializes the full scores matrix instead of generating a fused kernel.\n\n"
    "SOLUTION: Use torch.compile(flex_attention)(...)\n\n"
    "If you want to debug your score_mod/mask_mod, you can set:\n"
    "torch.nn.attention.flex_attention._FLEX_ATTENTION_DISABLE_COMPILE_DEBUG = True\n\n"
    "This will allow you to use print statements or breakpoints. Note: This doesn't work with "
    "the backwards pass and may produce incorrect results.")


class FlexKernelOptions(TypedDict, total=False):
    """Options for PyTorch's Triton kernels; ember accepts them and has no use for them."""

    num_warps: int
    num_stages: int
    BLOCK_M: int
    BLOCK_N: int
    BLOCK_M1: int
    BLOCK_N1: int
    BLOCK_M2: int
    BLOCK_N2: int
    PRESCALE_QK: bool
    ROWS_GUARANTEED_SAFE: bool
    BLOCKS_ARE_CONTIGUOUS: bool
    WRITE_DQ: bool
    FORCE_USE_FLEX_ATTENTION: bool
    USE_TMA: bool
    kpack: int
    matrix_instr_nonkdim: int
    waves_per_eu: int
    BACKEND: str


class AuxRequest(NamedTuple):
    """Which auxiliary outputs ``flex_attention`` should return."""

    lse: bool = False
    max_scores: bool = False


class AuxOutput(NamedTuple):
    """Auxiliary outputs of ``flex_attention``; a field is None unless it was requested."""

    lse: Tensor | None = None
    max_scores: Tensor | None = None


def noop_mask(batch, head, token_q, token_kv):
    """A mask_mod that keeps every position."""
    return batch.new_ones((), dtype=ember.bool)


def _sliced_mask_mod_error(batch, head, token_q, token_kv):
    """The mask_mod of a sliced BlockMask: set it from the original BlockMask's mask_mod."""
    raise RuntimeError(
        "Cannot use mask_mod from a sliced BlockMask. When you slice a BlockMask using [], "
        "the mask_mod attribute is reset. You must set it from the original BlockMask's "
        "mask_mod.\n\nIncorrect usage:\n  base_mask = create_block_mask(my_mask_fn, ...)\n"
        "  sliced_mask = base_mask[:, :, block_idx]\n  sliced_mask.mask_mod = "
        "apply_offset(sliced_mask.mask_mod, offset)  # WRONG!\n\nCorrect usage:\n"
        "  base_mask = create_block_mask(my_mask_fn, ...)\n  sliced_mask = "
        "base_mask[:, :, block_idx]\n  sliced_mask.mask_mod = apply_offset(base_mask.mask_mod, "
        "offset)  # Use base_mask!")


def _ordered_to_dense(num_blocks, indices, num_cols):
    """(..., rows, num_cols) int32 0/1 tiles from the first ``num_blocks`` of each index row."""
    entries = indices.shape[-1]
    valid = ember.arange(entries, device=indices.device) < num_blocks.unsqueeze(-1)
    cols = ember.where(valid, indices.long(), num_cols)     # invalid entries: a spare column
    dense = ember.zeros(*indices.shape[:-1], num_cols + 1, dtype=ember.int32,
                        device=indices.device)
    return dense.scatter(-1, cols, 1)[..., :num_cols].contiguous()


def _dense_to_ordered(dense):
    """Counts and indices of each row's nonzero tiles, those first, each part ascending."""
    dense = dense.to(ember.int32)
    order = ember.argsort(dense, dim=-1, descending=True, stable=True)
    return dense.sum(-1).to(ember.int32), order.to(ember.int32)


def _transpose_ordered(num_blocks, indices):
    dense = _ordered_to_dense(num_blocks, indices, indices.shape[-1])
    return _dense_to_ordered(dense.transpose(-2, -1))


def _keep_dim(i, n):
    """An integer index as a slice of one, so that indexing keeps the dim."""
    if not isinstance(i, int):
        return i
    i = i + n if -n <= i < 0 else i
    return slice(i, i + 1)


class BlockMask:
    """Block-sparse description of an attention mask: for each (batch, head, query tile),
    the key/value tiles that are partly masked (``kv_*``) and fully kept (``full_kv_*``)."""

    def __init__(self, seq_lengths, kv_num_blocks, kv_indices, full_kv_num_blocks,
                 full_kv_indices, q_num_blocks, q_indices, full_q_num_blocks, full_q_indices,
                 BLOCK_SIZE=(128, 128), mask_mod=noop_mask, *, dq_write_order=None,
                 dq_write_order_full=None, dq_kv_order=None, dq_kv_order_spt=None):
        if kv_indices.dim() < 2:
            raise RuntimeError("BlockMask must have at least 2 dimensions")
        if (full_kv_num_blocks is None) != (full_kv_indices is None):
            raise AssertionError("full_kv_num_blocks and full_kv_indices must be both provided "
                                 "or omitted")
        if (full_q_num_blocks is None) != (full_q_indices is None):
            raise AssertionError("full_q_num_blocks and full_q_indices must be both provided or "
                                 "omitted")
        if dq_write_order_full is not None and dq_write_order is None:
            raise ValueError("dq_write_order_full requires dq_write_order")
        self.seq_lengths = seq_lengths
        self.kv_num_blocks, self.kv_indices = kv_num_blocks, kv_indices
        self.full_kv_num_blocks, self.full_kv_indices = full_kv_num_blocks, full_kv_indices
        self.q_num_blocks, self.q_indices = q_num_blocks, q_indices
        self.full_q_num_blocks, self.full_q_indices = full_q_num_blocks, full_q_indices
        # metadata of PyTorch's deterministic FLASH backward: kept, never computed here
        self.dq_write_order, self.dq_write_order_full = dq_write_order, dq_write_order_full
        self.dq_kv_order, self.dq_kv_order_spt = dq_kv_order, dq_kv_order_spt
        self.BLOCK_SIZE = BLOCK_SIZE
        self.mask_mod = mask_mod

    @classmethod
    def from_kv_blocks(cls, kv_num_blocks, kv_indices, full_kv_num_blocks=None,
                       full_kv_indices=None, BLOCK_SIZE=128, mask_mod=None, seq_lengths=None,
                       compute_q_blocks=True, *, dq_write_order=None, dq_write_order_full=None,
                       dq_kv_order=None):
        """A BlockMask from its key/value tile lists; the query-side lists are derived."""
        if kv_indices.dim() < 2:
            raise RuntimeError("BlockMask must have at least 2 dimensions")
        if (full_kv_num_blocks is None) != (full_kv_indices is None):
            raise AssertionError("full_kv_num_blocks and full_kv_indices must be both provided "
                                 "or omitted")
        q_num, q_idx = full_q_num, full_q_idx = None, None
        if compute_q_blocks:
            q_num, q_idx = _transpose_ordered(kv_num_blocks, kv_indices)
            if full_kv_num_blocks is not None:
                full_q_num, full_q_idx = _transpose_ordered(full_kv_num_blocks, full_kv_indices)
        if isinstance(BLOCK_SIZE, int):
            BLOCK_SIZE = (BLOCK_SIZE, BLOCK_SIZE)
        if seq_lengths is None:
            seq_lengths = (kv_indices.shape[-2] * BLOCK_SIZE[0],
                           kv_indices.shape[-1] * BLOCK_SIZE[1])
        if dq_kv_order is not None and not isinstance(dq_kv_order, (bool, Tensor)):
            raise ValueError("dq_kv_order must be a bool, Tensor, or None")
        spt = dq_kv_order if isinstance(dq_kv_order, bool) else None
        return cls(seq_lengths, kv_num_blocks, kv_indices, full_kv_num_blocks, full_kv_indices,
                   q_num, q_idx, full_q_num, full_q_idx, BLOCK_SIZE,
                   mask_mod if mask_mod is not None else noop_mask,
                   dq_write_order=dq_write_order, dq_write_order_full=dq_write_order_full,
                   dq_kv_order=dq_kv_order if isinstance(dq_kv_order, Tensor) else None,
                   dq_kv_order_spt=spt)

    def as_tuple(self, flatten=True):
        """The attributes as a tuple; ``flatten`` spreads seq_lengths and BLOCK_SIZE out."""
        seq, block = (self.seq_lengths, self.BLOCK_SIZE) if flatten else \
            ((self.seq_lengths,), (self.BLOCK_SIZE,))
        return (*seq, self.kv_num_blocks, self.kv_indices, self.full_kv_num_blocks,
                self.full_kv_indices, self.q_num_blocks, self.q_indices, self.full_q_num_blocks,
                self.full_q_indices, self.dq_write_order, self.dq_write_order_full,
                self.dq_kv_order, self.dq_kv_order_spt, *block, self.mask_mod)

    @property
    def shape(self):
        """(*batch dims, Q_LEN, KV_LEN)."""
        return tuple(self.kv_indices.shape[:-2]) + tuple(self.seq_lengths)

    def numel(self):
        """The number of elements the mask covers, sparsity not counted."""
        return math.prod(self.shape)

    def sparsity(self):
        """The percentage of the mask that no tile computes."""
        blocks = self.kv_num_blocks.sum().item()
        if self.full_kv_num_blocks is not None:
            blocks += self.full_kv_num_blocks.sum().item()
        return 100 * (1 - blocks * self.BLOCK_SIZE[0] * self.BLOCK_SIZE[1] / self.numel())

    def to_dense(self):
        """The (..., query tiles, kv tiles) int32 map of computed (1) and skipped (0) tiles."""
        dense = _ordered_to_dense(self.kv_num_blocks, self.kv_indices,
                                  self.kv_indices.shape[-1])
        if self.full_kv_num_blocks is not None:
            dense = dense | _ordered_to_dense(self.full_kv_num_blocks, self.full_kv_indices,
                                              self.full_kv_indices.shape[-1])
        return dense

    def to_string(self, grid_size=(20, 20), limit=4):
        """A picture of the tiles (full: █, partial: ░), shrunk to ``grid_size`` cells;
        -1 prints every tile."""
        dense = self.to_dense()
        *batch, rows, cols = dense.shape
        max_rows, max_cols = (grid_size, grid_size) if isinstance(grid_size, int) else grid_size
        step_r, step_c = max(1, -(-rows // max_rows)), max(1, -(-cols // max_cols))
        pictures = []
        for n, index in enumerate(itertools.product(*(range(i) for i in batch))):
            if n == limit:
                pictures += ["...", "To print out more, set BlockMask.to_string(limit=N)",
                             "You can also index (BlockMask[batch, head]) to choose a "
                             "specific batch or head"]
                break
            tiles = dense[index].tolist()
            text = f"{index}\n"
            for r in range(0, rows, step_r):
                for c in range(0, cols, step_c):
                    cell = [v for row in tiles[r:r + step_r] for v in row[c:c + step_c]]
                    text += 2 * ("█" if all(cell) else "░" if any(cell) else " ")
                text += "\n"
            pictures.append(text)
        return "\n".join(pictures)

    def __str__(self):
        return (f"BlockMask(shape={self.shape}, sparsity={self.sparsity():.2f}%, \n"
                f"{self.to_string().strip()}\n)")

    def __repr__(self):
        def shape(t):
            return None if t is None else t.shape
        mask_mod = getattr(self.mask_mod, "__name__", self.mask_mod)
        return (f"BlockMask(\n    kv_num_blocks={self.kv_num_blocks.shape},\n"
                f"    kv_indices={self.kv_indices.shape},\n"
                f"    full_kv_num_blocks={shape(self.full_kv_num_blocks)},\n"
                f"    full_kv_indices={shape(self.full_kv_indices)},\n"
                f"    q_num_blocks={shape(self.q_num_blocks)},\n"
                f"    q_indices={shape(self.q_indices)},\n"
                f"    full_q_num_blocks={shape(self.full_q_num_blocks)},\n"
                f"    full_q_indices={shape(self.full_q_indices)},\n"
                f"    BLOCK_SIZE={self.BLOCK_SIZE},\n    shape={self.shape},\n"
                f"    sparsity={self.sparsity():.2f}%,\n    mask_mod={mask_mod}\n)")

    def __getitem__(self, index):
        """The mask of some batches, heads or query tiles; integer indices keep their dim."""
        if self.dq_kv_order is not None:
            raise NotImplementedError(
                "Slicing BlockMask with tensor dq_kv_order is not supported yet. Construct a "
                "new BlockMask with matching precomputed dq_write_order metadata.")
        index = index if isinstance(index, tuple) else (index,)
        index = (*index, slice(None), slice(None), slice(None))[:3]
        index = tuple(_keep_dim(i, n)
                      for i, n in zip(index, self.kv_num_blocks.shape[:3], strict=True))
        full = (None, None) if self.full_kv_num_blocks is None else \
            (self.full_kv_num_blocks[index], self.full_kv_indices[index])
        sliced = BlockMask.from_kv_blocks(
            self.kv_num_blocks[index], self.kv_indices[index], *full,
            BLOCK_SIZE=self.BLOCK_SIZE, mask_mod=_sliced_mask_mod_error,
            seq_lengths=self.seq_lengths, compute_q_blocks=self.q_indices is not None)
        sliced.dq_kv_order_spt = self.dq_kv_order_spt
        return sliced

    def to(self, device):
        """A copy with every tensor on ``device``."""
        moved = BlockMask.__new__(BlockMask)
        for name, value in vars(self).items():
            setattr(moved, name, value.to(device) if isinstance(value, Tensor) else value)
        return moved


def _positional_args(fn):
    """How many positional parameters without a default ``fn`` takes (4: mask_mod,
    5: score_mod)."""
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    n = sum(p.kind in kinds and p.default is p.empty
            for p in inspect.signature(fn).parameters.values())
    if n not in (4, 5):
        raise AssertionError(f"Expected 4 or 5 positional args, got {n}")
    return n


def _indices(sizes, device, dtype):
    """b, h, q_idx, kv_idx as aranges shaped to broadcast over (B, H, L, S)."""
    return [ember.arange(n, dtype=dtype, device=device).view([-1 if d == i else 1
                                                              for d in range(4)])
            for i, n in enumerate(sizes)]


def _default_device(device):
    if device is None:
        device = ember.accelerator.current_accelerator() or "cpu"
    return device


def create_mask(mod_fn, B, H, Q_LEN, KV_LEN, device=None):
    """The dense (B, H, Q_LEN, KV_LEN) bool mask of a mask_mod, or for a score_mod, where it
    leaves zero scores above -inf; B or H None means 1."""
    device = _default_device(device)
    shape = (B or 1, H or 1, Q_LEN, KV_LEN)
    index = _indices(shape, device, ember.int64)
    if _positional_args(mod_fn) == 5:
        scores = mod_fn(ember.zeros(shape, device=device), *index)
        mask = ember.isneginf(scores).logical_not()
    else:
        mask = mod_fn(*index)
    return ember.broadcast_to(mask, shape).contiguous()


def create_block_mask(mask_mod, B, H, Q_LEN, KV_LEN, device=None, BLOCK_SIZE=128,
                      _compile=False, separate_full_blocks=True, compute_dq_write_order=False,
                      dq_kv_order=True):
    """The BlockMask of ``mask_mod`` over (B, H, Q_LEN, KV_LEN), B or H None meaning 1
    (broadcast). ``_compile`` and the dq write-order options (for PyTorch's kernels) are
    accepted and ignored."""
    device = _default_device(device)
    if _positional_args(mask_mod) != 4:
        raise AssertionError(f"create-block_mask requires a mask_mod function! Got {mask_mod}")
    bq, bkv = (BLOCK_SIZE, BLOCK_SIZE) if isinstance(BLOCK_SIZE, int) else BLOCK_SIZE
    if not isinstance(dq_kv_order, bool):
        raise ValueError("dq_kv_order must be a bool when using create_block_mask")
    mask = create_mask(mask_mod, B, H, Q_LEN, KV_LEN, device)
    if mask.dtype is not ember.bool:
        raise AssertionError(f"mask.dtype must be {ember.bool}, got {mask.dtype}")
    # pad with masked positions to whole tiles, then count the kept positions of each tile
    mask = ember.nn.functional.pad(mask, (0, -KV_LEN % bkv, 0, -Q_LEN % bq))
    b, h, q, kv = mask.shape
    kept = mask.view(b, h, q // bq, bq, kv // bkv, bkv).sum((3, 5))
    full = kept == bq * bkv
    partial = (kept > 0) & full.logical_not() if separate_full_blocks else kept > 0
    full = _dense_to_ordered(full) if separate_full_blocks else (None, None)
    return BlockMask.from_kv_blocks(*_dense_to_ordered(partial), *full, BLOCK_SIZE=(bq, bkv),
                                    mask_mod=mask_mod, seq_lengths=(Q_LEN, KV_LEN))


def _check_mask_mods(mask_mods):
    if not all(callable(m) for m in mask_mods):
        raise RuntimeError(f"All inputs should be callable mask_mods: {mask_mods}")


def or_masks(*mask_mods):
    """A mask_mod keeping what any of ``mask_mods`` keeps."""
    _check_mask_mods(mask_mods)

    def or_mask(b, h, q_idx, kv_idx):
        result = b.new_zeros((), dtype=ember.bool)
        for mask_mod in mask_mods:
            result = result | mask_mod(b, h, q_idx, kv_idx)
        return result
    return or_mask


def and_masks(*mask_mods):
    """A mask_mod keeping what all of ``mask_mods`` keep."""
    _check_mask_mods(mask_mods)

    def and_mask(b, h, q_idx, kv_idx):
        result = b.new_ones((), dtype=ember.bool)
        for mask_mod in mask_mods:
            result = result & mask_mod(b, h, q_idx, kv_idx)
        return result
    return and_mask


def _check(query, key, value, block_mask, enable_gqa):
    """PyTorch's checks of flex_attention's inputs, in its order and words."""
    check_same_device_and_rank(query, key, value)
    if query.size(-1) != key.size(-1):
        raise ValueError(f"Expect query and key/value to have the same embedding dimension but "
                         f"got E={query.size(-1)} and E={key.size(-1)}.")
    if query.device.type == "cpu" and not _CPU_BACKWARD and (
            query.requires_grad or key.requires_grad or value.requires_grad):
        raise NotImplementedError("FlexAttention does not support backward on CPU. Please set "
                                  "the input requires_grad to False or use another device.")
    if query.dim() != 4 or key.dim() != 4 or value.dim() != 4:
        raise NotImplementedError("NYI: query, key, and value must be 4D tensors")
    hq, hkv = query.size(1), key.size(1)
    if not enable_gqa and hq != hkv:
        raise ValueError(f"Expect query and key/value to have the same number of heads but got "
                         f"Hq={hq} and Hkv={hkv}. Try setting enable_gqa=True for GQA.")
    if enable_gqa and hq % hkv:
        raise ValueError(f"Expect number of query heads to be a multiple of kv heads for GQA "
                         f"but got Hq={hq} and Hkv={hkv}.")
    bq, bkv = query.size(0), key.size(0)
    if bq != bkv and block_mask is None:
        raise ValueError(f"Expect query and key/value to have the same batch size, or non-none "
                         f"block_mask, but got block_mask=None, Bq={bq}, and Bkv={bkv}.")
    if bq != bkv and block_mask.kv_num_blocks.size(0) != bq:
        raise ValueError(f"Expect query and key/value to have the same batch size, or "
                         f"block_mask and query to have the same batch size, but got Bq={bq}, "
                         f"Bkv={bkv}, B_block_mask={block_mask.kv_num_blocks.size(0)}.")
    if block_mask is None:
        return
    if block_mask.mask_mod is _sliced_mask_mod_error:
        raise RuntimeError("Cannot use mask_mod from a sliced BlockMask")
    shape, (L, S) = block_mask.shape, (query.size(-2), key.size(-2))
    if L > shape[-2] or S > shape[-1]:
        raise ValueError(f"block_mask was created for block_mask.shape={shape} but got q_len="
                         f"{L} and kv_len={S}. As the block mask was created for a smaller "
                         f"length than you're using it for, you likely need to create a new "
                         f"block mask.")
    if (L, S) != shape[-2:]:
        raise ValueError(
            f"block_mask was created for block_mask.shape={shape} but got q_len={L} and "
            f"kv_len={S}. As the block mask was created for a larger length than you're using "
            f"it for, you can either 1. create a new block mask with the correct length, or 2. "
            f"'adjust' the existing block mask to the correct length by calling "
            f"block_mask._adjust(q_len, kv_len). This essentially 'crops' the block mask to the "
            f"upper left corner, which does not work for all mask_mods!")
    if query.device != block_mask.kv_num_blocks.device:
        raise RuntimeError(f"Expect q/k/v and block_mask to be on the same device but got "
                           f"{query.device} and {block_mask.kv_num_blocks.device}.")


def _check_options(return_lse, return_aux, kernel_options):
    if return_lse and return_aux is not None:
        raise ValueError("Cannot specify both return_lse and return_aux. return_lse is "
                         "deprecated, please use return_aux=AuxRequest(lse=True) instead.")
    if return_lse and "return_lse" not in _WARNED:
        _WARNED.add("return_lse")
        warnings.warn("return_lse is deprecated and will be removed in v2.10. Please use "
                      "return_aux=AuxRequest(lse=True) instead.", FutureWarning, stacklevel=3)
    options = dict(kernel_options or {})
    if "BACKEND" in options and options.get("FORCE_USE_FLEX_ATTENTION", False):
        raise RuntimeError("BACKEND cannot be combined with legacy FORCE_USE_FLEX_ATTENTION. "
                           "BACKEND supersedes the legacy knob; please drop "
                           "FORCE_USE_FLEX_ATTENTION and only specify the desired BACKEND.")
    if options.get("BACKEND", "AUTO") not in _BACKENDS:
        raise ValueError(f"Invalid BACKEND value '{options['BACKEND']}'. Must be one of "
                         f"{_BACKENDS}")


def _warn_eager():
    """PyTorch's once-per-process warning that eager flex_attention is unfused (not given
    through ``ember.compile(flex_attention)``, which returns ``_compiled_flex_attention``)."""
    if _FLEX_ATTENTION_DISABLE_COMPILE_DEBUG or _COMPILED[0] or "eager" in _WARNED:
        return
    _WARNED.add("eager")
    warnings.warn(_EAGER_WARNING, UserWarning, stacklevel=2)   # (PyTorch's: its module)


_COMPILED = [False]         # inside _compiled_flex_attention


def flex_attention(query, key, value, score_mod=None, block_mask=None, scale=None,
                   enable_gqa=False, return_lse=False, kernel_options=None, *, return_aux=None):
    """softmax(mask_mod(score_mod(Q K^T * scale))) V over (B, H, L, E) inputs; see the module
    docstring. Returns the output, plus the log-sum-exp (natural log, float32 or float64)
    with ``return_lse``, or an AuxOutput with ``return_aux``."""
    _check(query, key, value, block_mask, enable_gqa)
    _check_options(return_lse, return_aux, kernel_options)
    _warn_eager()
    B, Hq, L, E = query.shape
    Bkv, Hkv, S = key.shape[:3]
    if B != Bkv and Bkv != 1:
        raise RuntimeError(f"Bq and Bkv must broadcast. Got Bq={B} and Bkv={Bkv}")
    if S == 0:
        raise IndexError("max(): Expected reduction dim 3 to have non-zero size.")
    work = ember.float64 if query.dtype is ember.float64 else ember.float32
    scale = 1.0 / math.sqrt(E) if scale is None else scale
    # grouped-query attention: query heads g*G .. g*G+G-1 share key/value head g
    G = Hq // Hkv
    q = query.to(work).reshape(B, Hkv, G, L, E)
    k, v = key.to(work).unsqueeze(2), value.to(query.dtype).unsqueeze(2)
    scores = (q @ k.transpose(-2, -1)).reshape(B, Hq, L, S) * scale
    index = _indices((B, Hq, L, S), query.device, ember.int32)
    if score_mod is not None:
        scores = ember.broadcast_to(score_mod(scores, *index), (B, Hq, L, S))
    if block_mask is not None:
        scores = scores.masked_fill(block_mask.mask_mod(*index).logical_not(), -math.inf)
    # softmax that gives rows masked throughout zero weights rather than NaN; the shift
    # cancels out of the softmax and the log-sum-exp, so it needs no gradient
    top = scores.amax(-1, keepdim=True).detach()
    top = top.masked_fill(top == -math.inf, 0.0)
    exp = (scores - top).exp()
    total = exp.sum(-1, keepdim=True)
    empty = total == 0
    weights = exp / total.masked_fill(empty, 1.0)
    out = (weights.to(query.dtype).reshape(B, Hkv, G, L, S) @ v).reshape(B, Hq, L, value.size(-1))
    want_lse = return_lse or (return_aux is not None and return_aux.lse)
    lse = None
    if want_lse and B * Hq * L:
        lse = (total.masked_fill(empty, 1.0).log() + top).masked_fill(empty, -math.inf)
        lse = lse.squeeze(-1)
    if return_aux is not None:
        top = scores.amax(-1) if return_aux.max_scores and B * Hq * L else None
        return out, AuxOutput(lse=lse, max_scores=top)
    return (out, lse) if return_lse else out


def _compiled_flex_attention(*args, **kwargs):
    """``flex_attention`` as ``ember.compile`` gives it: the same eager computation, without
    the warning that advises compiling."""
    previous, _COMPILED[0] = _COMPILED[0], True
    try:
        return flex_attention(*args, **kwargs)
    finally:
        _COMPILED[0] = previous


flex_attention._ember_compiled = _compiled_flex_attention
