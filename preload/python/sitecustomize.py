# The start-up hook of the nemolens Python adapter. The shim puts this
# directory first on PYTHONPATH as the interpreter starts, and site runs
# this module. It puts the program's PYTHONPATH and sys.path back as they
# would have been without the shim, starts the adapter, and then runs the
# program's own sitecustomize, if there is one, in its place: as site would
# have, once, with its errors reported by site as before.


def _nemolens_start():
    import os
    import sys

    here = os.path.dirname(os.path.abspath(__file__))
    saved = os.environ.pop("NEMOLENS_PYTHON_SAVED_PATH", None)
    if saved is not None:
        if saved.startswith("="):
            os.environ["PYTHONPATH"] = saved[1:]
        else:
            os.environ.pop("PYTHONPATH", None)
    try:
        import nemolens_adapter

        nemolens_adapter.start()
    except Exception:
        pass   # the adapter logs what it can; the program runs without it
    # PYTHONPATH put this directory in once, before the program's entries.
    try:
        sys.path.remove(here)
    except ValueError:
        pass
    sys.path_importer_cache.pop(here, None)

    del sys.modules["sitecustomize"]
    # The import system's own classes, as they are: importing
    # importlib.machinery would cost every interpreter a millisecond.
    bootstrap = sys.modules["_frozen_importlib"]
    finder = sys.modules["_frozen_importlib_external"].PathFinder
    spec = finder.find_spec("sitecustomize", sys.path)
    if spec is None or spec.loader is None:
        return None
    module = bootstrap.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop("sitecustomize", None)
        raise
    return module


if _nemolens_start() is None:
    # As site sees a program without a sitecustomize of its own.
    raise ImportError("No module named 'sitecustomize'", name="sitecustomize")
