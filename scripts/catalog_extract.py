"""Read the messages a Python source file can print, with ``ast`` (no import, no execution).

Used by scripts/build_catalog.py. One call, ``extract(source, module, component)``, returns
one record per message a statement can produce:

    {"t": template, "kind": raise|assert|log|parser_error|exit|warn|print,
     "level": exception type or log level, "func": "Class.method", "names": [...],
     "site": "line:col"}

Messages are turned into templates of diag/messages/template.py: literal text with
``{name:type}`` placeholders named after the expression that fills them.
"""
from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from diag.messages.template import escape  # noqa: E402

MAX_ALTS = 4          # alternatives one expression may produce (if/else, conditional +=)
LOG_METHODS = {"error": "error", "warning": "warning", "warn": "warning", "critical": "critical",
               "fatal": "critical", "exception": "error", "info": "info",
               "warning_once": "warning", "info_once": "info", "error_once": "error"}
# sglang's own logging helpers: name -> (level, index of the message argument)
LOG_HELPERS = {"log_info_on_rank0": ("info", 1), "print_warning_once": ("warning", 0),
               "print_info_once": ("info", 0), "warning_once": ("warning", 0), "info_once": ("info", 0)}
GETTEXT = {"_", "gettext", "N_"}
STR_FUNCS = {"str", "repr", "format", "ascii"}
SKIP_NAMES = {"self", "cls", "None", "True", "False", "len", "isinstance", "hasattr", "getattr", "int",
              "float", "str", "bool", "list", "dict", "tuple", "set", "any", "all", "type", "os", "sys"}

EXC_CLASS = re.compile(r"^[A-Z]\w*(?:Error|Exception|Exit|Failure|Timeout)$")
_PCT = re.compile(r"%(?:\((\w+)\))?([-#0 +]*)(\d+|\*)?(?:\.(\d+|\*))?[hlL]?([diouxXeEfFgGcrsa%])")
_IDENT = re.compile(r"[^A-Za-z0-9_]+")


def _dotted(node) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    if isinstance(node, ast.Call):
        inner = _dotted(node.func)
        if inner:
            parts.append(inner + "()")
            return ".".join(reversed(parts))
    return None


def _name_of(node) -> str:
    """The placeholder name of an expression: the variable, the last attribute, the call."""
    if isinstance(node, ast.Name):
        n = node.id
    elif isinstance(node, ast.Attribute):
        n = node.attr
    elif isinstance(node, ast.Call):
        f = node.func
        fname = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
        if fname in STR_FUNCS | {"int", "float", "list", "tuple", "sorted", "set", "type"} and node.args:
            return _name_of(node.args[0])
        if fname == "len" and node.args:
            return _name_of(node.args[0]) + "_len"
        if fname == "join" and node.args:
            return _name_of(node.args[0])
        n = fname or "value"
    elif isinstance(node, ast.Subscript):
        n = _name_of(node.value)
    elif isinstance(node, ast.Starred):
        n = _name_of(node.value)
    elif isinstance(node, (ast.ListComp, ast.GeneratorExp, ast.SetComp)):
        n = _name_of(node.elt)
    elif isinstance(node, ast.BinOp):
        n = _name_of(node.right if isinstance(node.left, ast.Constant) else node.left)
    elif isinstance(node, ast.UnaryOp):
        n = _name_of(node.operand)
    else:
        n = "value"
    n = _IDENT.sub("_", n).strip("_") or "value"
    if n[0].isdigit():
        n = "v" + n
    return n


def _spec_type(spec: str) -> tuple[str, str]:
    """f-string / str.format spec -> (placeholder type, literal suffix)."""
    if not spec:
        return "str", ""
    c = spec[-1]
    if c in "d,_n":
        return "int", ""
    if c in "eEfFgG":
        return "float", ""
    if c == "%":
        return "float", "%"
    if c in "xXob":
        return "word", ""
    return "str", ""


def _pct_type(conv: str) -> str:
    if conv in "diu":
        return "int"
    if conv in "eEfFgG":
        return "float"
    if conv in "xXo":
        return "word"
    return "str"


class _Ctx:
    def __init__(self, consts: dict, local: dict):
        self.consts = consts      # module-level string constants: name -> [templates]
        self.local = local        # this function's string variables: name -> [templates]


def _field(name: str, typ: str = "str") -> str:
    return "{" + name + ("" if typ == "str" else ":" + typ) + "}"


def _cross(a: list[str], b: list[str]) -> list[str]:
    return [x + y for x in a for y in b][:MAX_ALTS]


def strtmpl(node, ctx: _Ctx) -> list[str] | None:
    """Templates of a string-valued expression, or None when it is not recognisably a string."""
    if isinstance(node, ast.Constant):
        if isinstance(node.value, str):
            return [escape(node.value)]
        return None
    if isinstance(node, ast.JoinedStr):
        out = [""]
        for v in node.values:
            if isinstance(v, ast.Constant):
                out = [o + escape(str(v.value)) for o in out]
                continue
            if not isinstance(v, ast.FormattedValue):
                return None
            spec = ""
            if v.format_spec is not None:
                if all(isinstance(x, ast.Constant) for x in v.format_spec.values):
                    spec = "".join(str(x.value) for x in v.format_spec.values)
                else:
                    spec = "?"
            inner = None
            if not spec and v.conversion in (-1, 115):
                inner = _inline(v.value, ctx)
            if inner is not None:
                out = _cross(out, inner)
                continue
            typ, suffix = _spec_type(spec if spec != "?" else "")
            out = [o + _field(_name_of(v.value), typ) + suffix for o in out]
        return out
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = strtmpl(node.left, ctx), strtmpl(node.right, ctx)
        if left is None and right is None:
            return None
        left = left if left is not None else [_field(_name_of(node.left))]
        right = right if right is not None else [_field(_name_of(node.right))]
        return _cross(left, right)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
        fmt = _raw_strings(node.left, ctx)
        if fmt is None:
            return None
        return [t for f in fmt for t in pct_format(f, node.right)][:MAX_ALTS]
    if isinstance(node, ast.IfExp):
        a, b = strtmpl(node.body, ctx), strtmpl(node.orelse, ctx)
        if a is None and b is None:
            return None
        return ((a or [""]) + (b or [""]))[:MAX_ALTS]
    if isinstance(node, ast.Call):
        f = node.func
        if isinstance(f, ast.Attribute) and f.attr == "format":
            fmt = _raw_strings(f.value, ctx)
            if fmt is not None:
                return [t for s in fmt for t in str_format(s, node.args, node.keywords)][:MAX_ALTS]
        if isinstance(f, ast.Name) and f.id in GETTEXT and node.args:
            return strtmpl(node.args[0], ctx)
        if isinstance(f, ast.Name) and f.id == "ngettext" and len(node.args) >= 2:
            a, b = strtmpl(node.args[0], ctx), strtmpl(node.args[1], ctx)
            if a is None or b is None:
                return None
            return (a + b)[:MAX_ALTS]
        if isinstance(f, ast.Attribute) and f.attr in ("strip", "rstrip", "lstrip") and not node.args:
            inner = strtmpl(f.value, ctx)
            if inner is not None:
                return [getattr(t, f.attr)() for t in inner]
        if isinstance(f, ast.Name) and f.id == "str" and len(node.args) == 1:
            inner = strtmpl(node.args[0], ctx)
            if inner is not None:
                return inner
        return None
    if isinstance(node, ast.Name):
        return _inline(node, ctx)
    return None


def _inline(node, ctx: _Ctx) -> list[str] | None:
    if isinstance(node, ast.Name):
        if node.id in ctx.local:
            return list(ctx.local[node.id])
        if node.id in ctx.consts:
            return list(ctx.consts[node.id])
    return None


def _raw_strings(node, ctx: _Ctx) -> list[str] | None:
    """The raw (unescaped) text of a format string: a literal, _() of one, or a variable holding one."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in GETTEXT and node.args:
        return _raw_strings(node.args[0], ctx)
    if isinstance(node, ast.Name):
        raw = ctx.local.get("\0raw:" + node.id) or ctx.consts.get("\0raw:" + node.id)
        if raw:
            return list(raw)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        a, b = _raw_strings(node.left, ctx), _raw_strings(node.right, ctx)
        if a is not None and b is not None:
            return [x + y for x in a for y in b][:MAX_ALTS]
    return None


def pct_format(fmt: str, args) -> list[str]:
    """'%s has %d' % (a, b) -> '{a} has {b:int}' (args: the right operand or a list of arguments)."""
    if isinstance(args, ast.Tuple):
        items = list(args.elts)
    elif isinstance(args, list):
        items = args
    else:
        items = [args]
    keyed = {}
    if len(items) == 1 and isinstance(items[0], ast.Dict):
        for k, v in zip(items[0].keys, items[0].values):
            if isinstance(k, ast.Constant):
                keyed[k.value] = v
    out, pos, i = [], 0, 0
    for m in _PCT.finditer(fmt):
        out.append(escape(fmt[pos:m.start()]))
        pos = m.end()
        if m[5] == "%":
            out.append("%")
            continue
        typ = _pct_type(m[5])
        if m[1]:
            name = _name_of(keyed[m[1]]) if m[1] in keyed else m[1]
        else:
            name = _name_of(items[i]) if i < len(items) else "value"
            i += 1
        out.append(_field(name, typ))
    out.append(escape(fmt[pos:]))
    return ["".join(out)]


def str_format(fmt: str, args, keywords) -> list[str]:
    import string
    kw = {k.arg: k.value for k in keywords if k.arg}
    out, auto = [], 0
    try:
        parsed = list(string.Formatter().parse(fmt))
    except ValueError:
        return [escape(fmt)]
    for lit, fname, spec, conv in parsed:
        out.append(escape(lit))
        if fname is None:
            continue
        base = re.split(r"[.\[]", fname, 1)[0]
        if base == "":
            expr = args[auto] if auto < len(args) else None
            auto += 1
        elif base.isdigit():
            expr = args[int(base)] if int(base) < len(args) else None
        else:
            expr = kw.get(base)
        name = _name_of(expr) if expr is not None else (_IDENT.sub("_", fname).strip("_") or "value")
        if name[0].isdigit():
            name = "v" + name
        typ, suffix = _spec_type(spec or "")
        out.append(_field(name, typ) + suffix)
    return ["".join(out)]


def _names_read(test) -> list[str]:
    names: list[str] = []
    called = {id(n.func) for n in ast.walk(test) if isinstance(n, ast.Call)}
    nodes = [n for n in ast.walk(test) if isinstance(n, (ast.Attribute, ast.Name)) and id(n) not in called]
    for node in sorted(nodes, key=lambda n: (n.lineno, n.col_offset, -n.end_col_offset)):
        d = _dotted(node)
        if d and d.split(".")[0] not in ("os", "sys") and d not in SKIP_NAMES:
            names.append(d)
    # keep the longest chains (a.b.c rather than a.b and a)
    keep = []
    for n in dict.fromkeys(names):
        if n.endswith("()"):
            continue
        if any(o != n and o.startswith(n + ".") for o in names):
            continue
        keep.append(n)
    return keep[:8]


class Extractor(ast.NodeVisitor):
    def __init__(self, component: str, module: str, print_ok: bool, self_is_parser: bool = False):
        self.component = component
        self.module = module
        self.print_ok = print_ok
        self.self_is_parser = self_is_parser
        self.scope: list[str] = []
        self.classes: list[str] = []
        self.tests: list = []               # enclosing if tests, innermost last
        self.consts: dict = {}
        self.local_stack: list[dict] = [{}]
        self.depth = 0
        self.raised: set[int] = set()       # exception calls already read as a raise
        self.out: list[dict] = []

    # -- scopes ------------------------------------------------------------------------
    @property
    def local(self) -> dict:
        return self.local_stack[-1]

    def ctx(self) -> _Ctx:
        return _Ctx(self.consts, self.local)

    def visit_ClassDef(self, node):
        self.scope.append(node.name)
        self.classes.append(node.name)
        self.generic_visit(node)
        self.classes.pop()
        self.scope.pop()

    def visit_FunctionDef(self, node):
        self.scope.append(node.name)
        self.local_stack.append({})
        saved_tests, self.tests = self.tests, []
        saved_depth, self.depth = self.depth, 0
        self.generic_visit(node)
        self.depth = saved_depth
        self.tests = saved_tests
        self.local_stack.pop()
        self.scope.pop()

    visit_AsyncFunctionDef = visit_FunctionDef

    def _block(self, stmts, test=None):
        if test is not None:
            self.tests.append(test)
        self.depth += 1
        for s in stmts:
            self.visit(s)
        self.depth -= 1
        if test is not None:
            self.tests.pop()

    def visit_If(self, node):
        self.visit(node.test)
        self._block(node.body, node.test)
        self._block(node.orelse, node.test)

    def _nested(self, node):
        for field in ("body", "handlers", "orelse", "finalbody"):
            for s in getattr(node, field, []) or []:
                self.depth += 1
                self.visit(s)
                self.depth -= 1
        for field in ("test", "iter", "items", "target", "subject"):
            v = getattr(node, field, None)
            if isinstance(v, list):
                for x in v:
                    self.visit(x)
            elif v is not None:
                self.visit(v)

    visit_For = visit_While = visit_With = visit_Try = visit_AsyncFor = visit_AsyncWith = _nested
    if sys.version_info >= (3, 11):
        visit_TryStar = _nested

    def visit_Match(self, node):
        self.visit(node.subject)
        for case in node.cases:
            self._block(case.body)

    # -- string variables --------------------------------------------------------------
    def visit_Assign(self, node):
        self.generic_visit(node)
        if len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            t = strtmpl(node.value, self.ctx())
            table = self.consts if len(self.scope) == 0 else self.local
            if t is None:
                table.pop(name, None)
                table.pop("\0raw:" + name, None)
                return
            table[name] = t
            table["\0depth:" + name] = self.depth
            raw = _raw_strings(node.value, self.ctx())
            if raw is not None:
                table["\0raw:" + name] = raw
            else:
                table.pop("\0raw:" + name, None)

    def visit_AnnAssign(self, node):
        self.generic_visit(node)
        if isinstance(node.target, ast.Name) and node.value is not None:
            t = strtmpl(node.value, self.ctx())
            table = self.consts if len(self.scope) == 0 else self.local
            if t is not None:
                table[node.target.id] = t
                table["\0depth:" + node.target.id] = self.depth

    def visit_AugAssign(self, node):
        self.generic_visit(node)
        if isinstance(node.op, ast.Add) and isinstance(node.target, ast.Name):
            name = node.target.id
            table = self.consts if len(self.scope) == 0 else self.local
            prev = table.get(name)
            if prev is None:
                return
            t = strtmpl(node.value, self.ctx()) or [_field(_name_of(node.value))]
            appended = _cross(prev, t)
            if self.depth > table.get("\0depth:" + name, 0):
                table[name] = (prev + appended)[:MAX_ALTS]     # conditional: with and without
            else:
                table[name] = appended
            table.pop("\0raw:" + name, None)

    # -- messages ----------------------------------------------------------------------
    def _emit(self, node, kind: str, level: str, msg_node, names_from=None, extra: list[str] | None = None):
        if msg_node is None:
            return
        ts = extra if extra is not None else strtmpl(msg_node, self.ctx())
        if ts is None:
            ts = [_field(_name_of(msg_node))]
        if names_from is not None:
            names = _names_read(names_from)
        elif self.tests:
            names = _names_read(self.tests[-1])
        else:
            names = []
        func = ".".join(self.scope) or "<module>"
        for t in dict.fromkeys(ts):
            t = t.strip()
            if not t:
                continue
            self.out.append({"t": t, "kind": kind, "level": level, "func": func, "names": names,
                             "site": f"{node.lineno}:{node.col_offset}"})

    def visit_Raise(self, node):
        exc = node.exc
        if isinstance(exc, ast.Call):
            self.raised.add(id(exc))
        self.generic_visit(node)
        if isinstance(exc, ast.Call):
            etype = _dotted(exc.func) or "Exception"
            etype = etype.rsplit(".", 1)[-1]
            msg = None
            for a in exc.args:
                if strtmpl(a, self.ctx()) is not None:
                    msg = a
                    break
            if msg is None and exc.args:
                msg = exc.args[0]
            self._emit(node, "raise", etype, msg)

    def visit_Assert(self, node):
        self.generic_visit(node)
        if node.msg is not None:
            self._emit(node, "assert", "AssertionError", node.msg, names_from=node.test)

    def visit_Return(self, node):
        self.generic_visit(node)
        # an exception's own text: `def __str__(self): return "Command '%s' returned ..." % ...`
        if node.value is not None and self.scope and self.scope[-1] == "__str__" and self.classes:
            if strtmpl(node.value, self.ctx()) is not None:
                self._emit(node, "raise", self.classes[-1], node.value)

    def visit_Call(self, node):
        self.generic_visit(node)
        f = node.func
        args = node.args
        # an exception built here and raised elsewhere: `return RuntimeError(f"...")`, `err = ValueError(...)`
        if id(node) not in self.raised and args:
            cls = (_dotted(f) or "").rsplit(".", 1)[-1]
            if EXC_CLASS.match(cls):
                msg = next((a for a in args if strtmpl(a, self.ctx()) is not None), None)
                if msg is not None:
                    self._emit(node, "raise", cls, msg)
                return
        if isinstance(f, ast.Attribute):
            recv = (_dotted(f.value) or "").lower()
            attr = f.attr
            if attr == "error" and ("parser" in recv or (self.self_is_parser and recv == "self")) and args:
                self._emit(node, "parser_error", "error", args[0])
                return
            if attr == "exit" and self.self_is_parser and recv == "self" and len(args) >= 2:
                self._emit(node, "exit", "exit", args[1])
                return
            if attr in LOG_METHODS and "log" in recv.rsplit(".", 1)[-1] and args:
                level = LOG_METHODS[attr]
                if len(args) > 1:
                    fmt = _raw_strings(args[0], self.ctx())
                    if fmt is not None:
                        ts = [t for s in fmt for t in pct_format(s, args[1:])]
                        self._emit(node, "log", level, args[0], extra=ts)
                        return
                self._emit(node, "log", level, args[0])
                return
            if recv == "sys" and attr == "exit" and args and strtmpl(args[0], self.ctx()) is not None:
                self._emit(node, "exit", "exit", args[0])
                return
            if recv == "warnings" and attr == "warn" and args:
                cat = "UserWarning"
                if len(args) > 1:
                    cat = (_dotted(args[1]) or cat).rsplit(".", 1)[-1]
                for k in node.keywords:
                    if k.arg == "category":
                        cat = (_dotted(k.value) or cat).rsplit(".", 1)[-1]
                self._emit(node, "warn", cat, args[0])
                return
            if attr in LOG_HELPERS and len(args) > LOG_HELPERS[attr][1]:
                level, i = LOG_HELPERS[attr]
                self._emit(node, "log", level, args[i])
                return
        elif isinstance(f, ast.Name):
            if f.id in LOG_HELPERS and len(args) > LOG_HELPERS[f.id][1]:
                level, i = LOG_HELPERS[f.id]
                if strtmpl(args[i], self.ctx()) is not None:
                    self._emit(node, "log", level, args[i])
                return
            if f.id == "print" and self.print_ok and args:
                first = strtmpl(args[0], self.ctx())
                if first is None or isinstance(args[0], ast.Name):
                    return
                sep = " "
                for k in node.keywords:
                    if k.arg == "sep" and isinstance(k.value, ast.Constant) and isinstance(k.value.value, str):
                        sep = k.value.value
                ts = first
                for a in args[1:]:
                    t = strtmpl(a, self.ctx()) or [_field(_name_of(a))]
                    ts = _cross([x + escape(sep) for x in ts], t)
                self._emit(node, "print", "print", args[0], extra=ts)
                return


def extract(source: str, module: str, component: str = "sglang") -> list[dict]:
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    print_ok = component == "sglang" and (module.startswith("sglang.srt") or module.startswith("sglang.launch_server"))
    ex = Extractor(component, module, print_ok, self_is_parser=(component == "python.argparse"))
    ex.visit(tree)
    return ex.out
