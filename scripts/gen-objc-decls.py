#!/usr/bin/env python3
"""gen-objc-decls.py - Apple's Objective-C declarations as a C table for the Linux
stand-in runtime of tests/objc_standin, which refuses any selector, receiver or
objc_msgSend cast that Apple does not declare.

It reads Apple's metal-cpp headers (Foundation/*.hpp, Metal/*.hpp: selectors
declared with _MTL_PRIVATE_DEF_SEL / _NS_PRIVATE_DEF_SEL, every method an inline
function calling Object::sendMessage<Ret>(receiver, SEL, args...)) and writes
tests/objc_standin/apple_decls.inc, sorted X-macro rows:
    MQ_DECL_CLASS("MTLBuffer", "MTLResource")                  a class and its base
    MQ_DECL_METHOD("MTLDevice", "newBufferWithLength:options:", 0, "id(NSUInteger,NSUInteger)")
    MQ_DECL_FUNCTION("MTLCopyAllDevices", "id()")              C functions
    MQ_DECL_CONST("MTLCommandBufferStatusCompleted", 4)        enum values
A method row gives 1 for a class method and the C type of the objc_msgSend call,
receiver and SEL left out, in the vocabulary of VOCAB (plus structs by their
Objective-C name). A selector a base class declares alike is listed there only;
methods whose body sends no message are skipped; files without Apple's copyright
are not Apple's and are skipped. It stops on any type it cannot map (listing
them) and checks FACTS (what backends/metal/objc_rt.c and backends/metal/metal.c send)
before it writes. Standard library only.

    git clone https://github.com/metal-by-example/learn-metal-cpp-ios /tmp/lmc
    git -C /tmp/lmc checkout ca28056339d286c5d1765016ea2065ea5b4e975c
    python3 scripts/gen-objc-decls.py /tmp/lmc/metal-cpp

That commit's metal-cpp/ is Apple's metal-cpp_macOS15.2_iOS18.2 (METALCPP_VERSION
367.4.2) plus the repository's own Foundation/NSFileManager.hpp (skipped here).
For another copy pass --repo and --commit, which the header cites.
"""
import argparse, ast, glob, os, re, sys

DEF_REPO = "https://github.com/metal-by-example/learn-metal-cpp-ios (metal-cpp/)"
DEF_COMMIT = "ca28056339d286c5d1765016ea2065ea5b4e975c"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# "unsigned char" is past the requested vocabulary: NSNumber's ...UnsignedChar and
# -[MTLBlitCommandEncoder fillBuffer:range:value:] (uint8_t) need it.
VOCAB = {"void", "id", "id*", "SEL", "Class", "BOOL", "char", "unsigned char", "int", "unsigned",
         "short", "unsigned short", "long", "NSUInteger", "float", "double", "ptr", "cstring", "block"}
SCALARS = {"void": "void", "bool": "BOOL", "BOOL": "BOOL", "char": "char", "signed char": "char",
           "int8_t": "char", "unsigned char": "unsigned char", "uint8_t": "unsigned char",
           "short": "short", "int16_t": "short", "unsigned short": "unsigned short",
           "uint16_t": "unsigned short", "int": "int", "int32_t": "int", "unsigned": "unsigned",
           "unsigned int": "unsigned", "uint32_t": "unsigned", "long": "long", "long long": "long",
           "int64_t": "long", "intptr_t": "long", "NSInteger": "long", "unsigned long": "NSUInteger",
           "unsigned long long": "NSUInteger", "uint64_t": "NSUInteger", "uintptr_t": "NSUInteger",
           "size_t": "NSUInteger", "NSUInteger": "NSUInteger", "float": "float", "double": "double",
           "CFTimeInterval": "double", "SEL": "SEL", "Class": "Class",
           # SDK types metal-cpp uses (mach_port_t is unsigned int; dispatch objects are objects)
           "IOSurfaceRef": "ptr", "dispatch_queue_t": "id", "dispatch_data_t": "id",
           "kern_return_t": "int", "task_id_token_t": "unsigned"}
BASE_TEMPLATES = {"Referencing", "Copying", "SecureCoding"}   # all mean NSObject
QUALIFIERS = {"const", "volatile", "struct", "class", "enum", "typename"}
BUILTINS = {"void", "bool", "char", "short", "int", "long", "unsigned", "signed", "float", "double"}
# What the table must hold: "Class+sel=sig" (class method), "Class-sel=sig" (instance
# method, looked up through the bases as the runtime does), "Function=sig"; with the
# types Apple's documentation gives for each message objc_rt.c and metal.c send.
FACTS = """
NSString+stringWithUTF8String:=id(cstring) NSString-UTF8String=cstring() NSNumber+numberWithInt:=id(int)
NSDictionary+dictionaryWithObjects:forKeys:count:=id(id*,id*,NSUInteger) NSError-localizedDescription=id()
NSObject-release=void() NSObject-retain=id() NSObject-autorelease=id() NSObject-respondsToSelector:=BOOL(SEL)
NSObject+alloc=id() NSObject-init=id() MTLCompileOptions+alloc=id() MTLCompileOptions-init=id()
NSArray-count=NSUInteger() NSArray-objectAtIndex:=id(NSUInteger)
MTLDevice-newBufferWithLength:options:=id(NSUInteger,NSUInteger)
MTLDevice-newBufferWithBytes:length:options:=id(ptr,NSUInteger,NSUInteger)
MTLDevice-newLibraryWithSource:options:error:=id(id,id,id*)
MTLDevice-newComputePipelineStateWithFunction:error:=id(id,id*) MTLDevice-newCommandQueue=id()
MTLDevice-name=id() MTLDevice-architecture=id() MTLDevice-hasUnifiedMemory=BOOL()
MTLDevice-maxThreadgroupMemoryLength=NSUInteger() MTLDevice-recommendedMaxWorkingSetSize=NSUInteger()
MTLDevice-respondsToSelector:=BOOL(SEL) MTLArchitecture-name=id() MTLLibrary-newFunctionWithName:=id(id)
MTLCompileOptions-setPreprocessorMacros:=void(id) MTLCompileOptions-setFastMathEnabled:=void(BOOL)
MTLCompileOptions-setLanguageVersion:=void(NSUInteger) MTLCompileOptions-setMathMode:=void(long)
MTLComputePipelineState-maxTotalThreadsPerThreadgroup=NSUInteger()
MTLComputePipelineState-threadExecutionWidth=NSUInteger()
MTLComputePipelineState-staticThreadgroupMemoryLength=NSUInteger()
MTLCommandQueue-commandBuffer=id() MTLCommandBuffer-computeCommandEncoder=id() MTLCommandBuffer-commit=void()
MTLCommandBuffer-waitUntilCompleted=void() MTLCommandBuffer-status=NSUInteger() MTLCommandBuffer-error=id()
MTLCommandBuffer-GPUStartTime=double() MTLCommandBuffer-GPUEndTime=double()
MTLComputeCommandEncoder-setComputePipelineState:=void(id)
MTLComputeCommandEncoder-setBuffer:offset:atIndex:=void(id,NSUInteger,NSUInteger)
MTLComputeCommandEncoder-setBytes:length:atIndex:=void(ptr,NSUInteger,NSUInteger)
MTLComputeCommandEncoder-dispatchThreadgroups:threadsPerThreadgroup:=void(MTLSize,MTLSize)
MTLComputeCommandEncoder-endEncoding=void() MTLBuffer-contents=ptr() MTLBuffer-length=NSUInteger()
MTLCreateSystemDefaultDevice=id() MTLCopyAllDevices=id()
""".split()
CONST_FACTS = {"MTLCommandBufferStatusCompleted": 4, "MTLResourceStorageModeShared": 0,
               "MTLResourceCPUCacheModeDefaultCache": 0, "MTLResourceStorageModeShift": 4,
               "MTLLanguageVersion3_0": 196608, "MTLMathModeSafe": 0}
# Apple declarations metal-cpp does not wrap but the project sends, with Apple's page
# (its symbol id, c:objc(cs)NSString(cm)stringWithUTF8String:, says class method).
SUPPLEMENT = [("NSString", "stringWithUTF8String:", 1, "id(cstring)", "developer.apple.com/"
               "documentation/foundation/nsstring/init(utf8string:)-321f6 (const char *)")]
CONST_ENUMS = ["CommandBufferStatus", "LanguageVersion", "MathMode"]   # every member
CONST_NAMES = ["ResourceStorageModeShared", "ResourceCPUCacheModeDefaultCache"]
# MTLResourceStorageModeShift: a #define of Apple's Objective-C header that metal-cpp
# lacks; derived as the shift s with ResourceStorageModeX == StorageModeX << s for all X.

def die(msg):
    sys.exit("gen-objc-decls: " + msg)

def clean(text):
    """Comments and preprocessor lines (with their continuations) out."""
    text = re.sub(r"//[^\n]*", "", re.sub(r"/\*.*?\*/", " ", text, flags=re.S))
    out, cont = [], False
    for line in text.split("\n"):
        if cont or line.lstrip().startswith("#"):
            cont = line.rstrip().endswith("\\")
        else:
            out.append(line)
    return "\n".join(out)

def split_top(s, sep=","):
    """Split at separators outside (), <>, [], {}."""
    parts, depth, cur = [], 0, ""
    for ch in s:
        depth += (ch in "(<[{") - (ch in ")>]}")
        if ch == sep and depth == 0:
            parts, cur = parts + [cur], ""
        else:
            cur += ch
    return [p.strip() for p in parts + [cur] if p.strip()]

def balanced(text, i, open_ch, close_ch):
    """Index just past the group opening at text[i]."""
    depth = 0
    for j in range(i, len(text)):
        depth += (text[j] == open_ch) - (text[j] == close_ch)
        if depth == 0:
            return j + 1
    die("unbalanced %s at %r" % (open_ch, text[i:i + 80]))

def strip_targs(s):
    while "<" in s:
        i = s.index("<")
        s = s[:i] + s[balanced(s, i, "<", ">"):]
    return s

def objc_name(q):
    ns, short = q.split("::", 1)
    return "NSObject" if q == "NS::Object" or short in BASE_TEMPLATES else ns + short

def lookup(name, ns):
    name = name[5:] if name.startswith("std::") else name
    return [name] if "::" in name else [ns + "::" + name, "NS::" + name, "MTL::" + name]

class Headers:
    """What the headers declare: selectors, classes, structs, aliases, enums."""
    def __init__(self, root):
        self.files, self.skipped = [], []
        for sub, ns in (("Foundation", "NS"), ("Metal", "MTL")):
            paths = sorted(glob.glob(os.path.join(root, sub, "*.hpp"))) or die("no %s/*.hpp in %s" % (sub, root))
            for p in paths:
                raw = open(p, encoding="utf-8", errors="replace").read()
                if re.search(r"Copyright[^\n]*Apple Inc", raw):
                    self.files.append((ns, os.path.relpath(p, root), clean(raw)))
                else:
                    self.skipped.append(os.path.relpath(p, root))
        self.sels, self.classes, self.structs, self.aliases = {}, {}, set(), {}
        self.enums, self.members, self.enum_members = {}, {}, {}
        for ns, _, t in self.files:
            self.scan(ns, t)

    def scan(self, ns, t):
        for m in re.finditer(r'_(MTL|NS)_PRIVATE_DEF_SEL\(\s*(\w+)\s*,\s*"([^"]*)"\s*\)', t):
            self.sels[(m.group(1), m.group(2))] = m.group(3)
        for m in re.finditer(r"\bclass\s+(?:_NS_EXPORT\s+)?(\w+)\s*(:[^{;]*)?([{;])", t):
            if m.group(3) == "{":   # a definition: its base list; a declaration: None
                self.classes[ns + "::" + m.group(1)] = (m.group(2) or ":")[1:].strip()
            else:
                self.classes.setdefault(ns + "::" + m.group(1), None)
        for m in re.finditer(r"\bclass\s+(?:(NS|MTL)::)?(\w+)\s*\*", t):   # "class X*" in a type
            self.classes.setdefault((m.group(1) or ns) + "::" + m.group(2), None)
        for m in re.finditer(r"\bstruct\s+(\w+)\s*(?::[^{;]*)?\{", t):
            self.structs.add(ns + "::" + m.group(1))
        for m in re.finditer(r"\busing\s+(\w+)\s*=\s*([^;]+);", t):
            self.aliases.setdefault(ns + "::" + m.group(1), (ns, m.group(2).strip()))
        for m in re.finditer(r"\btypedef\s+([^;]+?)\s+(\w+)\s*;", t):
            self.aliases.setdefault(ns + "::" + m.group(2), (ns, m.group(1).strip()))
        for m in re.finditer(r"_(?:MTL|NS)_(?:ENUM|OPTIONS)\s*\(\s*([^,]+?)\s*,\s*(\w+)\s*\)\s*\{", t):
            q, names, nxt = ns + "::" + m.group(2), [], 0
            self.enums[q] = (ns, m.group(1))
            for item in split_top(t[m.end():balanced(t, m.end() - 1, "{", "}") - 1]):
                name, _, expr = (x.strip() for x in item.partition("="))
                val = self.evaluate(expr, ns) if expr else nxt
                self.members[ns + "::" + name], nxt = val, None if val is None else val + 1
                names.append(name)
            self.enum_members[q] = names

    def evaluate(self, expr, ns):
        """An enumerator's integer value (None where it is no integer expression)."""
        expr = re.sub(r"\b(?:NS|MTL)::", "", re.sub(r"\b(0x[0-9a-fA-F]+|\d+)[uUlL]+\b", r"\1", expr))
        ops = {ast.BitOr: "__or__", ast.BitAnd: "__and__", ast.BitXor: "__xor__", ast.Add: "__add__",
               ast.Sub: "__sub__", ast.Mult: "__mul__", ast.LShift: "__lshift__", ast.RShift: "__rshift__"}

        def ev(n):
            if isinstance(n, ast.Constant) and type(n.value) is int:
                return n.value
            if isinstance(n, ast.Name) and self.members.get(ns + "::" + n.id) is not None:
                return self.members[ns + "::" + n.id]
            if isinstance(n, ast.UnaryOp) and isinstance(n.op, (ast.USub, ast.Invert)):
                return -ev(n.operand) if isinstance(n.op, ast.USub) else ~ev(n.operand)
            if isinstance(n, ast.BinOp) and type(n.op) in ops:
                return getattr(ev(n.left), ops[type(n.op)])(ev(n.right))
            raise ValueError(ast.dump(n))
        try:
            return ev(ast.parse(expr, mode="eval").body)
        except (SyntaxError, ValueError):
            return None

class Mapper:
    """metal-cpp types to the canonical vocabulary; what it cannot map, it collects."""
    def __init__(self, h):
        self.h, self.unmapped = h, set()

    def canon(self, t, ns, tparams=(), where=""):
        t = " ".join(t.split())
        if "(^" in t or "std::function" in t:
            return "block"
        if "(*" in t:
            return "ptr"
        const = bool(re.search(r"\bconst\b", t))
        t = re.sub(r"\b(const|volatile|class|struct|typename|enum)\b", " ", strip_targs(t)).replace("&", " ")
        ptrs, base = t.count("*"), " ".join(t.replace("*", " ").split())
        if base in tparams or base == "id":   # a template's object type, or id itself
            return {1: "id", 2: "id*"}.get(ptrs + (base == "id")) or self.bad(t, where)
        if base.replace("std::", "") in SCALARS:
            s = SCALARS[base.replace("std::", "")]
            return s if ptrs == 0 else "cstring" if (s == "char" and const and ptrs == 1) else "ptr"
        for q in lookup(base, ns):
            if q in self.h.aliases:
                ans, target = self.h.aliases[q]
                return self.canon(("const " if const else "") + target + "*" * ptrs, ans, tparams, where)
            if q in self.h.enums:
                ens, under = self.h.enums[q]
                return self.canon(under + "*" * ptrs, ens, tparams, where)
            if q in self.h.structs:
                return objc_name(q) if ptrs == 0 else "ptr"
            if q in self.h.classes and not q.endswith("::SharedPtr"):
                return {1: "id", 2: "id*"}.get(ptrs) or self.bad(t, where)
        return self.bad(base + "*" * ptrs, where)

    def bad(self, t, where):
        self.unmapped.add("%s  (%s)" % (t.strip(), where))
        return "?"

def parse_params(plist):
    """[(name or None, type)] of a parameter list."""
    out = []
    for p in split_top(plist):
        p = split_top(p, "=")[0]   # no default value
        if p == "void":
            continue
        m = re.search(r"\(\s*[\^*]\s*(\w+)\s*\)", p)   # a block or function pointer
        if m:
            out.append((m.group(1), p[:m.start(1)] + p[m.end(1):]))
            continue
        m = re.match(r"(.*?)(\w+)\s*((?:\[\w*\]\s*)*)$", p, re.S)
        pre = m.group(1).strip() if m else ""
        if pre.endswith("::") or set(pre.split()) <= QUALIFIERS or m.group(2) in BUILTINS:
            out.append((None, p))
        else:
            out.append((m.group(2), m.group(1) + "*" * m.group(3).count("[")))
    return out

def methods(h, mp):
    """(class, selector, class method?, signature) of every sendMessage of an inline body."""
    rows = set()
    head_re = re.compile(r"(?:(template\s*<[^{};]*?>)\s*)?\b_(?:MTL|NS)_INLINE\b")
    send_re = re.compile(r"sendMessage(?:Safe)?\s*<")
    for ns, path, t in h.files:
        for m in head_re.finditer(t):
            j = m.end()
            while j < len(t) and t[j] not in "{;":
                j = balanced(t, j, "(", ")") if t[j] == "(" else j + 1
            if j >= len(t) or t[j] != "{":
                continue
            head, body = t[m.end():j], t[j:balanced(t, j, "{", "}")]
            if not send_re.search(body):
                continue   # a convenience wrapper
            tparams = re.findall(r"(?:class|typename)\s+(\w+)", m.group(1) or "")
            hm = re.search(r"((?:\w+(?:<[^()]*?>)?::)+)(\w+)\s*(?:<[^()]*>)?\s*\(", head) \
                or die("%s: cannot read %r" % (path, head))
            owner, pstart = strip_targs(hm.group(1))[:-2], hm.end() - 1
            types = dict(parse_params(head[pstart + 1:balanced(head, pstart, "(", ")") - 1]))
            where = "%s %s::%s" % (path, owner, hm.group(2))
            for s in send_re.finditer(body):
                ret_end = balanced(body, s.end() - 1, "<", ">")
                args = split_top(body[ret_end + 1:balanced(body, ret_end, "(", ")") - 1])
                sm = len(args) > 1 and re.fullmatch(r"_(MTL|NS)_PRIVATE_SEL\((\w+)\)", args[1])
                if not sm:
                    continue   # the generic sendMessage itself
                sel = h.sels.get(sm.groups()) or die("%s: no selector %s" % (where, args[1]))
                cm = re.fullmatch(r"_(?:MTL|NS)_PRIVATE_CLS\((\w+)\)", args[0])
                is_cls = bool(cm) or args[0] in ("pClass", "objc_lookUpClass(pClassName)")
                argt = [mp.canon(types.get(a) or die("%s: argument %r is no parameter" % (where, a)),
                                 ns, tparams, where) for a in args[2:]]
                ret = mp.canon(body[s.end():ret_end - 1], ns, tparams, where)
                rows.add((cm.group(1) if cm else objc_name(owner), sel, int(is_cls),
                          "%s(%s)" % (ret, ",".join(argt))))
    return rows

def functions(h, mp):
    """C functions: extern "C" declarations and MTL_DEF_FUNC(name, RET (*)(ARGS))."""
    rows = set()
    pats = [r'extern\s+"C"\s+(?P<ret>[^;(]+?)\s*\b(?P<name>\w+)\s*\((?P<args>[^;]*)\)\s*;',
            r"MTL_DEF_FUNC\s*\(\s*(?P<name>\w+)\s*,\s*(?P<ret>.+?)\(\s*\*\s*\)\s*\((?P<args>.*?)\)\s*\)\s*;"]
    for ns, path, t in h.files:
        for m in (m for p in pats for m in re.finditer(p, t)):
            args = [mp.canon(ty, ns, (), path) for _, ty in parse_params(m.group("args"))]
            rows.add((m.group("name"), "%s(%s)" % (mp.canon(m.group("ret"), ns, (), path), ",".join(args))))
    return rows

def class_table(h):
    """Objective-C class -> base, from the class definitions' first base."""
    table = {"NSObject": ""}
    for q, spec in h.classes.items():
        ns, short = q.split("::")
        if spec is None or short in BASE_TEMPLATES | {"SharedPtr"} or q == "NS::Object":
            continue
        first = re.sub(r"^(public|private|protected)\s+", "", split_top(spec)[0]).replace("class ", "").strip()
        bshort = strip_targs(first).split("::")[-1].strip()
        if bshort in BASE_TEMPLATES:   # Referencing<Self[, Base]>
            targs = split_top(first[first.index("<") + 1:first.rindex(">")])
            first = targs[1] if len(targs) > 1 else "NS::Object"
        table[objc_name(q)] = "NSObject" if bshort == "_Base" else objc_name(lookup(strip_targs(first), ns)[0])
    for c, b in table.items():
        if b and b not in table:
            die("class %s has the unknown base %s" % (c, b))
    return table

def constants(h):
    out = {}
    for e in CONST_ENUMS:
        for name in h.enum_members.get("MTL::" + e) or die("no enum MTL::" + e):
            out["MTL" + name] = h.members["MTL::" + name]
    for name in CONST_NAMES:
        out["MTL" + name] = h.members.get("MTL::" + name)
    shifts = set()
    for name in h.enum_members.get("MTL::StorageMode", []):
        v, r = h.members["MTL::" + name], h.members.get("MTL::Resource" + name)
        if v and r is not None:
            shifts |= {s for s in range(64) if v << s == r} or {None}
    out["MTLResourceStorageModeShift"] = shifts.pop() if len(shifts) == 1 else None
    for k, v in out.items():
        if v is None:
            die("no value for %s (%r)" % (k, shifts))
    return out

def version(root):
    try:
        t = open(os.path.join(root, "Metal", "MTLVersion.hpp")).read()
        return ".".join(re.search(r"METALCPP_VERSION_%s\s+(\d+)" % p, t).group(1)
                        for p in ("MAJOR", "MINOR", "PATCH"))
    except (OSError, AttributeError):
        return "unknown"

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("metal_cpp", help="a metal-cpp checkout (holds Foundation/ and Metal/)")
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "objc_standin", "apple_decls.inc"))
    ap.add_argument("--repo", default=DEF_REPO)
    ap.add_argument("--commit", default=DEF_COMMIT)
    a = ap.parse_args()
    h = Headers(a.metal_cpp)
    mp = Mapper(h)
    meths, funcs = methods(h, mp), functions(h, mp)
    if mp.unmapped:
        die("unmapped types:\n  " + "\n  ".join(sorted(mp.unmapped)))
    classes, consts = class_table(h), constants(h)

    def ancestors(c):
        while classes.get(c):
            c = classes[c]
            yield c
    supplied = {r[:4] for r in SUPPLEMENT} - meths
    declared = meths | supplied
    inherited = {r for r in declared if any((b,) + r[1:] in declared for b in ancestors(r[0]))}
    meths = declared - inherited
    for c, s, k, g in meths | {("", n, 0, g) for n, g in funcs}:
        if c and c not in classes:
            die("methods on %s, which is no class of the headers" % c)
        for x in re.findall(r"[\w ]+\*?", g):
            if x not in VOCAB and "MTL::" + x[3:] not in h.structs and "NS::" + x[2:] not in h.structs:
                die("%s %s: %r is outside the vocabulary" % (c, s, x))

    def find(c, s, k):   # the signatures of c's s, declared on c or a base
        for cc in [c] + list(ancestors(c)):
            got = sorted(g for c2, s2, k2, g in meths if (c2, s2, k2) == (cc, s, k))
            if got:
                return got
        return []
    fails = []
    for fact in FACTS:
        cls, kind, sel, sig = re.fullmatch(r"(\w+)(?:([+-])([\w:]+))?=(\S+)", fact).groups()
        got = find(cls, sel, int(kind == "+")) if kind else [g for n, g in funcs if n == cls]
        if sig not in got:
            fails.append("%s: found %s" % (fact, got or "nothing"))
    fails += ["%s=%d: found %r" % (k, v, consts.get(k)) for k, v in CONST_FACTS.items() if consts.get(k) != v]
    if fails:
        die("self-check failed:\n  " + "\n  ".join(fails))

    q = '"%s"'.__mod__
    rows = ["MQ_DECL_CLASS(%s, %s)" % (q(c), q(b)) for c, b in classes.items()]
    rows += ["MQ_DECL_METHOD(%s, %s, %d, %s)" % (q(c), q(s), k, q(g)) for c, s, k, g in meths]
    rows += ["MQ_DECL_FUNCTION(%s, %s)" % (q(n), q(g)) for n, g in funcs]
    rows += ["MQ_DECL_CONST(%s, %d)" % (q(n), v) for n, v in consts.items()]
    head = ["/* apple_decls.inc - Apple's Objective-C declarations: classes and bases, methods with",
            " * the C type of their objc_msgSend call (receiver and SEL left out; 1 = class method),",
            " * C functions, enum values. Generated by scripts/gen-objc-decls.py from",
            " * %s at %s" % (a.repo, a.commit),
            " * (Apple's metal-cpp, METALCPP_VERSION %s). DO NOT EDIT BY HAND: regenerate with" % version(a.metal_cpp),
            " * python3 scripts/gen-objc-decls.py <metal-cpp checkout> (the script's docstring says",
            " * how to get that checkout). Define MQ_DECL_CLASS(name, base), MQ_DECL_METHOD(class,",
            " * selector, class_method, sig), MQ_DECL_FUNCTION(name, sig), MQ_DECL_CONST(name, value)",
            " * before including. MTLResourceStorageModeShift is derived (metal-cpp has no #define).",
            " * Skipped as not Apple's: %s." % (", ".join(h.skipped) or "nothing")]
    head += [" * Not in metal-cpp, from Apple's documentation: %s %s%s %s" % (c, "+" if k else "-", s, doc)
             for c, s, k, g, doc in SUPPLEMENT if (c, s, k, g) in supplied]
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with open(a.out, "w") as f:
        f.write("\n".join(head) + " */\n" + "\n".join(sorted(rows)) + "\n")
    print("gen-objc-decls: %d classes, %d methods (%d inherited duplicates dropped), %d functions, "
          "%d constants; %d facts checked; skipped %s -> %s" % (
              len(classes), len(meths), len(inherited), len(funcs), len(consts),
              len(FACTS) + len(CONST_FACTS), ", ".join(h.skipped) or "nothing", os.path.relpath(a.out)))

if __name__ == "__main__":
    main()
