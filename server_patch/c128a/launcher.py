"""A lean launch path for a Triton kernel that has one compiled variant.

vLLM calls the C128A builder on the host before every decode step's graph replay, so
its host time is paid on every step. Triton's ``kernel[grid](...)`` spends most of that
time re-deriving what cannot change here: it binds the arguments, specializes each one
(type, value class, pointer alignment), hashes that into a cache key and looks the
compiled kernel up, then builds launch metadata for hooks nobody registered.

Our kernel is written so that none of that can differ between calls: every scalar is
in ``do_not_specialize``, every pointer in ``do_not_specialize_on_alignment``, so the
only things that select a variant are the tensors' dtypes and whether an integer fits
in 32 bits. ``CachedLauncher`` therefore goes through Triton's own launch once per
device (compiling or loading the variant, exactly as Triton would), keeps the compiled
kernel, and afterwards calls its launcher directly, as long as:

- the dtypes of the tensor arguments are those of the cached variant,
- every integer argument fits in int32 (Triton types larger ones as int64),
- no Triton launch hook is registered (profilers add them; they then see every launch
  through Triton's path).

Anything else takes Triton's path again, which stays correct by construction. Under
``TRITON_INTERPRET=1`` there is no compiled kernel and every call takes Triton's path.
The launcher interface used (``CompiledKernel.run(grid_x, grid_y, grid_z, stream,
function, packed_metadata, launch_metadata, enter_hook, exit_hook, *args)``) is the
one Triton's own ``JITFunction.run`` uses, in Triton 3.6 (GPU tests) and 3.9 (CPU tests)
alike; hooks and launch metadata may be ``None`` there when no hook is registered.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from triton import knobs
from triton.runtime import driver

_INT32_BITS = 31


@dataclass(frozen=True)
class _Compiled:
    """One device's compiled variant, ready to launch."""

    run: Any
    function: Any
    packed_metadata: Any
    dtypes: tuple[Any, ...]


class CachedLauncher:
    """Launches ``jit_fn`` through its cached compiled kernel (see the module docstring).

    ``tensor_positions`` are the indices of the tensor arguments, ``int_positions``
    those of the runtime integers; ``options`` are the launch options and
    constexprs passed by keyword (``BLOCK=..., num_warps=...``), fixed for the
    launcher's life. The positional arguments of ``launch`` are the kernel's
    parameters in order, constexprs excluded; constexprs must come last.
    """

    def __init__(self, jit_fn: Any, *, tensor_positions: Sequence[int],
                 int_positions: Sequence[int], options: dict[str, Any]) -> None:
        self._jit = jit_fn
        self._tensors = tuple(tensor_positions)
        self._ints = tuple(int_positions)
        self._options = dict(options)
        names = list(getattr(jit_fn, "arg_names", ()))
        # Constexprs passed by keyword, in the kernel's parameter order: the compiled
        # launcher takes every parameter positionally and skips the constexprs itself.
        self._trailing = tuple(self._options[n] for n in names if n in self._options)
        self._by_device: dict[int, _Compiled] = {}
        #: False sends every launch through Triton's own path (to measure the difference).
        self.lean = True
        self._interpreted = type(jit_fn).__name__ == "InterpretedFunction"
        self._current_device: Any = None
        self._current_stream: Any = None

    def _bind_driver(self) -> None:
        active = driver.active
        self._current_device = active.get_current_device
        self._current_stream = active.get_current_stream

    def _fits_lean_path(self, entry: _Compiled, args: tuple[Any, ...]) -> bool:
        for position, dtype in zip(self._tensors, entry.dtypes, strict=True):
            if args[position].dtype is not dtype:
                return False
        folded = 0
        for position in self._ints:
            folded |= args[position]
        if folded >> _INT32_BITS:  # a negative value or one past int32: Triton's path types it
            return False
        return not (knobs.runtime.launch_enter_hook.calls or knobs.runtime.launch_exit_hook.calls)

    def launch(self, grid_x: int, grid_y: int, *args: Any) -> None:
        """Launch over ``(grid_x, grid_y)`` programs with the kernel's runtime arguments."""
        if self._interpreted:
            self._jit[(grid_x, grid_y)](*args, **self._options)
            return
        if self._current_device is None:
            self._bind_driver()
        device = self._current_device()
        entry = self._by_device.get(device)
        if entry is not None and self.lean and self._fits_lean_path(entry, args):
            entry.run(grid_x, grid_y, 1, self._current_stream(device), entry.function,
                      entry.packed_metadata, None, None, None, *args, *self._trailing)
            return
        compiled = self._jit[(grid_x, grid_y)](*args, **self._options)
        if entry is None and compiled is not None:
            run = compiled.run  # loads the module on this device (done by the launch above)
            self._by_device[device] = _Compiled(
                run=run, function=compiled.function, packed_metadata=compiled.packed_metadata,
                dtypes=tuple(args[p].dtype for p in self._tensors))

    def cached_devices(self) -> tuple[int, ...]:
        """Devices whose compiled variant the lean path uses (for tests and receipts)."""
        return tuple(sorted(self._by_device))
