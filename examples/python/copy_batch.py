"""copy_batch.py — libmtc from Python through ctypes, and results handed to
PyTorch (or NumPy) through DLPack without a copy.

Walks a nested structure (dicts, lists, tuples) of NumPy arrays, describes
every array as an mtc_leaf, adds them all with ONE mtc_plan_add_leaves call,
copies them to cuda:0 (or, with no CUDA device, to the host), waits, and
rebuilds the structure with the results. Each result is an object with
__dlpack__ and __dlpack_device__, so torch.from_dlpack(result) views the
copy in place; the script checks that (same data pointer) and that every
value equals its NumPy input. Without torch, results are read back with
np.from_dlpack on host copies. Exits 0 when every check passed.

    python3 examples/python/copy_batch.py
    MTC_CUDA_DRIVER=zig-out/lib/libfakecuda.so python3 examples/python/copy_batch.py   # emulated GPUs

The library is MTC_LIBRARY_PATH, else the repository's zig-out/lib/libmtc.so,
else (in an installed npm package, which ships this file) the package's
prebuilt/linux-x64/libmtc.so, or prebuilt/linux-arm64/libmtc.so on arm64.
MTC_REQUIRE_GPU=1 makes the absence of a CUDA device an error.
"""

import ctypes
import os
import sys
from pathlib import Path

try:
    import numpy as np
except ImportError:
    sys.exit("copy_batch.py needs NumPy (pip install numpy); torch is optional")

# ----------------------------------------------------------- the C ABI (mtc.h)

c_u32, c_i32, c_u64, c_i64, c_ptr = ctypes.c_uint32, ctypes.c_int32, ctypes.c_uint64, ctypes.c_int64, ctypes.c_void_p

MTC_OK, MTC_IN_PROGRESS = 0, 1
MTC_DEVICE_CPU = -1
MTC_RESULT_REUSED = 1


class Leaf(ctypes.Structure):  # mtc_leaf, 40 bytes
    _fields_ = [("address", c_u64), ("bytes", c_u64), ("row_pitch", c_u64), ("device", c_i32),
                ("element_size", c_u32), ("row_count", c_u32), ("flags", c_u32)]


class LeafResult(ctypes.Structure):  # mtc_leaf_result, 32 bytes
    _fields_ = [("address", c_u64), ("block", c_ptr), ("offset", c_u64), ("device", c_i32), ("flags", c_u32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", c_i32), ("device_id", c_i32)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", c_ptr), ("device", DLDevice), ("ndim", c_i32), ("dtype", DLDataType),
                ("shape", ctypes.POINTER(c_i64)), ("strides", ctypes.POINTER(c_i64)), ("byte_offset", c_u64)]


class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [("major", c_u32), ("minor", c_u32), ("manager_ctx", c_ptr), ("deleter", c_ptr),
                ("flags", c_u64), ("dl_tensor", DLTensor)]


class Stats(ctypes.Structure):  # the first 80 bytes of mtc_stats (the 0.1 size, still accepted)
    _fields_ = [("struct_size", c_u32), ("staging_threads", c_u32), ("plans_live", c_u64), ("blocks_live", c_u64),
                ("device_bytes_live", c_u64), ("host_bytes_live", c_u64), ("pinned_bytes_cached", c_u64),
                ("pinned_bytes_in_use", c_u64), ("pinned_allocations", c_u64), ("pinned_reuses", c_u64),
                ("pinned_limit_bytes", c_u64)]


assert ctypes.sizeof(Stats) == 80
assert ctypes.sizeof(Leaf) == 40 and ctypes.sizeof(LeafResult) == 32 and ctypes.sizeof(DLManagedTensorVersioned) == 80

KDL_CPU, KDL_CUDA = 1, 2
# NumPy dtype kind -> DLPack type code (int, uint, float, complex, bool).
DLPACK_CODES = {"i": 0, "u": 1, "f": 2, "c": 5, "b": 6}


WRITTEN_FOR = 100  # mtc_version_number() of libmtc 0.1.0, whose ABI this file declares


def load_library() -> ctypes.CDLL:
    root = Path(__file__).resolve().parents[2]  # the repository, or the installed package
    cpu = {"x86_64": "x64", "aarch64": "arm64"}.get(os.uname().machine, os.uname().machine)
    tried = [os.environ["MTC_LIBRARY_PATH"]] if os.environ.get("MTC_LIBRARY_PATH") else [
        str(root / "zig-out/lib/libmtc.so"), str(root / f"prebuilt/linux-{cpu}/libmtc.so")]
    path = next((p for p in tried if Path(p).exists()), None)
    if path is None:
        sys.exit(f"copy_batch.py: no libmtc at {' or '.join(tried)}: build it (zig build) or set MTC_LIBRARY_PATH")
    lib = ctypes.CDLL(path)
    signatures = {
        "mtc_version_number": ([], c_u32),
        "mtc_version_string": ([], ctypes.c_char_p),
        "mtc_status_name": ([c_i32], ctypes.c_char_p),
        "mtc_last_error": ([], ctypes.c_char_p),
        "mtc_cuda_device_count": ([ctypes.POINTER(c_i32)], c_i32),
        "mtc_plan_create": ([c_i32, c_ptr, ctypes.POINTER(c_ptr)], c_i32),
        "mtc_plan_add_leaves": ([c_ptr, ctypes.POINTER(Leaf), c_u64], c_i32),
        "mtc_plan_submit": ([c_ptr], c_i32),
        "mtc_plan_poll": ([c_ptr], c_i32),
        "mtc_plan_wait": ([c_ptr], c_i32),
        "mtc_plan_results": ([c_ptr, c_u64, c_u64, ctypes.POINTER(LeafResult)], c_i32),
        "mtc_plan_last_error": ([c_ptr], ctypes.c_char_p),
        "mtc_plan_error_leaf": ([c_ptr], c_i64),
        "mtc_plan_release": ([c_ptr], None),
        "mtc_block_retain": ([c_ptr], None),
        "mtc_block_release": ([c_ptr], None),
        "mtc_block_to_dlpack": ([c_ptr, c_u64, ctypes.POINTER(c_i64), c_i32, ctypes.POINTER(DLDataType), c_u32,
                                 ctypes.POINTER(ctypes.POINTER(DLManagedTensorVersioned))], c_i32),
        "mtc_dlpack_delete": ([c_ptr], None),
        "mtc_get_stats": ([ctypes.POINTER(Stats)], c_i32),
    }
    for name, (args, result) in signatures.items():
        fn = getattr(lib, name)
        fn.argtypes, fn.restype = args, result
    # The rule of docs/VERSIONING.md: the same major, and before 1.0 the same minor.
    if lib.mtc_version_number() // 100 != WRITTEN_FOR // 100:
        sys.exit(f"copy_batch.py: written for libmtc 0.1.x, loaded {lib.mtc_version_string().decode()}")
    return lib


lib = load_library()


class MtcError(Exception):
    pass


def blocks_live() -> int:
    stats = Stats(struct_size=ctypes.sizeof(Stats))
    check(lib.mtc_get_stats(ctypes.byref(stats)), "mtc_get_stats")
    return stats.blocks_live


def check(status: int, what: str, plan=None) -> None:
    if status != MTC_OK:
        message = (lib.mtc_plan_last_error(plan) if plan else b"") or lib.mtc_last_error()
        raise MtcError(f"{what}: {lib.mtc_status_name(status).decode()}: {message.decode()}")


# ------------------------------------------------- DLPack capsules (ctypes)

api = ctypes.pythonapi
api.PyCapsule_New.argtypes = [c_ptr, ctypes.c_char_p, c_ptr]
api.PyCapsule_New.restype = ctypes.py_object
api.PyCapsule_IsValid.argtypes = [c_ptr, ctypes.c_char_p]
api.PyCapsule_IsValid.restype = ctypes.c_int
api.PyCapsule_GetPointer.argtypes = [c_ptr, ctypes.c_char_p]
api.PyCapsule_GetPointer.restype = c_ptr

# The capsule keeps a pointer to its name, not a copy: module-lifetime storage.
CAPSULE_NAME = ctypes.create_string_buffer(b"dltensor_versioned")


@ctypes.CFUNCTYPE(None, c_ptr)  # the capsule as a raw pointer: it is being destroyed
def capsule_destructor(capsule):
    # A consumer that took the tensor renamed the capsule "used_dltensor_versioned"
    # and calls the deleter itself; still named "dltensor_versioned", nobody
    # took it, so the tensor is freed here. (A Python destructor cannot run
    # while a consumer that refused the tensor has its error pending, as
    # NumPy does for CUDA tensors: hand each consumer what it reads.)
    if api.PyCapsule_IsValid(capsule, CAPSULE_NAME):
        lib.mtc_dlpack_delete(api.PyCapsule_GetPointer(capsule, CAPSULE_NAME))


class MtcTensor:
    """A copied leaf: one reference to its libmtc block, and the DLPack protocol."""

    def __init__(self, result: LeafResult, shape: tuple, dtype: np.dtype):
        self.address, self.offset, self.device = result.address, result.offset, result.device
        self.shape, self.dtype = shape, dtype
        self.block = result.block
        lib.mtc_block_retain(self.block)  # the plan's reference goes with the plan

    def __dlpack_device__(self):
        return (KDL_CPU, 0) if self.device == MTC_DEVICE_CPU else (KDL_CUDA, self.device)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        # `stream`: the consumer's stream. Nothing to order: the copy finished
        # (mtc_plan_wait returned) before this object existed.
        if max_version is None or max_version[0] < 1:
            raise BufferError("libmtc exports DLPack 1.x tensors only (max_version >= (1, 0))")
        if copy or (dl_device is not None and tuple(dl_device) != self.__dlpack_device__()):
            raise BufferError("libmtc exports views of its results only (no copy, no other device)")
        if self.block is None:
            raise BufferError("released")
        shape = (c_i64 * max(len(self.shape), 1))(*self.shape)
        dtype = DLDataType(DLPACK_CODES[self.dtype.kind], self.dtype.itemsize * 8, 1)
        out = ctypes.POINTER(DLManagedTensorVersioned)()
        check(lib.mtc_block_to_dlpack(self.block, self.offset, shape, len(self.shape), ctypes.byref(dtype), 0,
                                      ctypes.byref(out)), "mtc_block_to_dlpack")
        return api.PyCapsule_New(ctypes.cast(out, c_ptr), CAPSULE_NAME, ctypes.cast(capsule_destructor, c_ptr))

    def release(self):
        """Drops this object's block reference (tensors made from it keep their own)."""
        if self.block is not None:
            lib.mtc_block_release(self.block)
            self.block = None

    def __del__(self):
        self.release()


# ------------------------------------------------------------- the copy

def walk(data, path, out):
    """Appends (path, array) for every NumPy array in data, depth first."""
    if isinstance(data, np.ndarray):
        out.append((path, data))
    elif isinstance(data, dict):
        for key, value in data.items():
            walk(value, f"{path}[{key!r}]", out)
    elif isinstance(data, (list, tuple)):
        for i, value in enumerate(data):
            walk(value, f"{path}[{i}]", out)


def rebuild(data, outputs):
    """The structure of data with each array replaced by the next output."""
    if isinstance(data, np.ndarray):
        return next(outputs)
    if isinstance(data, dict):
        return {key: rebuild(value, outputs) for key, value in data.items()}
    if isinstance(data, (list, tuple)):
        return type(data)(rebuild(value, outputs) for value in data)
    return data  # passed through


def describe(path: str, array: np.ndarray) -> Leaf:
    """The mtc_leaf of one array: contiguous, or rows of contiguous elements."""
    if array.dtype.kind not in DLPACK_CODES or array.dtype.itemsize not in (1, 2, 4, 8, 16):
        raise MtcError(f"{path}: dtype {array.dtype} is not a number or bool type libmtc copies")
    if not array.dtype.isnative:
        raise MtcError(f"{path}: dtype {array.dtype} is not in native byte order")
    leaf = Leaf(address=array.ctypes.data, bytes=array.nbytes, device=MTC_DEVICE_CPU, element_size=array.itemsize)
    if not array.flags.c_contiguous and array.size > 0:
        row = array[0] if array.ndim > 1 else None
        if row is None or not row.flags.c_contiguous or array.strides[0] < row.nbytes:
            raise MtcError(f"{path}: neither C-contiguous nor rows of contiguous elements "
                           f"(strides {array.strides}); use np.ascontiguousarray first")
        leaf.row_count, leaf.row_pitch = array.shape[0], array.strides[0]
    return leaf


def run_plan(target: int, leaves, paths, collect):
    """One plan: all leaves in ONE mtc_plan_add_leaves call, submit, poll, then
    collect(results) while the plan still holds the result blocks."""
    plan = c_ptr()
    check(lib.mtc_plan_create(target, None, ctypes.byref(plan)), "mtc_plan_create")
    try:
        status = lib.mtc_plan_add_leaves(plan, leaves, len(leaves))
        if status != MTC_OK:
            bad = lib.mtc_plan_error_leaf(plan)  # the plan names the leaf it refused
            check(status, paths[bad] if 0 <= bad < len(paths) else "mtc_plan_add_leaves", plan)
        check(lib.mtc_plan_submit(plan), "mtc_plan_submit", plan)  # returns at once
        polls = 0
        while lib.mtc_plan_poll(plan) == MTC_IN_PROGRESS:
            polls += 1  # other work goes here
        check(lib.mtc_plan_wait(plan), "the copy", plan)
        results = (LeafResult * len(leaves))()
        check(lib.mtc_plan_results(plan, 0, len(leaves), results), "mtc_plan_results", plan)
        return collect(results), polls
    finally:
        lib.mtc_plan_release(plan)  # blocks that MtcTensors retained live on


def copy(data, target: int):
    """Copies every array in data to target (a CUDA ordinal or MTC_DEVICE_CPU).
    Returns the rebuilt structure, the (path, array) inputs, their outputs in
    the same order, and how often the copy was polled."""
    found = []
    walk(data, "batch", found)
    leaves = (Leaf * len(found))(*(describe(path, array) for path, array in found))
    outputs, polls = run_plan(target, leaves, [path for path, _ in found], lambda results: [
        array if result.flags & MTC_RESULT_REUSED else MtcTensor(result, array.shape, array.dtype)
        for (_, array), result in zip(found, results)])  # reused: the input itself
    return rebuild(data, iter(outputs)), found, outputs, polls


def copy_back(found, outputs):
    """Copies device results to the host (device leaves as sources), as MtcTensors."""
    leaves = (Leaf * len(outputs))(*(
        Leaf(address=out.address, bytes=array.nbytes, device=out.device, element_size=array.itemsize)
        for (_, array), out in zip(found, outputs)))
    host, _ = run_plan(MTC_DEVICE_CPU, leaves, [path for path, _ in found], lambda results: [
        MtcTensor(result, array.shape, array.dtype) for (_, array), result in zip(found, results)])
    return host


# ------------------------------------------------------------- the example

def make_batch(seed: int = 0):
    rng = np.random.default_rng(seed)
    batch = []
    for sample, (objects, visible) in enumerate([(60, [30, 20, 40]), (100, [60, 40, 30])]):
        cams = []
        for n in visible:
            wide = rng.standard_normal((3, 8), dtype=np.float32)
            cams.append({
                "bounding_boxes": rng.standard_normal((n, 4), dtype=np.float32),
                "class_ids": rng.integers(0, 10, n, dtype=np.int64),
                "active": rng.integers(0, 2, n).astype(bool),
                "depths": rng.random(n, dtype=np.float32) * 80,
                "proj_mat": wide[:, :4],  # a strided [3, 4] view: rows 32 bytes apart
            })
        batch.append({
            "cams_gt": cams,
            "gt_data": {
                "bounding_boxes_3d": rng.standard_normal((objects, 7)).astype(np.float16),
                "class_ids": rng.integers(0, 10, objects, dtype=np.int32),
                "active": np.ones(objects, dtype=bool),
            },
            "name": f"sample{sample}",
        })
    return batch


failures = 0


def expect(ok: bool, what: str) -> None:
    global failures
    if not ok:
        failures += 1
        print(f"copy_batch.py: FAILED: {what}", file=sys.stderr)


def same_bytes(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype and np.ascontiguousarray(a).tobytes() == np.ascontiguousarray(b).tobytes()


def check_with_numpy(found, outputs) -> int:
    """Host results: np.from_dlpack views each in place. Returns how many it viewed."""
    viewed = 0
    for (path, array), out in zip(found, outputs):
        if isinstance(out, MtcTensor):
            view = np.from_dlpack(out)
            expect(view.ctypes.data == out.address, f"{path}: np.from_dlpack made a copy")
            expect(same_bytes(view, array), f"{path}: values differ")
            viewed += 1
        else:
            expect(out is array, f"{path}: a reused leaf is the input itself")
    return viewed


def check_with_torch(torch, found, outputs) -> int:
    """Device results: torch.from_dlpack views each in place. Returns how many."""
    for (path, array), out in zip(found, outputs):
        tensor = torch.from_dlpack(out)
        expect(tensor.data_ptr() == out.address, f"{path}: torch made a copy ({tensor.data_ptr():#x} != {out.address:#x})")
        expect(tensor.device == torch.device("cuda", out.device), f"{path}: on {tensor.device}")
        expect(same_bytes(tensor.cpu().numpy(), array), f"{path}: values differ")
    return len(found)


def main() -> int:
    count = c_i32(0)
    found_gpu = lib.mtc_cuda_device_count(ctypes.byref(count)) == MTC_OK and count.value > 0
    if not found_gpu:
        why = lib.mtc_last_error().decode() or "no CUDA device"
        if os.environ.get("MTC_REQUIRE_GPU") == "1":
            print(f"copy_batch.py: MTC_REQUIRE_GPU=1 but {why}", file=sys.stderr)
            return 1
        print(f"no CUDA device ({why}): copying to the host")
    target = 0 if found_gpu else MTC_DEVICE_CPU
    blocks_before = blocks_live()

    batch = make_batch()
    copied, found, outputs, polls = copy(batch, target)
    expect(copied[1]["name"] == "sample1", "non-array leaves pass through")
    print(f"libmtc {lib.mtc_version_string().decode()}: {len(found)} arrays, "
          f"{sum(a.nbytes for _, a in found)} bytes to {'cuda:0' if found_gpu else 'cpu'} in one plan "
          f"({polls} polls while it ran)")

    if found_gpu:
        try:
            import torch
            has_cuda_torch = torch.cuda.is_available()
        except ImportError:
            torch, has_cuda_torch = None, False
        if has_cuda_torch:
            n = check_with_torch(torch, found, outputs)
            print(f"torch {torch.__version__}: {n} tensors viewed in place with torch.from_dlpack "
                  "(data_ptr() == the copy's address), values equal to the NumPy inputs")
        else:
            # No CUDA torch here: copy the results back (a second plan), then view those with NumPy.
            print("torch with CUDA not importable: checking through a copy back to the host with NumPy")
            host = copy_back(found, outputs)
            n = check_with_numpy(found, host)
            for t in host:
                t.release()
            print(f"numpy {np.__version__}: {n} host copies viewed in place with np.from_dlpack, values equal")
    else:
        n = check_with_numpy(found, outputs)
        print(f"numpy {np.__version__}: {n} copied arrays viewed in place with np.from_dlpack "
              f"({len(found) - n} reused as they are), values equal")

    # A capsule nobody consumes frees its tensor when it is collected.
    unused = next((out for out in outputs if isinstance(out, MtcTensor)), None)
    if unused is not None:
        unused.__dlpack__(max_version=(1, 0))
    for out in outputs:
        if isinstance(out, MtcTensor):
            out.release()
    # Every block reference (results, capsules, views) is gone: no leak, no double release.
    expect(blocks_live() == blocks_before, f"blocks released: {blocks_live()} live, {blocks_before} before")
    if failures:
        return 1
    print("copy_batch.py: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
