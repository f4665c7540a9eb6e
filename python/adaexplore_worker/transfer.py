"""Device-to-device transfer of candidate outputs to the trusted worker.

A candidate's output is copied into a fresh CUDA virtual-memory allocation,
which is exported as a POSIX file descriptor. The descriptor travels over the
worker's descriptor channel (a Unix socket to the judge, which relays it to the
trusted worker); the trusted worker imports it, maps it and clones the bytes
into its own memory. Nothing crosses the host: a gigabyte output costs a
millisecond instead of the second a file round trip takes.

Legacy CUDA IPC handles (what torch.multiprocessing uses) do not work between
processes in different PID namespaces, which is how the judge isolates
candidates; exported VMM descriptors do. Where any of this is unavailable the
judge falls back to files (common.write_raw / common.read_raw).
"""

import ctypes
import os
import socket

import torch

_ALLOC_PINNED = 1
_HANDLE_POSIX_FD = 1
_LOCATION_DEVICE = 1
_ACCESS_READWRITE = 3
_GRANULARITY_MINIMUM = 0
_ATTR_VMM = 102
_ATTR_POSIX_FD = 103


class _Location(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]


class _AllocFlags(ctypes.Structure):
    _fields_ = [("compressionType", ctypes.c_ubyte), ("gpuDirectRDMACapable", ctypes.c_ubyte),
                ("usage", ctypes.c_ushort), ("reserved", ctypes.c_ubyte * 4)]


class _AllocProp(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("requestedHandleTypes", ctypes.c_int), ("location", _Location),
                ("win32HandleMetaData", ctypes.c_void_p), ("allocFlags", _AllocFlags)]


class _AccessDesc(ctypes.Structure):
    _fields_ = [("location", _Location), ("flags", ctypes.c_int)]


class TransferError(RuntimeError):
    pass


# The driver library, loaded on first use; kept in a list so that the module's namespace
# (which the candidate's guard watches) never changes.
_libs = []


def _cuda():
    if not _libs:
        _lib = ctypes.CDLL("libcuda.so.1")
        _lib.cuMemAddressReserve.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t, ctypes.c_size_t,
                                             ctypes.c_uint64, ctypes.c_ulonglong]
        _lib.cuMemAddressFree.argtypes = [ctypes.c_uint64, ctypes.c_size_t]
        _lib.cuMemCreate.argtypes = [ctypes.POINTER(ctypes.c_ulonglong), ctypes.c_size_t,
                                     ctypes.POINTER(_AllocProp), ctypes.c_ulonglong]
        _lib.cuMemRelease.argtypes = [ctypes.c_ulonglong]
        _lib.cuMemMap.argtypes = [ctypes.c_uint64, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_ulonglong,
                                  ctypes.c_ulonglong]
        _lib.cuMemUnmap.argtypes = [ctypes.c_uint64, ctypes.c_size_t]
        _lib.cuMemSetAccess.argtypes = [ctypes.c_uint64, ctypes.c_size_t, ctypes.POINTER(_AccessDesc),
                                        ctypes.c_size_t]
        _lib.cuMemExportToShareableHandle.argtypes = [ctypes.c_void_p, ctypes.c_ulonglong, ctypes.c_int,
                                                      ctypes.c_ulonglong]
        _lib.cuMemImportFromShareableHandle.argtypes = [ctypes.POINTER(ctypes.c_ulonglong), ctypes.c_void_p,
                                                        ctypes.c_int]
        _lib.cuMemGetAllocationGranularity.argtypes = [ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(_AllocProp),
                                                       ctypes.c_int]
        _lib.cuDeviceGetAttribute.argtypes = [ctypes.POINTER(ctypes.c_int), ctypes.c_int, ctypes.c_int]
        _libs.append(_lib)
    return _libs[0]


def _check(rc, what):
    if rc != 0:
        raise TransferError("%s failed with CUresult %d" % (what, rc))


def _prop(device):
    p = _AllocProp()
    p.type = _ALLOC_PINNED
    p.requestedHandleTypes = _HANDLE_POSIX_FD
    p.location.type = _LOCATION_DEVICE
    p.location.id = device
    return p


def _size(nbytes, prop):
    gran = ctypes.c_size_t(0)
    _check(_cuda().cuMemGetAllocationGranularity(ctypes.byref(gran), ctypes.byref(prop), _GRANULARITY_MINIMUM),
           "cuMemGetAllocationGranularity")
    g = max(1, gran.value)
    return max(g, (nbytes + g - 1) // g * g)


class _Mapping:
    """A handle mapped read-write at a fresh address on this process's device."""

    def __init__(self, handle, size, device):
        lib = _cuda()
        self.size = size
        self.ptr = ctypes.c_uint64(0)
        _check(lib.cuMemAddressReserve(ctypes.byref(self.ptr), size, 0, 0, 0), "cuMemAddressReserve")
        try:
            _check(lib.cuMemMap(self.ptr.value, size, 0, handle, 0), "cuMemMap")
        except TransferError:
            lib.cuMemAddressFree(self.ptr.value, size)
            raise
        desc = _AccessDesc()
        desc.location.type = _LOCATION_DEVICE
        desc.location.id = device
        desc.flags = _ACCESS_READWRITE
        try:
            _check(lib.cuMemSetAccess(self.ptr.value, size, ctypes.byref(desc), 1), "cuMemSetAccess")
        except TransferError:
            self.close()
            raise

    def tensor(self, nbytes):
        ptr = self.ptr.value

        class _View:
            __cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1", "data": (ptr, False), "version": 2}
        return torch.as_tensor(_View(), device="cuda")

    def close(self):
        if self.ptr.value:
            _cuda().cuMemUnmap(self.ptr.value, self.size)
            _cuda().cuMemAddressFree(self.ptr.value, self.size)
            self.ptr = ctypes.c_uint64(0)


def _device():
    return torch.cuda.current_device()


def available():
    """True when this process can export device memory as POSIX descriptors."""
    try:
        if not torch.cuda.is_available():
            return False
        torch.cuda.init()
        lib = _cuda()
        dev = _device()
        for attr in (_ATTR_VMM, _ATTR_POSIX_FD):
            v = ctypes.c_int(0)
            if lib.cuDeviceGetAttribute(ctypes.byref(v), attr, dev) != 0 or not v.value:
                return False
        return True
    except Exception:
        return False


def export(t):
    """Copies a CUDA tensor into an exportable allocation; returns (fd, nbytes).

    This process keeps no mapping: once the descriptor is sent and closed,
    the allocation belongs to whoever imports it.
    """
    flat = t.detach().contiguous().reshape(-1)
    if flat.dtype == torch.bool:
        flat = flat.view(torch.uint8)
    nbytes = flat.numel() * flat.element_size()
    dev = _device()
    prop = _prop(dev)
    size = _size(nbytes, prop)
    lib = _cuda()
    handle = ctypes.c_ulonglong(0)
    _check(lib.cuMemCreate(ctypes.byref(handle), size, ctypes.byref(prop), 0), "cuMemCreate")
    try:
        m = _Mapping(handle.value, size, dev)
        try:
            if nbytes:
                m.tensor(nbytes).copy_(flat.view(torch.uint8))
            torch.cuda.synchronize()
        finally:
            m.close()
        fd = ctypes.c_int(-1)
        _check(lib.cuMemExportToShareableHandle(ctypes.byref(fd), handle.value, _HANDLE_POSIX_FD, 0),
               "cuMemExportToShareableHandle")
    finally:
        lib.cuMemRelease(handle.value)
    return fd.value, nbytes


def import_clone(fd, dtype, shape, close=True):
    """Maps an exported allocation and returns a private copy as dtype/shape.

    The size comes from the shape and dtype the trusted side expects; an
    allocation smaller than that fails to map instead of being read past.
    """
    numel = 1
    for s in shape:
        numel *= int(s)
    elsize = torch.empty((), dtype=dtype).element_size()
    nbytes = numel * elsize
    dev = _device()
    size = _size(nbytes, _prop(dev))
    lib = _cuda()
    handle = ctypes.c_ulonglong(0)
    try:
        _check(lib.cuMemImportFromShareableHandle(ctypes.byref(handle), ctypes.c_void_p(fd), _HANDLE_POSIX_FD),
               "cuMemImportFromShareableHandle")
    finally:
        if close:
            os.close(fd)
    try:
        m = _Mapping(handle.value, size, dev)
        try:
            if nbytes:
                raw = m.tensor(nbytes).clone()
            else:
                raw = torch.empty(0, dtype=torch.uint8, device="cuda")
            torch.cuda.synchronize()
        finally:
            m.close()
    finally:
        lib.cuMemRelease(handle.value)
    if dtype == torch.bool:
        return raw.view(torch.bool).reshape(shape)
    return raw.view(dtype).reshape(shape)


class Channel:
    """The worker's end of its descriptor channel (a SOCK_SEQPACKET socket)."""

    def __init__(self, fd, timeout=10.0):
        self.sock = socket.socket(fileno=fd)
        self.timeout = timeout

    def send(self, fd):
        socket.send_fds(self.sock, [b"f"], [fd])

    def receive(self, count):
        fds = []
        self.sock.settimeout(self.timeout)
        try:
            for _ in range(count):
                _, got, _, _ = socket.recv_fds(self.sock, 1, 1)
                if not got:
                    raise TransferError("the descriptor channel delivered a message without a descriptor")
                fds.extend(got)
        except (OSError, socket.timeout) as exc:
            for f in fds:
                os.close(f)
            raise TransferError("no descriptor arrived on the channel: %s" % exc)
        return fds


def open_channel():
    """The channel the judge passed (ADAEXPLORE_CHANNEL_FD), moved off its well-known number."""
    import random
    raw = os.environ.pop("ADAEXPLORE_CHANNEL_FD", "")
    if not raw:
        return None
    fd = int(raw)
    try:
        os.fstat(fd)
    except OSError:
        return None
    hidden = os.dup2(fd, random.randint(150, 299), inheritable=False)
    os.close(fd)
    return Channel(hidden)
