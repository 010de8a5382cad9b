"""teller's import-time hooks, loaded by Python at start-up because `teller record`
puts this folder first on PYTHONPATH. Installs the hooks (teller_hooks.install), then
runs the sitecustomize that would have run without us, if any."""


def _teller_install():
    import os
    import sys

    if os.environ.get("TELLER_PYTHON_HOOKS", "0") in ("", "0"):
        return
    try:
        import teller_hooks

        teller_hooks.install()
    except Exception as error:  # never break the program
        sys.stderr.write("teller: python hooks disabled: %r\n" % (error,))


def _teller_chain():
    import importlib.machinery
    import importlib.util
    import os
    import sys

    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or os.getcwd()) != here]
    try:
        spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
        if spec is None or spec.loader is None or spec.origin == os.path.abspath(__file__):
            return
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    except Exception as error:
        sys.stderr.write("teller: the original sitecustomize failed: %r\n" % (error,))


_teller_install()
_teller_chain()
