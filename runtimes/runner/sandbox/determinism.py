"""Replay-safe randomness and clock (bootstrap ``determinism``,
``codemode.runtimes.types.Determinism``): ``random``, ``uuid.uuid4`` and ``numpy.random``
seeded per execution when first imported, and with an ``epoch`` a virtual wall clock."""

from __future__ import annotations

import _thread
import builtins
import sys


class _VirtualClock:
    """The wall clock the code reads: ``epoch`` plus one microsecond per read plus the time
    it slept. The same reads in the same order give the same values on every run."""

    def __init__(self, epoch: float) -> None:
        self.ns = int(round(epoch * 1e9))
        self.lock = _thread.allocate_lock()

    def now_ns(self) -> int:
        with self.lock:
            self.ns += 1000
            return self.ns

    def now(self) -> float:
        return self.now_ns() / 1e9

    def advance(self, seconds: float) -> None:
        with self.lock:
            self.ns += int(seconds * 1e9)


def _install_determinism(spec, namespace) -> None:
    """Seed randomness and (with an ``epoch``) virtualise the wall clock, per
    ``codemode.runtimes.types.Determinism``. ``random`` and ``uuid`` are patched when first
    imported (importing them up front would cost start-up time). The clock: ``time`` is
    patched for everyone, and the code's own ``import datetime`` sees a view of the module
    whose ``datetime`` reads the virtual clock (``_code_builtins``)."""
    seed = int(spec["seed"])
    patches = {
        "random": lambda module: _seed_random(module, seed),
        "uuid": lambda module: _seed_uuid(module, seed),
        "numpy.random": lambda module: _seed_numpy(module, seed),
    }
    epoch = spec.get("epoch")
    if epoch is not None:
        clock = _VirtualClock(float(epoch))
        _patch_time(clock)
        namespace["__builtins__"] = _code_builtins(clock)
    finder = _PatchOnImport(patches)
    for name in list(patches):
        if name in sys.modules:
            finder.apply(sys.modules[name])
    sys.meta_path.insert(0, finder)


class _PatchOnImport:
    """A meta-path finder that lets the real finders load a module, then patches it."""

    def __init__(self, patches) -> None:
        self.patches = patches

    def apply(self, module) -> None:
        patch = self.patches.pop(module.__name__, None)
        if patch is not None:
            patch(module)

    def find_spec(self, name, path=None, target=None):
        if name not in self.patches:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                if spec.loader is not None:
                    spec.loader = _PatchingLoader(spec.loader, self)
                return spec
        return None


class _PatchingLoader:
    def __init__(self, loader, finder: _PatchOnImport) -> None:
        self._loader = loader
        self._finder = finder

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module) -> None:
        self._loader.exec_module(module)
        self._finder.apply(module)

    def __getattr__(self, name):  # get_source, is_package, ... for tracebacks and inspect
        return getattr(self._loader, name)


def _seed_random(module, seed: int) -> None:
    """``random`` draws from ``seed``; an unseeded ``Random()`` is seeded from it too
    (``SystemRandom`` stays the OS's entropy)."""
    base_seed = module.Random.seed
    lock = _thread.allocate_lock()
    made = [0]

    def seed_(self, a=None, version=2):
        if a is None:
            with lock:
                made[0] += 1
                a = "codemode:%d:%d" % (seed, made[0])
        base_seed(self, a, version)

    seed_.__doc__ = base_seed.__doc__
    module.Random.seed = seed_
    module.seed(seed)


def _seed_numpy(module, seed: int) -> None:
    """numpy's global generator (``np.random.rand``) and an unseeded ``default_rng()`` draw
    from ``seed``, as ``random`` does."""
    module.seed(seed % 2**32)
    base_default_rng = module.default_rng
    lock = _thread.allocate_lock()
    made = [0]

    def default_rng(seed_=None):
        if seed_ is None:
            with lock:
                made[0] += 1
                seed_ = [seed % 2**32, made[0]]
        return base_default_rng(seed_)

    default_rng.__doc__ = base_default_rng.__doc__
    module.default_rng = default_rng


def _seed_uuid(module, seed: int) -> None:
    import random

    rng = random.Random("codemode-uuid:%d" % seed)
    lock = _thread.allocate_lock()
    uuid_cls = module.UUID

    def uuid4():
        with lock:
            bits = rng.getrandbits(128)
        return uuid_cls(int=bits, version=4)

    uuid4.__doc__ = module.uuid4.__doc__
    module.uuid4 = uuid4


def _patch_time(clock: _VirtualClock) -> None:
    import time

    real_sleep, real_localtime, real_gmtime = time.sleep, time.localtime, time.gmtime
    real_ctime, real_asctime, real_strftime = time.ctime, time.asctime, time.strftime

    def sleep(seconds):
        real_sleep(seconds)
        clock.advance(seconds)

    def localtime(seconds=None):
        return real_localtime(clock.now() if seconds is None else seconds)

    def gmtime(seconds=None):
        return real_gmtime(clock.now() if seconds is None else seconds)

    def ctime(seconds=None):
        return real_ctime(clock.now() if seconds is None else seconds)

    def asctime(t=None):
        return real_asctime(real_localtime(clock.now()) if t is None else t)

    def strftime(format, t=None):
        return real_strftime(format, real_localtime(clock.now()) if t is None else t)

    time.time = clock.now
    time.time_ns = clock.now_ns
    time.sleep = sleep
    time.localtime, time.gmtime, time.ctime, time.asctime, time.strftime = localtime, gmtime, ctime, asctime, strftime


def _code_builtins(clock: _VirtualClock):
    """The builtins the code runs with: Python's, except that the code's ``import datetime``
    (and ``from datetime import datetime``, ``__import__("datetime")``) gives a view of the
    module whose ``datetime`` class reads the virtual clock.

    ``sys.modules["datetime"]`` keeps the real module and its real types. C extensions import
    ``datetime.datetime`` by attribute (Cython's type import: pandas, pyarrow ...) and check
    that it is the static type they were built against; a subclass there makes them fail or
    crash. Libraries' own ``datetime.now()`` therefore reads the real clock; their
    ``time.time()``, ``date.today()`` and ``datetime.today()`` read the virtual one."""
    real_import = builtins.__import__
    view = []

    def __import__(name, globals=None, locals=None, fromlist=(), level=0):
        module = real_import(name, globals, locals, fromlist, level)
        if name != "datetime" or level != 0:
            return module
        if not view:
            view.append(_datetime_view(module, clock))
        return view[0]

    __import__.__doc__ = real_import.__doc__
    code_builtins = dict(builtins.__dict__)
    code_builtins["__import__"] = __import__
    return code_builtins


def _datetime_view(module, clock: _VirtualClock):
    """A copy of the ``datetime`` module for the code, with ``datetime`` replaced by a
    subclass whose ``now()`` / ``utcnow()`` read the clock (``today()`` and
    ``date.today()`` already call ``time.time()``). Its metaclass keeps ``isinstance`` and
    ``issubclass`` true for every real ``datetime``, as freezegun does, and makes it equal to
    the real class (a table keyed by type finds it), and everything it
    makes (its constructor included) is a real ``datetime``: values the code hands to
    pandas, pickle or JSON are the type they expect."""
    real = module.datetime
    utc = module.timezone.utc

    class _Meta(type):
        def __instancecheck__(cls, obj):
            return isinstance(obj, real)

        def __subclasscheck__(cls, sub):
            return issubclass(sub, real)

        def __eq__(cls, other):  # a lookup keyed by type (pydantic's schemas) finds the real one's entry
            return other is cls or other is real

        def __hash__(cls):
            return hash(real)

    class datetime(real, metaclass=_Meta):
        def __new__(cls, *args, **kwargs):
            return real(*args, **kwargs)

        @classmethod
        def now(cls, tz=None):
            return real.fromtimestamp(clock.now(), tz)

        @classmethod
        def utcnow(cls):
            return real.fromtimestamp(clock.now(), utc).replace(tzinfo=None)

    datetime.__module__ = real.__module__
    datetime.__qualname__ = real.__qualname__
    datetime.__doc__ = real.__doc__
    view = type(module)(module.__name__, module.__doc__)
    view.__dict__.update(module.__dict__)
    view.datetime = datetime
    return view
