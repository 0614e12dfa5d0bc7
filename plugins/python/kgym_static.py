"""kgym_static.py -- static checks of a KernelBench candidate's source (kernel_code).

Part of kgymd's python backend harness (kgym_supervisor.py imports it, and
kgym_harness.py for --check; all are installed in $(libexecdir)/kgym/).  Runs
in the trusted zygote before any code of the task does, on Python's ast --
never on regular expressions: a candidate may not import modules that reach
the operating system, the interpreter's machinery, the timer or other
threads; may not touch torch.cuda.Event or elapsed_time; may not define
tensor subclasses or override torch dispatch; may not patch imported
modules.  A violation is a VALIDATION_ERROR naming the line; a SyntaxError
is the candidate's COMPILATION_ERROR.  backend "triton" must define a
@triton.jit function and backend "cuda" must call load_inline, or the
backend's promise is empty.

These checks are a filter, not a wall: a determined candidate can build a
forbidden name from strings.  The sandbox (seccomp, Landlock) is what holds;
tests/integration/test_python.py shows a string-built socket() killed.
Standard library only.
"""

import ast
import string

# Modules kernel_code may not import (also as `from X import`, or a
# submodule of them).  The list, plus the other roads to the same
# places: dynamic import, the builtins module, timers, threads, signals,
# process creation and raw memory.
FORBIDDEN_MODULES = {
    "os": "operating-system access", "sys": "interpreter internals",
    "subprocess": "process creation", "ctypes": "raw memory and C calls",
    "gc": "reaching other objects", "inspect": "reaching other frames",
    "threading": "hidden work on other threads", "multiprocessing": "process creation",
    "socket": "network access", "importlib": "dynamic import", "builtins": "the import machinery",
    "time": "the timer", "timeit": "the timer", "signal": "signals",
    "_thread": "hidden work on other threads", "concurrent": "hidden work on other threads",
    "asyncio": "hidden work on other threads", "posix": "operating-system access",
    "_posixsubprocess": "process creation", "pty": "process creation", "runpy": "running other code",
    "code": "running other code", "_ctypes": "raw memory and C calls", "cffi": "raw memory and C calls",
    "torch.multiprocessing": "process creation", "torch.distributed": "network access",
    "torch.utils.benchmark": "the timer",
    # The profiler's CUPTI is the one the harness reads the kernels with.
    "torch.profiler": "the profiler", "torch.autograd.profiler": "the profiler",
    "torch.cuda.profiler": "the profiler", "torch._C._profiler": "the profiler",
    "torch._C._autograd": "the profiler",
    # Unpickling runs whatever callable the bytes name: code the checks
    # never see (a red-team run reached exec and os through pickle.loads).
    "pickle": "unpickling (running code the checks cannot see)",
    "_pickle": "unpickling (running code the checks cannot see)",
    "marshal": "code objects", "shelve": "unpickling (running code the checks cannot see)",
    "copyreg": "unpickling (running code the checks cannot see)",
    "dill": "unpickling (running code the checks cannot see)",
    "cloudpickle": "unpickling (running code the checks cannot see)",
    "joblib": "unpickling (running code the checks cannot see)",
    "string": "format strings that walk attributes",
    # A black-box red-team run (2026-11-29) reached ctypes as numpy's
    # re-export and threads through logging's queue listener.  (mmap, which
    # reaches the shared buffers, stays allowed: the judge's defences
    # behind it are what tests/exploits exercise.)
    "numpy.ctypeslib": "raw memory and C calls",
    "logging.handlers": "hidden work on other threads", "logging.config": "hidden work on other threads",
}
# Names that reach the interpreter's machinery or patch dispatch.
FORBIDDEN_NAMES = {
    "__import__": "dynamic import", "__builtins__": "the import machinery",
    "__subclasses__": "reaching other objects", "__globals__": "reaching other frames",
    "__code__": "code objects", "__closure__": "reaching other frames",
    "eval": "running other code", "exec": "running other code", "compile": "running other code",
    "globals": "reaching other frames", "vars": "reaching other frames",
    "breakpoint": "the debugger",
    "__torch_function__": "overriding torch dispatch", "__torch_dispatch__": "overriding torch dispatch",
    "_make_subclass": "tensor subclasses", "_make_wrapper_subclass": "tensor subclasses",
    "elapsed_time": "the timer",
    # Frames lead to the harness's own locals in the candidate's process
    # (the timer, the job's secrets): an exception's traceback, a
    # generator's or a coroutine's frame.
    "__traceback__": "reaching other frames", "tb_frame": "reaching other frames",
    "tb_next": "reaching other frames", "f_back": "reaching other frames",
    "f_locals": "reaching other frames", "f_globals": "reaching other frames",
    "f_builtins": "reaching other frames", "gi_frame": "reaching other frames",
    "cr_frame": "reaching other frames", "ag_frame": "reaching other frames",
    "exc_info": "reaching other frames", "_getframe": "reaching other frames",
    # Object internals: the classic roads to any object, module or builtin.
    "__dict__": "reaching module internals", "__getattribute__": "computed attribute access",
    "__base__": "reaching other objects", "__bases__": "reaching other objects",
    "__mro__": "reaching other objects",
    # Attribute walks inside a format string ("{0.__class__...}") are not in
    # the tree: format_map is refused, str.format unless its string is a
    # literal whose fields name no attribute or item (visit_Call).
    "format_map": "format strings that walk attributes",
    # A pointer made an array (numpy, torch.from_numpy): raw memory without
    # ctypes -- the judge's shared areas found by address (2026-11-29).
    "__array_interface__": "raw memory (a pointer made an array)",
    "__array_struct__": "raw memory (a pointer made an array)",
    "__cuda_array_interface__": "raw memory (a pointer made an array)",
}
# Modules re-export what they import (torch.sys, torch.os, ...): an
# attribute of any object with one of these names reaches a forbidden module
# without an import statement.
MODULE_ATTRIBUTES = {name: why for name, why in FORBIDDEN_MODULES.items() if "." not in name and name != "code"}


def module_attribute(name):
    """Why an attribute of this name is a forbidden module, else None --
    under its own name or a private alias (tempfile._os, tempfile._sys: a
    red-team run of 2026-11-29 reached sys.modules that way)."""
    return MODULE_ATTRIBUTES.get(name) or (MODULE_ATTRIBUTES.get(name.lstrip("_")) if name.startswith("_")
                                           else None)
# Functions that take an attribute's name as a string: the name must be a
# literal, so that the checks above see it.
ATTRIBUTE_FUNCTIONS = {"getattr", "setattr", "delattr", "hasattr"}
FORBIDDEN_DOTTED = {
    "torch.cuda.Event": "the timer", "torch.Event": "the timer",
    "torch.cuda.Event.elapsed_time": "the timer",
    "operator.attrgetter": "computed attribute access", "operator.methodcaller": "computed attribute access",
    "torch.load": "unpickling (running code the checks cannot see)",
    "torch.serialization.load": "unpickling (running code the checks cannot see)",
    "numpy.load": "unpickling (running code the checks cannot see)",
    "torch.jit.fork": "hidden work on other threads", "torch.jit._fork": "hidden work on other threads",
    "faulthandler.dump_traceback_later": "hidden work on other threads",
}
TENSOR_CLASSES = {"torch.Tensor", "torch._C._TensorBase", "torch._C.TensorBase", "torch.nn.Parameter",
                  "torch.nn.parameter.Parameter", "torch.nn.parameter.Buffer"}


class StaticChecker(ast.NodeVisitor):
    """Walks kernel_code's tree; collects (line, message) violations."""

    def __init__(self, backend):
        self.backend = backend
        self.aliases = {}          # local name -> dotted name of what was imported
        self.violations = []
        self.triton_kernels = 0
        self.triton_names = []
        self.load_inline_calls = 0

    def bad(self, node, what, why):
        self.violations.append((getattr(node, "lineno", 0), "%s is not allowed (%s)" % (what, why)))

    def module_forbidden(self, dotted):
        parts = dotted.split(".")
        for i in range(len(parts), 0, -1):
            prefix = ".".join(parts[:i])
            if prefix in FORBIDDEN_MODULES:
                return FORBIDDEN_MODULES[prefix]
        if self.backend != "cuda" and dotted.startswith("torch.utils.cpp_extension"):
            return "only backend 'cuda' compiles C++"
        return None

    def dotted(self, node):
        """a.b.c of an attribute chain, with the root resolved through the
        import aliases; None when the root is not a plain name."""
        parts = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name):
            return None
        root = self.aliases.get(node.id, node.id)
        return ".".join([root] + list(reversed(parts)))

    @staticmethod
    def plain_format(node):
        """A string literal whose replacement fields name no attribute or
        item ("{}", "{0}", "{name:>8}" but not "{0.__class__}", "{x[k]}")."""
        if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
            return False
        def fields(text):
            # A format spec may hold fields of its own ("{0:{1.x}}"): those too.
            for _, name, spec, _ in string.Formatter().parse(text):
                if name is not None:
                    yield name
                if spec:
                    yield from fields(spec)
        try:
            return not any("." in f or "[" in f for f in fields(node.value))
        except ValueError:
            return False

    def root_is_import(self, node):
        while isinstance(node, (ast.Attribute, ast.Subscript)):
            node = node.value
        return isinstance(node, ast.Name) and node.id in self.aliases

    def visit_Import(self, node):
        for a in node.names:
            why = self.module_forbidden(a.name)
            if why:
                self.bad(node, "import of module '%s'" % a.name, why)
            local = a.asname or a.name.split(".")[0]
            self.aliases[local] = a.name if a.asname else a.name.split(".")[0]
        self.generic_visit(node)

    def visit_ImportFrom(self, node):
        mod = node.module or ""
        if node.level:
            self.bad(node, "a relative import", "kernel_code is a single module")
        why = self.module_forbidden(mod)
        if why:
            self.bad(node, "import from module '%s'" % mod, why)
        for a in node.names:
            if why:
                self.aliases[a.asname or a.name] = mod + "." + a.name
                continue
            full = mod + "." + a.name if mod else a.name
            if a.name == "*":
                self.bad(node, "'from %s import *'" % mod, "names must be visible to the checks")
                continue
            # A forbidden module re-exported by another ("from numpy.ctypeslib
            # import ctypes") is that module.
            why = (self.module_forbidden(full) or FORBIDDEN_DOTTED.get(full) or FORBIDDEN_NAMES.get(a.name)
                   or module_attribute(a.name))
            if why:
                self.bad(node, "import of '%s'" % full, why)
            self.aliases[a.asname or a.name] = full
        self.generic_visit(node)

    def visit_Name(self, node):
        if node.id in FORBIDDEN_NAMES:
            self.bad(node, "'%s'" % node.id, FORBIDDEN_NAMES[node.id])
        self.generic_visit(node)

    def visit_Attribute(self, node):
        if node.attr in FORBIDDEN_NAMES:
            self.bad(node, "'.%s'" % node.attr, FORBIDDEN_NAMES[node.attr])
        elif module_attribute(node.attr):
            self.bad(node, "'.%s' (a module re-exported by another)" % node.attr, module_attribute(node.attr))
        d = self.dotted(node)
        if d is not None:
            if d in FORBIDDEN_DOTTED:
                self.bad(node, "'%s'" % d, FORBIDDEN_DOTTED[d])
            else:
                # Submodules reached as attributes of a package imported whole
                # (torch.multiprocessing, numpy.ctypeslib, logging.handlers).
                why = (self.module_forbidden(d) if "." in d and d.split(".")[0] in ("torch", "numpy", "logging")
                       else None)
                if why and isinstance(node.ctx, ast.Load):
                    self.bad(node, "'%s'" % d, why)
        self.generic_visit(node)

    def visit_FunctionDef(self, node):
        if node.name in FORBIDDEN_NAMES:
            self.bad(node, "defining '%s'" % node.name, FORBIDDEN_NAMES[node.name])
        for dec in node.decorator_list:
            target = dec.func if isinstance(dec, ast.Call) else dec
            d = self.dotted(target) or ""
            if d in ("triton.jit", "triton.runtime.jit", "triton.runtime.jit.jit"):
                self.triton_kernels += 1
                self.triton_names.append(node.name)
        self.generic_visit(node)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node):
        for b in node.bases:
            d = self.dotted(b)
            if d in TENSOR_CLASSES:
                self.bad(node, "class %s subclassing %s" % (node.name, d), "tensor subclasses")
        self.generic_visit(node)

    def check_target(self, node, target):
        if isinstance(target, (ast.Tuple, ast.List)):
            for t in target.elts:
                self.check_target(node, t)
        elif isinstance(target, (ast.Attribute, ast.Subscript)) and self.root_is_import(target):
            self.bad(node, "assigning to '%s'" % (self.dotted(target) if isinstance(target, ast.Attribute)
                                                  else "an item of an imported module"),
                     "patching imported modules")

    def follow_alias(self, target, value):
        """`name = torch.cuda` makes `name` an imported module too: what is
        refused through torch.cuda is refused through it."""
        if isinstance(target, ast.Name) and value is not None and self.root_is_import(value):
            d = self.dotted(value)
            if d is not None:
                self.aliases[target.id] = d

    def visit_Assign(self, node):
        for t in node.targets:
            self.check_target(node, t)
        self.generic_visit(node)
        for t in node.targets:
            self.follow_alias(t, node.value)

    def visit_AugAssign(self, node):
        self.check_target(node, node.target)
        self.generic_visit(node)

    def visit_AnnAssign(self, node):
        self.check_target(node, node.target)
        self.generic_visit(node)
        self.follow_alias(node.target, node.value)

    def visit_NamedExpr(self, node):
        self.generic_visit(node)
        self.follow_alias(node.target, node.value)

    def visit_Delete(self, node):
        for t in node.targets:
            self.check_target(node, t)
        self.generic_visit(node)

    def visit_Call(self, node):
        name = self.dotted(node.func) or ""
        if name in ATTRIBUTE_FUNCTIONS and len(node.args) >= 2:
            attr = node.args[1]
            if not (isinstance(attr, ast.Constant) and isinstance(attr.value, str)):
                self.bad(node, "%s() with a computed attribute name" % name, "names must be visible to the checks")
            elif attr.value in FORBIDDEN_NAMES:
                self.bad(node, "%s(..., '%s')" % (name, attr.value), FORBIDDEN_NAMES[attr.value])
            elif module_attribute(attr.value):
                self.bad(node, "%s(..., '%s')" % (name, attr.value), module_attribute(attr.value))
        if isinstance(node.func, ast.Attribute) and node.func.attr == "format" \
                and not self.plain_format(node.func.value):
            self.bad(node, "str.format() on a string that is not a literal or names attributes or items",
                     "format strings that walk attributes")
        if name in ("setattr", "delattr") and node.args and self.root_is_import(node.args[0]):
            self.bad(node, "%s() on an imported module" % name, "patching imported modules")
        if name.endswith("load_inline") and (name == "load_inline" or name.startswith("torch.utils.cpp_extension")):
            self.load_inline_calls += 1
        self.generic_visit(node)


def static_check(source, backend):
    """(error_code, message) or None.  SyntaxError is a COMPILATION_ERROR
    (the candidate did not compile); everything else a VALIDATION_ERROR."""
    try:
        tree = ast.parse(source, filename="kernel_code")
    except SyntaxError as e:
        return ("COMPILATION_ERROR", "kernel_code line %s: SyntaxError: %s\n%s" %
                (e.lineno, e.msg, (e.text or "").rstrip()))
    except (ValueError, RecursionError, MemoryError) as e:
        return ("VALIDATION_ERROR", "kernel_code cannot be parsed: %s" % e)
    c = StaticChecker(backend)
    try:
        c.visit(tree)
    except RecursionError:
        return ("VALIDATION_ERROR", "kernel_code is nested too deeply to check")
    if backend == "triton" and c.triton_kernels == 0:
        c.violations.append((1, "backend 'triton' promises Triton kernels, but kernel_code defines no "
                                "@triton.jit function"))
    if backend == "cuda" and c.load_inline_calls == 0:
        c.violations.append((1, "backend 'cuda' promises CUDA kernels, but kernel_code never calls "
                                "torch.utils.cpp_extension.load_inline"))
    if not c.violations:
        return None
    c.violations.sort()
    lines = source.splitlines()
    msg = []
    for line, what in c.violations[:10]:
        text = lines[line - 1].strip() if 0 < line <= len(lines) else ""
        msg.append("kernel_code line %d: %s%s" % (line, what, (": " + text) if text else ""))
    if len(c.violations) > 10:
        msg.append("... and %d more" % (len(c.violations) - 10))
    return ("VALIDATION_ERROR", "\n".join(msg))


def _cuda_global_names(text):
    """The names of the __global__ functions a CUDA source string defines:
    the identifier before the parameter list that follows __global__
    (past __launch_bounds__(...) and the like)."""
    names = []
    at = text.find("__global__")
    while at >= 0:
        pos = at + len("__global__")
        ident = ""
        for _ in range(4):          # at most a few attribute(...) groups
            paren = text.find("(", pos)
            if paren < 0:
                return names
            head = text[pos:paren].rstrip()
            ident = ""
            for ch in reversed(head):
                if ch.isalnum() or ch == "_":
                    ident = ch + ident
                else:
                    break
            if ident not in ("__launch_bounds__", "__maxnreg__", "__cluster_dims__", "__align__"):
                break
            close = text.find(")", paren)
            if close < 0:
                return names
            pos = close + 1
        if ident.isidentifier() and not ident.startswith("__"):
            names.append(ident)
        at = text.find("__global__", pos)
    return names


def custom_kernel_names(source, backend):
    """The kernels kernel_code defines itself: its @triton.jit functions
    (backend "triton"), the __global__ functions of its string constants
    (backend "cuda").  The harness tells the candidate's own kernels from
    PyTorch's by these names (kgym_harness.is_custom_kernel).  [] when the
    source does not parse (static_check says why)."""
    try:
        tree = ast.parse(source, filename="kernel_code")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    names = []
    if backend == "triton":
        c = StaticChecker(backend)
        try:
            c.visit(tree)
        except RecursionError:
            return []
        names = c.triton_names
    elif backend == "cuda":
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and "__global__" in node.value:
                names += _cuda_global_names(node.value)
    return sorted(set(names))
