"""NumPy arrays handed to Triton's interpreter (``TRITON_INTERPRET=1``) as tensors, for
running the Triton kernels without a GPU."""


class Host:
    """A NumPy array as the interpreter takes a tensor: it asks for the parts of PyTorch's
    tensor API that copy device memory to the host and back, all identities here."""

    def __init__(self, array, offset=0):
        self.array, self.dtype, self.offset = array, array.dtype, offset

    def data_ptr(self):
        return self.array.ctypes.data + self.offset

    def at(self, nbytes):
        return Host(self.array, self.offset + nbytes)

    def untyped_storage(self):
        return self

    def cpu(self):
        return self

    def new_empty(self, *args, **kwargs):
        return self

    def set_(self, *args):
        return self

    def storage_offset(self):
        return 0

    def size(self):
        return self.array.shape

    def stride(self):
        return tuple(s // self.array.itemsize for s in self.array.strides)

    def copy_(self, other):
        return self
