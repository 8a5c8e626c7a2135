#!/usr/bin/env python3
"""gen_cases.py -- turn the case files into data the C runner reads.

For every case it generates fresh random inputs (seeded: REDJIT_TEST_SEED or
a new seed, printed), evaluates the case's `expect` with NumPy -- an
independent reference, never redjit -- and writes PREFIX.manifest (text) and
PREFIX.bin (raw little-endian arrays).  The format is described in
tests/README.md; the families of generated cases (operator x dtype matrices
and the like) live at the end of this file and are written out as
PREFIX.families.cases so they can be read like the hand-written ones.

usage: gen_cases.py --out PREFIX [--seed N] [--families] FILE...
"""

import argparse
import functools
import math
import os
import re
import struct
import sys
import warnings
import zlib

import numpy as np

np.seterr(all="ignore")
warnings.simplefilter("ignore")

# ---------------------------------------------------------------------------
# Types.  Codes are red_dtype's values; BAD is a deliberately invalid code.
DTYPES = ["bool", "i32", "i64", "u32", "u64", "f16", "bf16", "f32", "f64"]
CODE = {"bool": 1, "i32": 2, "i64": 3, "u32": 4, "u64": 5, "f16": 6, "bf16": 7,
        "f32": 8, "f64": 9, "i8": 10, "u8": 11, "i16": 12, "u16": 13, "c64": 14, "c128": 15,
        "bad": 42}
STORE = {"bool": np.uint8, "i32": np.int32, "i64": np.int64, "u32": np.uint32,
         "u64": np.uint64, "f16": np.float16, "bf16": np.uint16,
         "f32": np.float32, "f64": np.float64, "i8": np.int8, "u8": np.uint8,
         "i16": np.int16, "u16": np.uint16, "c64": np.complex64, "c128": np.complex128,
         "bad": np.uint8}
# The NumPy type a case's `expect` sees: f16 and bf16 appear as the exact
# float32 values their bits represent ("computed as f32").
REF = {"bool": np.bool_, "i32": np.int32, "i64": np.int64, "u32": np.uint32,
       "u64": np.uint64, "f16": np.float32, "bf16": np.float32,
       "f32": np.float32, "f64": np.float64, "i8": np.int32, "u8": np.int32,
       "i16": np.int32, "u16": np.int32, "c64": np.complex64, "c128": np.complex128}
INTS = ["i32", "i64", "u32", "u64"]
# 8- and 16-bit integers: stored narrow, computed as i32 (their reference type)
SMALL = ["i8", "u8", "i16", "u16"]
# complex: stored as NumPy's complex64 / complex128, results compared part by part
CPLX = ["c64", "c128"]
FLOATS = ["f16", "bf16", "f32", "f64"]
SIGNED = ["i32", "i64"]
UNSIGNED = ["u32", "u64"]

STATUS = {
    "RED_OK": 0, "RED_ERR_NOMEM": 1, "RED_ERR_ARG": 2, "RED_ERR_SYNTAX": 3,
    "RED_ERR_NAME": 4, "RED_ERR_TYPE": 5, "RED_ERR_SHAPE": 6, "RED_ERR_BIND": 7,
    "RED_ERR_INDEX": 8, "RED_ERR_EMPTY": 9, "RED_ERR_KEYS": 10, "RED_ERR_LIMIT": 11,
    "RED_ERR_UNSUPPORTED": 12, "RED_ERR_DEVICE": 13, "RED_ERR_COMPILE": 14,
    "RED_ERR_MISUSE": 15, "RED_ERR_INTERNAL": 16,
}


class CaseError(Exception):
    pass


# ---------------------------------------------------------------------------
# bfloat16: NumPy has none.  Values are stored as the top 16 bits of a float32
# (rounded to nearest even); the reference uses the float32 those bits denote.
def bf16_bits(x):
    b = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    nan = np.isnan(np.asarray(x, np.float32))
    r = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)
    return np.where(nan, np.uint16(0x7FC0), r).astype(np.uint16)


def bf16_value(bits):
    return (np.asarray(bits, np.uint16).astype(np.uint32) << 16).view(np.float32)


def rne_bf16(x):
    """x rounded to bfloat16 precision, as float32 (the language's bf16(x))."""
    return bf16_value(bf16_bits(np.asarray(x, np.float32)))


# ---------------------------------------------------------------------------
# Reference helpers available to `expect`, `mag` and `py:` lines.
def f64(a):
    return np.asarray(a, np.float64)


def _int_result(q, dt):
    return np.asarray(q).astype(dt) if dt is not None else q


def cdiv(a, b):
    """C integer division: truncates toward zero, x / 0 == 0."""
    a = np.asarray(a)
    b = np.asarray(b)
    dt = np.result_type(a, b)
    a = a.astype(dt)
    b = b.astype(dt)
    bz = np.where(b == 0, np.ones_like(b), b)
    q = a // bz
    r = a - q * bz
    adj = (r != 0) & ((a < 0) != (bz < 0))
    q = q + adj.astype(dt)
    return np.where(b == 0, np.zeros_like(q), q).astype(dt)


def crem(a, b):
    """C remainder: sign of the dividend, x % 0 == 0."""
    a = np.asarray(a)
    b = np.asarray(b)
    dt = np.result_type(a, b)
    q = cdiv(a, b)
    r = a.astype(dt) - q * b.astype(dt)
    return np.where(b == 0, np.zeros_like(r), r).astype(dt)


def sat(x, dt):
    """Float to integer: truncate toward zero, saturate, NaN -> 0."""
    x = np.trunc(f64(x))
    info = np.iinfo(dt)
    out = np.zeros(x.shape, dtype=dt)
    nan = np.isnan(x)
    lo = x <= float(info.min)
    hi = x >= float(info.max)
    mid = ~(nan | lo | hi)
    out[mid] = x[mid].astype(dt)
    out[lo] = info.min
    out[hi] = info.max
    return out


def round_away(x):
    """round(): halves away from zero (NumPy's np.round goes to even)."""
    x = f64(x)
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


def shl(x, s):
    """x << (s mod width) in x's type, wrapping."""
    x = np.asarray(x)
    bits = x.dtype.itemsize * 8
    u = x.view(np.uint32 if bits == 32 else np.uint64)
    s = (np.asarray(s).astype(np.int64) % bits).astype(u.dtype)
    return np.left_shift(u, s).view(x.dtype)


def shr(x, s):
    """x >> (s mod width): arithmetic for signed x."""
    x = np.asarray(x)
    bits = x.dtype.itemsize * 8
    s = (np.asarray(s).astype(np.int64) % bits).astype(x.dtype)
    return np.right_shift(x, s)


def fold(fn, init, seq):
    return functools.reduce(fn, seq, init)


def keyed(vals, keys, op, nkeys=None):
    """One result per key 0..max(keys): op in sum prod min max count any all
    mean argmin argmax; keys that do not occur get the identity."""
    keys = np.asarray(keys).astype(np.int64)
    vals = np.asarray(vals)
    n = int(keys.max()) + 1 if nkeys is None else nkeys
    if op == "sum":
        if vals.dtype.kind == "f":
            out = np.zeros(n, np.float64)
            np.add.at(out, keys, f64(vals))
        else:
            dt = np.uint64 if vals.dtype.kind == "u" else np.int64
            out = np.zeros(n, dt)
            np.add.at(out, keys, vals.astype(dt))
        return out
    if op == "prod":
        dt = np.float64 if vals.dtype.kind == "f" else (np.uint64 if vals.dtype.kind == "u" else np.int64)
        out = np.ones(n, dt)
        np.multiply.at(out, keys, vals.astype(dt))
        return out
    if op in ("min", "max"):
        if vals.dtype.kind == "f":
            out = np.full(n, np.inf if op == "min" else -np.inf, np.float64)
            v = f64(vals)
        else:
            info = np.iinfo(vals.dtype)
            out = np.full(n, info.max if op == "min" else info.min, vals.dtype)
            v = vals
        (np.minimum if op == "min" else np.maximum).at(out, keys, v)
        return out
    if op == "count":
        return np.bincount(keys[vals != 0], minlength=n).astype(np.int64)
    if op == "any":
        return keyed(vals != 0, keys, "count", n) > 0
    if op == "all":
        return keyed(vals == 0, keys, "count", n) == 0
    if op == "mean":
        s = keyed(f64(vals), keys, "sum", n)
        c = np.bincount(keys, minlength=n).astype(np.float64)
        return s / c
    if op in ("argmin", "argmax"):
        out = np.zeros(n, np.int64)
        for k in range(n):
            idx = np.nonzero(keys == k)[0]
            if len(idx) == 0:
                raise CaseError("keyed %s: key %d is empty" % (op, k))
            sub = vals[idx]
            out[k] = idx[(np.argmin if op == "argmin" else np.argmax)(sub)]
        return out
    raise CaseError("keyed: unknown op %r" % op)


def segs(ptr, fn):
    """[fn(lo, hi) for each row of a CSR offset array]."""
    ptr = np.asarray(ptr).astype(np.int64)
    return np.array([fn(int(ptr[r]), int(ptr[r + 1])) for r in range(len(ptr) - 1)])


def segscan(vals, keys, fn, axis=-1):
    """A scan that restarts where `keys` differs from the element before it
    (along `axis`, each row on its own): fn is the unsegmented scan of one
    run, e.g. np.cumsum."""
    vals, keys = np.asarray(vals), np.asarray(keys)
    vals, keys = np.moveaxis(vals, axis, -1), np.moveaxis(keys, axis, -1)
    out = None
    for idx in np.ndindex(*vals.shape[:-1]):
        v, k = vals[idx], keys[idx]
        cut = np.flatnonzero(k[1:] != k[:-1]) + 1
        r = np.concatenate([fn(p) for p in np.split(v, cut)]) if len(v) else fn(v)
        if out is None:
            out = np.zeros(vals.shape, r.dtype)
        out[idx] = r
    return np.moveaxis(out, -1, axis)


def rangescan(ptr, vals, fn):
    """A scan over CSR rows: fn (e.g. np.cumsum) of each row's vals[ptr[r]:ptr[r+1]],
    each at its range of the result (the ranges tile 0..len(vals))."""
    ptr, vals = np.asarray(ptr).astype(np.int64), np.asarray(vals)
    out = None
    for r in range(len(ptr) - 1):
        lo, hi = int(ptr[r]), int(ptr[r + 1])
        if hi == lo:
            continue
        part = np.asarray(fn(vals[lo:hi]))
        if out is None:
            out = np.zeros(len(vals), part.dtype)
        out[lo:hi] = part
    return out if out is not None else np.asarray(fn(vals[:0]))


def scanloop(fn, seq, init=None):
    """The inclusive scan of a Python two-argument function over seq."""
    out, acc = [], init
    for x in seq:
        acc = x if acc is None else fn(acc, x)
        out.append(acc)
    return out


def pmag(*xs):
    """Sum of magnitudes helper: elementwise product of |x| in float64."""
    out = 1.0
    for x in xs:
        out = out * np.abs(f64(x))
    return out


HELPERS = dict(np=np, math=math, f64=f64, cdiv=cdiv, crem=crem, sat=sat,
               round_away=round_away, shl=shl, shr=shr, fold=fold, keyed=keyed,
               segs=segs, segscan=segscan, rangescan=rangescan, scanloop=scanloop, rne_bf16=rne_bf16, pmag=pmag,
               i32=np.int32, i64=np.int64, u32=np.uint32, u64=np.uint64)


# ---------------------------------------------------------------------------
# Case files: records separated by blank lines; '#' at column 0 is a comment.
KEYS = {"name", "expr", "expect", "mag", "dtype", "rtol", "atol", "names", "py",
        "status", "at", "msg", "note", "eval", "allzero"}


def parse_file(path, text=None):
    if text is None:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    recs = []
    cur = None
    for ln, line in enumerate(text.split("\n"), 1):
        s = line.rstrip()
        if s.startswith("#"):
            continue
        if not s.strip():
            if cur is not None:
                recs.append(cur)
                cur = None
            continue
        if cur is None:
            cur = {"src": "%s:%d" % (os.path.basename(path), ln), "inputs": [], "expr": [], "py": [],
                   "msg": []}
        m = re.match(r"^([A-Za-z_][A-Za-z0-9_]*)\s*([:=])\s?(.*)$", s)
        if not m:
            raise CaseError("%s:%d: cannot read line: %r" % (path, ln, s))
        key, sep, val = m.group(1), m.group(2), m.group(3)
        if sep == "=":
            cur["inputs"].append(("weak", key, val.strip(), ln))
        elif key in ("expr", "py", "msg"):
            cur[key].append(val)
        elif key in KEYS:
            if key in cur:
                raise CaseError("%s:%d: duplicate %s" % (path, ln, key))
            cur[key] = val.strip()
        else:
            cur["inputs"].append(("array", key, val.strip(), ln))
    if cur is not None:
        recs.append(cur)
    for r in recs:
        if "name" not in r:
            raise CaseError("%s: record without name" % r["src"])
        if not r["expr"]:
            raise CaseError("%s: %s: no expr" % (r["src"], r["name"]))
    return recs


def split_top(s, sep=","):
    out, depth, cur = [], 0, ""
    for ch in s:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == sep and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur)
    return [x.strip() for x in out]


# ---------------------------------------------------------------------------
# Input generation.
def pyval(tok):
    t = tok.strip()
    if t in ("nan", "+nan"):
        return float("nan")
    if t in ("inf", "+inf"):
        return float("inf")
    if t == "-inf":
        return float("-inf")
    if t in ("true", "True"):
        return True
    if t in ("false", "False"):
        return False
    if t.endswith("j"):
        return complex(t)
    return int(t, 0) if re.match(r"^[-+]?(0x[0-9a-fA-F]+|\d+)$", t) else float(t)


def gen_values(dt, shape, gen, args, rng, ns):
    """The logical values of an input, in its reference type."""
    n = int(np.prod(shape)) if shape else 1
    isint = dt in INTS or dt in SMALL or dt == "bool"
    if gen == "randn":
        scale = float(args[0]) if args else 1.0
        shift = float(args[1]) if len(args) > 1 else 0.0
        v = rng.standard_normal(n) * scale + shift
        if isint:
            v = np.rint(v)
        if dt in CPLX:
            v = v + 1j * rng.standard_normal(n) * scale
    elif gen == "rand":
        lo = float(args[0]) if args else 0.0
        hi = float(args[1]) if len(args) > 1 else 1.0
        v = rng.uniform(lo, hi, n)
        if dt in CPLX:
            v = v + 1j * rng.uniform(lo, hi, n)
    elif gen == "randint":
        lo, hi = int(pyval(args[0])), int(pyval(args[1]))
        if dt in INTS or dt in SMALL:
            v = rng.integers(lo, hi, n, dtype=STORE[dt], endpoint=False)
        else:
            v = rng.integers(lo, hi, n).astype(np.float64)
    elif gen == "iota":
        start = pyval(args[0]) if args else 0
        step = pyval(args[1]) if len(args) > 1 else 1
        v = start + step * np.arange(n)
    elif gen in ("const", "values"):
        vals = [pyval(a) for a in args]
        if gen == "const":
            vals = vals * n
        if len(vals) != n:
            raise CaseError("values: %d values for %d elements" % (len(vals), n))
        if (dt in INTS or dt in SMALL) and all(isinstance(x, int) for x in vals):
            # exactly, in the target type: np.array() of large Python ints
            # would go through float64 and lose the low bits
            v = np.array(vals, dtype=STORE[dt])
        else:
            v = np.array(vals, dtype=np.complex128 if dt in CPLX else np.float64)
    elif gen == "sortedkeys":
        v = np.sort(rng.integers(0, int(args[0]), n))
    elif gen == "csr":
        maxlen = int(args[0])
        lens = rng.integers(0, maxlen + 1, max(n - 1, 0))
        lens[rng.random(max(n - 1, 0)) < 0.2] = 0      # empty rows
        v = np.concatenate([[0], np.cumsum(lens)]) if n > 0 else np.zeros(0)
    elif gen == "bool":
        p = float(args[0]) if args else 0.5
        v = rng.random(n) < p
    elif gen == "perm":
        v = rng.permutation(n)
    elif gen == "py":
        local = dict(ns)
        local.update(rng=rng, n=n, shape=tuple(shape))
        v = np.asarray(eval(" ".join(args), local))
        v = np.broadcast_to(v, tuple(shape)).reshape(-1) if v.size != n else v.reshape(-1)
    else:
        raise CaseError("unknown generator %r" % gen)
    v = np.asarray(v).reshape(tuple(shape))
    return to_ref(v, dt)


def to_ref(v, dt):
    v = np.asarray(v)
    if dt == "bool":
        return v != 0
    if dt in INTS:
        if v.dtype.kind == "f":
            return v.astype(np.int64).astype(REF[dt]) if dt != "u64" else v.astype(np.uint64)
        return v.astype(REF[dt])
    if dt in SMALL:
        # the stored value (wrapped into the narrow type), widened to i32
        return np.asarray(v).astype(np.int64).astype(STORE[dt]).astype(np.int32)
    if dt in CPLX:
        return np.asarray(v).astype(REF[dt])
    if dt == "f16":
        return v.astype(np.float16).astype(np.float32)
    if dt == "bf16":
        return rne_bf16(v.astype(np.float32))
    return v.astype(REF[dt])


def to_store(v, dt):
    if dt == "bf16":
        return bf16_bits(v)
    if dt == "bool":
        return np.asarray(v).astype(np.uint8)
    return np.asarray(v).astype(STORE[dt])


def layout(values, dt, opts, rng):
    """Place the logical values into a larger buffer with the requested
    strides.  Returns (buffer, strides in elements, offset in elements).
    Padding and gaps hold poison (NaN or a large integer), so a read outside
    the view shows up in the result."""
    shape = list(values.shape)
    nd = len(shape)
    perm = list(range(nd))
    if opts.get("view") == "T":
        perm = perm[::-1]
    steps = [1] * nd
    if "step" in opts:
        steps = [int(s) for s in opts["step"].split(",")]
        if len(steps) != nd:
            raise CaseError("step= needs %d values" % nd)
    bcast = set()
    if "bcast" in opts:
        bcast = {int(a) for a in opts["bcast"].split(",")}
        for a in bcast:
            steps[a] = 0
    pad = int(opts.get("pad", 3))
    ext = [1 if steps[d] == 0 else max((shape[d] - 1) * abs(steps[d]) + 1, 1) for d in range(nd)]
    bstride = [0] * nd
    acc = 1
    for d in reversed(perm):
        bstride[d] = acc
        acc *= ext[d]
    if "pitch" in opts:
        # rows `pitch` elements apart, the gap after each row poison
        pitch = int(opts["pitch"])
        if nd != 2 or perm != [0, 1] or steps != [1, 1] or pitch < shape[1]:
            raise CaseError("pitch= takes a 2-D array with no other layout option, at least a row apart")
        bstride = [pitch, 1]
        acc = max(shape[0] - 1, 0) * pitch + shape[1]
    strides = [bstride[d] * steps[d] for d in range(nd)]
    off = pad + sum((ext[d] - 1) * bstride[d] for d in range(nd) if steps[d] < 0)
    total = acc + 2 * pad
    store = STORE[dt]
    if dt in FLOATS:
        buf = np.full(total, np.nan, np.float32 if dt == "bf16" else store)
        buf = to_store(buf, dt)
    elif dt in CPLX:
        buf = np.full(total, complex(np.nan, np.nan), store)
    elif dt == "bool":
        buf = np.full(total, 1, np.uint8)
    else:
        buf = np.full(total, np.iinfo(store).max // 3 + (12345 if np.iinfo(store).bits > 16 else 7), store)
    sv = to_store(values, dt)
    isz = buf.dtype.itemsize
    if any(s == 0 for s in shape):
        return buf, strides, off
    view = np.ndarray(tuple(shape), buf.dtype, buffer=buf, offset=off * isz,
                      strides=tuple(s * isz for s in strides))
    if bcast:
        # every element along a broadcast axis aliases one location
        idx = tuple(slice(0, 1) if d in bcast else slice(None) for d in range(nd))
        view[idx] = sv[idx]
    else:
        view[...] = sv
    return buf, strides, off


def parse_array_spec(spec):
    """'f32[10,n] randn 1 nan=0.1' -> (dtype, dims text or None, gen, args, opts)."""
    m = re.match(r"^([a-z0-9]+)\s*(\[(.*?)\])?\s*(.*)$", spec)
    if not m or m.group(1) not in CODE:
        raise CaseError("bad input spec %r" % spec)
    dt = m.group(1)
    dims = m.group(3)
    rest = m.group(4).strip()
    # dims may contain brackets: find the matching ']' by hand
    if m.group(2) is not None:
        start = spec.index("[")
        depth = 0
        for j in range(start, len(spec)):
            if spec[j] == "[":
                depth += 1
            elif spec[j] == "]":
                depth -= 1
                if depth == 0:
                    break
        dims = spec[start + 1:j]
        rest = spec[j + 1:].strip()
    toks = rest.split()
    if not toks:
        raise CaseError("no generator in %r" % spec)
    gen = toks[0]
    if gen == "py":
        return dt, dims, gen, [rest[2:].strip()], {}
    args, opts = [], {}
    for t in toks[1:]:
        if "=" in t:
            k, v = t.split("=", 1)
            opts[k] = v
        else:
            args.append(t)
    return dt, dims, gen, args, opts


def make_inputs(rec, rng, ns):
    """Generate every input of a case; fills `ns` with reference values."""
    out = []
    for kind, name, spec, ln in rec["inputs"]:
        if kind == "weak":
            toks = spec.split(None, 1)
            if toks and toks[0] in ("i64", "f64") and len(toks) == 2:
                wt, val = toks[0], eval(toks[1], dict(ns))
            else:
                val = eval(spec, dict(ns))
                wt = "i64" if isinstance(val, (int, np.integer)) and not isinstance(val, bool) else "f64"
            val = int(val) if wt == "i64" else float(val)
            ns[name] = val
            out.append(dict(kind="weak", name=name, wt=wt, val=val))
            continue
        dt, dims, gen, args, opts = parse_array_spec(spec)
        shape = []
        if dims is not None and dims.strip():
            shape = [int(eval(d, dict(ns))) for d in split_top(dims)]
        if gen == "null" or dt == "bad" or any(s < 0 for s in shape) or len(shape) > 8:
            out.append(dict(kind="raw", name=name, dt=dt, shape=shape,
                            null=(gen == "null")))
            continue
        vals = gen_values(dt, shape, gen, args, rng, ns)
        if "bcast" in opts:
            for a in (int(x) for x in opts["bcast"].split(",")):
                sl = [slice(None)] * len(shape)
                sl[a] = slice(0, 1)
                vals = np.broadcast_to(vals[tuple(sl)], vals.shape).copy()
        if vals.dtype.kind == "f":
            flat = vals.reshape(-1)
            for key, bad in (("nan", np.nan), ("inf", np.inf), ("ninf", -np.inf)):
                if key in opts:
                    frac = float(opts[key])
                    k = max(1, int(round(frac * flat.size))) if flat.size else 0
                    pos = rng.choice(flat.size, size=min(k, flat.size), replace=False)
                    flat[pos] = bad
            for key, bad in (("nanat", np.nan), ("infat", np.inf), ("ninfat", -np.inf)):
                if key in opts:
                    for p in opts[key].split(","):
                        flat[int(p)] = bad
            vals = flat.reshape(vals.shape)
        buf, strides, off = layout(vals, dt, opts, rng)
        ns[name] = vals[()] if len(shape) == 0 else vals
        out.append(dict(kind="array", name=name, dt=dt, shape=shape, strides=strides,
                        off=off, buf=buf, vals=vals))
    return out


# ---------------------------------------------------------------------------
# Expected values.
def default_rtol(dt):
    return {"f32": 1e-5, "f64": 1e-12, "c64": 1e-5, "c128": 1e-12}.get(dt, 0.0)


def expected_of(rec, ns):
    dts = [d.strip() for d in rec["dtype"].split(",")]
    for d in dts:
        if d not in REF or d in ("f16", "bf16") or d in SMALL:
            raise CaseError("result dtype %r" % d)
    if rec["py"]:
        exec("\n".join(rec["py"]), ns)
    exp = eval(rec["expect"], ns)
    mag = eval(rec["mag"], ns) if "mag" in rec else None
    if len(dts) == 1:
        exp = [exp]
        mag = [mag]
    else:
        if not isinstance(exp, (tuple, list)) or len(exp) != len(dts):
            raise CaseError("expect must give %d results" % len(dts))
        mag = list(mag) if mag is not None else [None] * len(dts)
    def per_result(key, default):
        if key not in rec:
            return [default(d) for d in dts]
        vals = [float(v) for v in rec[key].split(",")]
        return vals * len(dts) if len(vals) == 1 else vals
    rtol = per_result("rtol", default_rtol)
    atol = per_result("atol", lambda d: 0.0)
    names = [n.strip() for n in rec["names"].split(",")] if "names" in rec else ["-"] * len(dts)
    results = []
    for k, dt in enumerate(dts):
        v = exp[k]
        if dt in CPLX:
            # the parts interleaved, each with the number's magnitude (or mag's)
            e = np.asarray(v, np.complex128)
            m = np.abs(e) if mag[k] is None else np.abs(np.broadcast_to(np.asarray(mag[k]), e.shape))
            parts = np.stack([e.real, e.imag], -1)
            results.append(dict(dt=dt, shape=list(e.shape), exp=parts,
                                mag=np.stack([m, m], -1).astype(np.float64), rtol=rtol[k], atol=atol[k],
                                name=names[k]))
        elif dt in ("f32", "f64"):
            e = np.asarray(v, np.float64)
            m = np.abs(e) if mag[k] is None else np.abs(np.broadcast_to(np.asarray(mag[k], np.float64), e.shape))
            results.append(dict(dt=dt, shape=list(e.shape), exp=e, mag=np.array(m, np.float64),
                                rtol=rtol[k], atol=atol[k], name=names[k]))
        else:
            e = to_int_exact(v, dt)
            results.append(dict(dt=dt, shape=list(e.shape), exp=e, mag=None, rtol=0.0,
                                atol=0.0, name=names[k]))
    return results


def to_int_exact(v, dt):
    a = np.asarray(v)
    if a.dtype == object:
        bits = 64 if dt in ("i64", "u64") else 32
        mask = (1 << bits) - 1
        flat = [int(x) & mask for x in a.reshape(-1)]
        a = np.array(flat, dtype=np.uint64).reshape(a.shape)
        if dt in SIGNED:
            a = a.astype(np.int64)
            if dt == "i32":
                a = a.astype(np.int32)
    if a.dtype.kind == "f":
        if not np.all(np.isfinite(a)) or not np.all(a == np.trunc(a)):
            raise CaseError("integer result expected, reference gives %r" % a)
        a = a.astype(np.int64) if dt != "u64" else a.astype(np.uint64)
    if dt == "bool":
        if a.dtype != np.bool_ and not np.all((a == 0) | (a == 1)):
            raise CaseError("bool result expected, reference gives %r" % a)
        return (a != 0).astype(np.int64)
    a = a.astype(REF[dt])
    return a.astype(np.uint64) if dt in UNSIGNED else a.astype(np.int64)


# ---------------------------------------------------------------------------
# Output.
class Writer:
    def __init__(self, prefix, seed):
        self.prefix = prefix
        self.man = open(prefix + ".manifest.tmp", "w", encoding="utf-8", newline="\n")
        self.bin = open(prefix + ".bin.tmp", "wb")
        self.pos = 0
        self.man.write("redjit-cases 1\nseed %d\nbin %s\n" % (seed, os.path.basename(prefix) + ".bin"))

    def blob(self, data):
        b = np.ascontiguousarray(data).tobytes()
        at = self.pos
        self.bin.write(b)
        self.pos += len(b)
        pad = (-self.pos) % 8
        self.bin.write(b"\0" * pad)
        self.pos += pad
        return at, len(b)

    def string(self, key, s):
        # length-prefixed in bytes: the text may hold newlines and '#'
        self.man.write(" %s %d %s\n" % (key, len(s.encode("utf-8")), s))

    def case(self, rec, inputs, results, error):
        w = self.man
        w.write("case %s\n" % rec["name"])
        w.write(" src %s\n" % rec["src"])
        self.string("expr", "\n".join(rec["expr"]))
        for inp in inputs:
            if inp["kind"] == "weak":
                v = inp["val"]
                w.write(" input %s %s %s\n" % (inp["name"], inp["wt"],
                        v.hex() if inp["wt"] == "f64" else str(v)))
            elif inp["kind"] == "raw":
                w.write(" input %s %s %s %d %s %d\n" % (
                    inp["name"], "null" if inp["null"] else "raw", inp["dt"],
                    len(inp["shape"]), " ".join(str(s) for s in inp["shape"]) or "-", CODE[inp["dt"]]))
            else:
                at, nb = self.blob(inp["buf"])
                nd = len(inp["shape"])
                w.write(" input %s array %s %d %s %s %d %d %d\n" % (
                    inp["name"], inp["dt"], nd,
                    " ".join(str(s) for s in inp["shape"]) or "-",
                    " ".join(str(s) for s in inp["strides"]) or "-",
                    inp["off"], at, nb))
        for r in results:
            e_at, _ = self.blob(r["exp"])
            m_at = self.blob(r["mag"])[0] if r["mag"] is not None else -1
            nd = len(r["shape"])
            w.write(" result %s %d %s %r %r %d %d %s\n" % (
                r["dt"], nd, " ".join(str(s) for s in r["shape"]) or "-",
                r["rtol"], r["atol"], e_at, m_at, r["name"]))
        if error:
            w.write(" error %s %d%s\n" % ("|".join(error["codes"]), len(error["at"]),
                                         "".join(" %d %d" % lc for lc in error["at"])))
            for s in error["msg"]:
                self.string("msg", s)
        w.write("end\n")

    def close(self, ncases):
        self.man.write("count %d\n" % ncases)
        self.man.close()
        self.bin.close()
        os.replace(self.prefix + ".manifest.tmp", self.prefix + ".manifest")
        os.replace(self.prefix + ".bin.tmp", self.prefix + ".bin")


def process(rec, seed, writer):
    rng = np.random.default_rng([seed, zlib.crc32(rec["name"].encode())])
    ns = dict(HELPERS)
    inputs = make_inputs(rec, rng, ns)
    arrays = [i for i in inputs if i["kind"] == "array" and i["vals"].size > 0]
    if arrays and "allzero" not in rec and "status" not in rec:
        if all(not np.any(i["vals"] != 0) for i in arrays):
            raise CaseError("every input is all zeros")
    error = None
    results = []
    if "status" in rec:
        codes = [c.strip() for c in rec["status"].split("|")]
        for c in codes:
            if c not in STATUS:
                raise CaseError("unknown status %r" % c)
        at = []
        if "at" in rec:
            # alternatives where docs/language.md leaves the position open
            for alt in rec["at"].split("|"):
                line, col = (int(x) for x in alt.strip().split(":"))
                at.append((line, col))
        if len(at) > 4:
            raise CaseError("at most 4 positions")
        error = dict(codes=codes, at=at, msg=rec["msg"])
    else:
        if "dtype" not in rec or "expect" not in rec:
            raise CaseError("a case needs dtype and expect (or status)")
        results = expected_of(rec, ns)
    writer.case(rec, inputs, results, error)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True, help="output prefix (writes PREFIX.manifest, PREFIX.bin)")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--families", action="store_true", help="add the generated families")
    ap.add_argument("files", nargs="*")
    a = ap.parse_args()
    seed = a.seed
    if seed is None and os.environ.get("REDJIT_TEST_SEED"):
        seed = int(os.environ["REDJIT_TEST_SEED"])
    if seed is None:
        seed = int.from_bytes(os.urandom(4), "little")
    print("gen_cases: seed %d (reproduce with REDJIT_TEST_SEED=%d)" % (seed, seed))
    if os.path.dirname(a.out):
        os.makedirs(os.path.dirname(a.out), exist_ok=True)
    recs = []
    for f in a.files:
        recs += parse_file(f)
    if a.families:
        text = families()
        with open(a.out + ".families.cases", "w") as f:
            f.write(text)
        recs += parse_file(a.out + ".families.cases", text)
    seen = {}
    for r in recs:
        if r["name"] in seen:
            sys.exit("gen_cases: %s: duplicate case name %s (first at %s)" % (r["src"], r["name"], seen[r["name"]]))
        seen[r["name"]] = r["src"]
    w = Writer(a.out, seed)
    bad = 0
    for r in recs:
        try:
            process(r, seed, w)
        except Exception as ex:   # a broken case must not hide the others
            bad += 1
            print("gen_cases: %s: %s: %s: %s" % (r["src"], r["name"], type(ex).__name__, ex), file=sys.stderr)
    w.close(len(recs) - bad)
    print("gen_cases: %d cases written to %s.manifest" % (len(recs) - bad, a.out))
    if bad:
        sys.exit("gen_cases: %d broken case(s)" % bad)


# ---------------------------------------------------------------------------
# Families: operator x dtype matrices and the like, written in the case
# format so they read (and are written out) like the hand-made files.
def promote(a, b):
    """The language's common type of two operand types (docs/language.md)."""
    if a == "bool" and b == "bool":
        return "i32"
    if a == "bool":
        return computed(b)
    if b == "bool":
        return computed(a)
    ca = "f32" if a in ("f16", "bf16") else a
    cb = "f32" if b in ("f16", "bf16") else b
    if ca in FLOATS or cb in FLOATS:
        if ca == "f64" or cb == "f64":
            return "f64"
        return "f32"
    if ca == cb:
        return ca
    wa, wb = int(ca[1:]), int(cb[1:])
    if ca in UNSIGNED and cb in UNSIGNED:
        return ca if wa > wb else cb
    if "u64" in (ca, cb):
        return "i64"          # u64 with a signed type
    if wa != wb:
        return ca if wa > wb else cb
    return "i64"              # i32 with u32


def computed(t):
    return "f32" if t in ("f16", "bf16") else t


def int_data(dt, lo=-1000, hi=1000):
    if dt == "bool":
        return "bool 0.5"
    if dt in UNSIGNED:
        return "randint 0 %d" % (hi - lo)
    if dt in SIGNED:
        return "randint %d %d" % (lo, hi)
    return "randn 10"


def rec(lines):
    return "\n".join(lines) + "\n\n"


def ref_cast(var, t):
    """NumPy text converting reference var to the computed type t."""
    if t in ("f32", "f64"):
        return "f64(%s)" % var
    return "%s.astype(np.%s)" % (var, {"i32": "int32", "i64": "int64", "u32": "uint32",
                                       "u64": "uint64", "bool": "bool_"}[t])


def fam_binary():
    out = []
    n = 257
    arith = [("+", "add", "%s + %s"), ("-", "sub", "%s - %s"), ("*", "mul", "%s * %s"),
             ("/", "div", None), ("%", "rem", None)]
    # same-type arithmetic for every type
    for op, tag, _ in arith:
        for dt in DTYPES:
            out.append(binary_case(op, tag, dt, dt, n))
    # mixed types for + and * (promotion matrix)
    for op, tag in (("+", "add"), ("*", "mul")):
        for a in DTYPES:
            for b in DTYPES:
                if a != b and (op == "+" or DTYPES.index(a) < DTYPES.index(b)):
                    out.append(binary_case(op, tag, a, b, n))
    # a few mixed divisions and remainders
    for a, b in (("i32", "u32"), ("i64", "f32"), ("u64", "i32"), ("f16", "f64"), ("u32", "i64"),
                 ("bool", "i32"), ("bf16", "f32"), ("i32", "f64")):
        out.append(binary_case("/", "div", a, b, n))
        out.append(binary_case("%", "rem", a, b, n))
    return out


def operand_data(dt, role, op):
    """Input spec for an operand of op; divisors of integer ops include 0."""
    if dt == "bool":
        return "bool 0.6"
    if dt in FLOATS:
        if role == "y" and op in ("/", "%"):
            return "randn 3 nan=0.02" if dt != "bf16" else "rand 0.5 4"
        return "randn 10 nan=0.02"
    lo, hi = (-50, 50) if dt in SIGNED else (0, 100)
    if op == "*":
        lo, hi = (-100000, 100000) if dt in SIGNED else (0, 200000)   # i32 products wrap
    if role == "y" and op in ("/", "%"):
        lo, hi = (-7, 8) if dt in SIGNED else (0, 9)
    return "randint %d %d" % (lo, hi)


def binary_case(op, tag, a, b, n):
    t = promote(a, b)
    name = "bin_%s_%s_%s" % (tag, a, b)
    X, Y = ref_cast("x", t), ref_cast("y", t)
    if t in ("f32", "f64"):
        e = {"+": "%s + %s", "-": "%s - %s", "*": "%s * %s", "/": "%s / %s",
             "%": "np.fmod(%s, %s)"}[op] % (X, Y)
        if t == "f32":
            # the f32 computation rounds once per operation: compare to the
            # float64 reference rounded to f32 only through rtol
            pass
    else:
        e = {"+": "%s + %s", "-": "%s - %s", "*": "%s * %s", "/": "cdiv(%s, %s)",
             "%": "crem(%s, %s)"}[op] % (X, Y)
    return rec(["name: " + name,
                "expr: x[i] %s y[i]" % op,
                "x: %s[%d] %s" % (a, n, operand_data(a, "x", op)),
                "y: %s[%d] %s" % (b, n, operand_data(b, "y", op)),
                "expect: " + e,
                "dtype: " + t])


def fam_compare():
    out = []
    ops = [("<", "lt", "<"), ("<=", "le", "<="), (">", "gt", ">"), (">=", "ge", ">="),
           ("==", "eq", "=="), ("!=", "ne", "!=")]
    pairs = [(d, d) for d in DTYPES] + [("i32", "f32"), ("u32", "i32"), ("u64", "i64"),
                                        ("f16", "f64"), ("bf16", "f16"), ("bool", "i64")]
    for op, tag, nop in ops:
        for a, b in pairs:
            if (a, b) != (a, a) and op not in ("<", "=="):
                continue
            t = promote(a, b)
            da = "randint 0 6" if a not in FLOATS else "randint -3 4 nanat=3"
            db = "randint 0 6" if b not in FLOATS else "randint -3 4 nanat=5"
            if a == "bool":
                da = "bool 0.5"
            if b == "bool":
                db = "bool 0.5"
            out.append(rec(["name: cmp_%s_%s_%s" % (tag, a, b),
                            "expr: x[i] %s y[i]" % op,
                            "x: %s[300] %s" % (a, da), "y: %s[300] %s" % (b, db),
                            "expect: %s %s %s" % (ref_cast("x", t), nop, ref_cast("y", t)),
                            "dtype: bool"]))
    return out


def fam_logical():
    """&& || and ?: for every type (any non-zero value is true)."""
    out = []
    for dt in DTYPES:
        data = "bool 0.5" if dt == "bool" else ("randint 0 3" if dt in UNSIGNED else "randint -1 2")
        nan = " nanat=4" if dt in FLOATS else ""
        for op, tag, nf in (("&&", "land", "&"), ("||", "lor", "|")):
            out.append(rec(["name: logic_%s_%s" % (tag, dt), "expr: x[i] %s y[i]" % op,
                            "x: %s[100] %s%s" % (dt, data, nan), "y: f64[100] randint -1 2",
                            "expect: (x != 0) %s (y != 0)" % nf, "dtype: bool"]))
        if dt == "bool":
            continue
        t = computed(dt)
        vals = "randn 10" if dt in FLOATS else int_data(dt)
        out.append(rec(["name: ternary_%s" % dt, "expr: c[i] ? x[i] : y[i]",
                        "c: %s[100] %s%s" % (dt, data, nan), "x: %s[100] %s" % (dt, vals),
                        "y: %s[100] %s" % (dt, vals),
                        "expect: np.where(c != 0, %s, %s)" % (ref_cast("x", t), ref_cast("y", t)),
                        "dtype: " + t, "rtol: 0"]))
    return out


def fam_bitops():
    out = []
    ityp = ["bool"] + INTS
    for op, tag, nf in (("&", "and", "np.bitwise_and"), ("|", "or", "np.bitwise_or"),
                        ("^", "xor", "np.bitwise_xor")):
        for a in ityp:
            pairs = [(a, a)] + ([(a, b) for b in ityp if b != a] if op == "&" else [])
            for x, y in pairs:
                t = promote(x, y)
                if x == "bool" and y == "bool":
                    t = "bool"      # bit operations on bools stay bool (like && ||)
                dx = "bool 0.5" if x == "bool" else ("randint -100000 100000" if x in SIGNED else "randint 0 200000")
                dy = "bool 0.5" if y == "bool" else ("randint -100000 100000" if y in SIGNED else "randint 0 200000")
                e = "%s(%s, %s)" % (nf, ref_cast("x", t), ref_cast("y", t))
                out.append(rec(["name: bit_%s_%s_%s" % (tag, x, y), "expr: x[i] %s y[i]" % op,
                                "x: %s[200] %s" % (x, dx), "y: %s[200] %s" % (y, dy),
                                "expect: " + e, "dtype: " + t]))
    for op, tag, fn in (("<<", "shl", "shl"), (">>", "shr", "shr")):
        for a in INTS:
            for b in ("i32", "u32", "i64"):
                if b != "i32" and a not in ("i32", "u64"):
                    continue
                dx = "randint -100000 100000" if a in SIGNED else "randint 0 4000000000"
                out.append(rec(["name: bit_%s_%s_%s" % (tag, a, b), "expr: x[i] %s s[i]" % op,
                                "x: %s[200] %s" % (a, dx), "s: %s[200] randint 0 100" % b,
                                "expect: %s(x, s)" % fn, "dtype: " + a]))
        out.append(rec(["name: bit_%s_lit_i32" % tag, "expr: x[i] %s 3" % op,
                        "x: i32[100] randint -100000 100000",
                        "expect: %s(x, np.int32(3))" % fn, "dtype: i32"]))
    return out


def fam_unary():
    out = []
    for dt in DTYPES:
        t = "i32" if dt == "bool" else computed(dt)
        data = "bool 0.5" if dt == "bool" else ("randn 10 nanat=1" if dt in FLOATS else int_data(dt))
        neg = "-%s" % ref_cast("x", t)
        out.append(rec(["name: un_neg_%s" % dt, "expr: -x[i]", "x: %s[100] %s" % (dt, data),
                        "expect: " + neg, "dtype: " + t]))
        out.append(rec(["name: un_not_%s" % dt, "expr: !x[i]",
                        "x: %s[100] %s" % (dt, data if dt != "bool" else "bool 0.5"),
                        "expect: x == 0", "dtype: bool"]))
        if dt != "bool":
            out.append(rec(["name: un_plus_%s" % dt, "expr: +x[i]", "x: %s[100] %s" % (dt, data),
                            "expect: " + ref_cast("x", t), "dtype: " + t]))
        if dt == "bool":
            out.append(rec(["name: un_bnot_bool", "expr: ~x[i]", "x: bool[100] bool 0.5",
                            "expect: ~x", "dtype: bool"]))
        elif dt in INTS:
            out.append(rec(["name: un_bnot_%s" % dt, "expr: ~x[i]", "x: %s[100] %s" % (dt, data),
                            "expect: np.invert(x)", "dtype: " + dt]))
    # unary minus of unsigned wraps; of the most negative i32 wraps
    out.append(rec(["name: un_neg_intmin", "expr: -x[i]",
                    "x: i32[4] values -2147483648 -1 0 2147483647",
                    "expect: -x", "dtype: i32"]))
    return out


FUNCS1 = {
    "sqrt": ("np.sqrt", "rand 0.01 100"),
    "exp": ("np.exp", "randn 3"),
    "log": ("np.log", "rand 0.01 100"),
    "log2": ("np.log2", "rand 0.01 100"),
    "log10": ("np.log10", "rand 0.01 100"),
    "sin": ("np.sin", "randn 3"),
    "cos": ("np.cos", "randn 3"),
    "tan": ("np.tan", "rand -1.4 1.4"),
    "tanh": ("np.tanh", "randn 2"),
}


def fam_funcs():
    out = []
    for fn, (nf, data) in FUNCS1.items():
        for dt in FLOATS + INTS:
            t = "f64" if dt in INTS else computed(dt)
            d = data
            if dt in INTS:
                d = {"sqrt": "randint 0 1000", "log": "randint 1 1000", "log2": "randint 1 1000",
                     "log10": "randint 1 1000", "exp": "randint 0 20", "tan": "randint 0 2"}.get(fn, "randint 0 10")
            if dt in ("f16", "bf16") and fn == "exp":
                d = "randn 2"
            out.append(rec(["name: fn_%s_%s" % (fn, dt), "expr: %s(x[i])" % fn,
                            "x: %s[200] %s" % (dt, d), "expect: %s(f64(x))" % nf, "dtype: " + t]))
        out.append(rec(["name: fn_%s_nan" % fn, "expr: %s(x[i])" % fn,
                        "x: f64[50] %s nanat=0,7" % data, "expect: %s(x)" % nf, "dtype: f64"]))
    for dt in FLOATS + INTS + ["bool"]:
        if dt == "bool":
            continue
        t = computed(dt)
        data = "randn 100 nanat=2" if dt in FLOATS else int_data(dt)
        if dt == "i32":
            data = "values " + " ".join(["-2147483648", "-5", "0", "7", "2147483647"] + ["-3"] * 95)
        out.append(rec(["name: fn_abs_%s" % dt, "expr: abs(x[i])", "x: %s[100] %s" % (dt, data),
                        "expect: np.abs(x)", "dtype: " + t, "rtol: 0"]))
    for fn, ref in (("floor", "np.floor"), ("ceil", "np.ceil"), ("round", "round_away")):
        for dt in FLOATS + INTS:
            t = computed(dt)
            if dt in FLOATS:
                data = "py rng.integers(-40, 40, n) / 4 + (rng.random(n) < 0.5) * 0.001" if dt != "bf16" \
                    else "py rng.integers(-40, 40, n) / 4"
                exp = "%s(x)" % ref
            else:
                data = int_data(dt)
                exp = "x"
            out.append(rec(["name: fn_%s_%s" % (fn, dt), "expr: %s(x[i])" % fn,
                            "x: %s[200] %s" % (dt, data), "expect: " + exp, "dtype: " + t,
                            "rtol: 0"]))
    # two-argument functions
    for a, b in (("f32", "f32"), ("f64", "f64"), ("f16", "f32"), ("i32", "i32"), ("i64", "f32"),
                 ("bf16", "bf16"), ("u32", "f64")):
        t = promote(a, b)
        if t not in ("f32", "f64"):
            t = "f64"
        da = "rand 0.1 4" if a in FLOATS else "randint 1 10"
        db = "randn 2" if b in FLOATS else "randint 0 5"
        out.append(rec(["name: fn_pow_%s_%s" % (a, b), "expr: pow(x[i], y[i])",
                        "x: %s[200] %s" % (a, da), "y: %s[200] %s" % (b, db),
                        "expect: np.power(f64(x), f64(y))", "dtype: " + t]))
        out.append(rec(["name: fn_hypot_%s_%s" % (a, b), "expr: hypot(x[i], y[i])",
                        "x: %s[200] %s" % (a, da), "y: %s[200] %s" % (b, db),
                        "expect: np.hypot(f64(x), f64(y))", "dtype: " + t]))
    for dt in ("f32", "f64", "f16", "bf16"):
        t = computed(dt)
        data = "randn 10"
        exp = "f64(a) * f64(b) + f64(c)"
        out.append(rec(["name: fn_fma_%s" % dt, "expr: fma(a[i], b[i], c[i])",
                        "a: %s[200] %s" % (dt, data), "b: %s[200] %s" % (dt, data),
                        "c: %s[200] %s" % (dt, data), "expect: " + exp,
                        "mag: pmag(a, b) + np.abs(f64(c))", "dtype: " + t]))
    for fn, nf in (("min", "np.minimum"), ("max", "np.maximum")):
        for a, b in [(d, d) for d in FLOATS + INTS] + [("i32", "u32"), ("f32", "f64"), ("i64", "f32")]:
            t = promote(a, b)
            da = "randn 10 nan=0.05" if a in FLOATS else int_data(a)
            db = "randn 10 nan=0.05" if b in FLOATS else int_data(b)
            out.append(rec(["name: fn_%s2_%s_%s" % (fn, a, b), "expr: %s(x[i], y[i])" % fn,
                            "x: %s[200] %s" % (a, da), "y: %s[200] %s" % (b, db),
                            "expect: %s(%s, %s)" % (nf, ref_cast("x", t), ref_cast("y", t)),
                            "dtype: " + t, "rtol: 0"]))
    for fn, nf, iv in (("isnan", "np.isnan", "False"), ("isfinite", "np.isfinite", "True")):
        for dt in FLOATS + INTS:
            data = "randn 1 nan=0.1 inf=0.05 ninf=0.05" if dt in FLOATS else int_data(dt)
            exp = "%s(x)" % nf if dt in FLOATS else "np.full(x.shape, %s)" % iv
            out.append(rec(["name: fn_%s_%s" % (fn, dt), "expr: %s(x[i])" % fn,
                            "x: %s[200] %s" % (dt, data), "expect: " + exp, "dtype: bool"]))
    return out


def fam_casts():
    out = []
    for src in DTYPES:
        for dst in DTYPES:
            if src in FLOATS:
                data = "randn 100"
                if dst in INTS:
                    data = ("py np.concatenate([rng.standard_normal(n - 6) * 100, "
                            "[np.nan, np.inf, -np.inf, 1e12, -1e12, -0.75]])")
                    if src in ("f16",):
                        data = ("py np.concatenate([rng.standard_normal(n - 5) * 100, "
                                "[np.nan, np.inf, -np.inf, 60000, -60000]])")
                if dst == "bool":
                    data = "randint -2 3"
                if src == "f64" and dst in ("f16", "bf16"):
                    # f32-representable values, so rounding f64 -> f32 first is harmless
                    data = "py (rng.standard_normal(n) * 100).astype(np.float32)"
            elif src == "bool":
                data = "bool 0.5"
            else:
                data = "randint -200 200" if src in SIGNED else "randint 0 400"
            if dst == "bool":
                exp = "x != 0"
            elif dst in INTS and src in FLOATS:
                exp = "sat(x, np.%s)" % {"i32": "int32", "i64": "int64", "u32": "uint32", "u64": "uint64"}[dst]
            elif dst in INTS:
                exp = "x.astype(np.int64).astype(np.%s)" % {"i32": "int32", "i64": "int64", "u32": "uint32",
                                                            "u64": "uint64"}[dst] if src != "u64" else \
                    "x.astype(np.%s)" % {"i32": "int32", "i64": "int64", "u32": "uint32", "u64": "uint64"}[dst]
            elif dst == "f16":
                exp = "f64(x).astype(np.float16)" if src != "f64" else "x.astype(np.float32).astype(np.float16)"
            elif dst == "bf16":
                exp = "rne_bf16(f64(x).astype(np.float32))"
            elif dst == "f32":
                exp = "f64(x).astype(np.float32)"
            else:
                exp = "f64(x)"
            t = computed(dst)
            out.append(rec(["name: cast_%s_to_%s" % (src, dst), "expr: %s(x[i])" % dst,
                            "x: %s[100] %s" % (src, data), "expect: " + exp, "dtype: " + t,
                            "rtol: 0"]))
    return out


def fam_literals():
    """Literal and weak-scalar adaptation: the result type is the point."""
    out = []
    for dt in DTYPES:
        data = "bool 0.5" if dt == "bool" else ("randn 10" if dt in FLOATS else int_data(dt, -100, 100))
        t_dec = computed(dt) if dt in FLOATS else "f64"
        out.append(rec(["name: lit_dec_%s" % dt, "expr: x[i] * 2.5", "x: %s[64] %s" % (dt, data),
                        "expect: f64(x) * 2.5", "dtype: " + t_dec]))
        out.append(rec(["name: weak_f64_%s" % dt, "expr: x[i] * t", "x: %s[64] %s" % (dt, data),
                        "t = 0.5", "expect: f64(x) * 0.5", "dtype: " + t_dec]))
        out.append(rec(["name: sum_lit_dec_%s" % dt, "expr: sum(x * 2.5)", "x: %s[64] %s" % (dt, data),
                        "expect: np.sum(f64(x) * 2.5)", "mag: np.sum(np.abs(f64(x) * 2.5))",
                        "dtype: " + t_dec]))
        # a typed 0-d array does not adapt: f32 x times f64 s is f64
        out.append(rec(["name: scalar0d_f64_%s" % dt, "expr: x[i] * s", "x: %s[64] %s" % (dt, data),
                        "s: f64 const 0.75", "expect: f64(x) * 0.75", "dtype: " + promote(dt, "f64")]))
        if dt == "bool":
            continue
        t = computed(dt)
        if dt in INTS:
            e_int = "x + %s(3)" % {"i32": "i32", "i64": "i64", "u32": "u32", "u64": "u64"}[dt]
        else:
            e_int = "f64(x) + 3"
        out.append(rec(["name: lit_int_%s" % dt, "expr: x[i] + 3", "x: %s[64] %s" % (dt, data),
                        "expect: " + e_int, "dtype: " + t]))
        out.append(rec(["name: weak_i64_%s" % dt, "expr: x[i] + t", "x: %s[64] %s" % (dt, data),
                        "t = 3", "expect: " + e_int, "dtype: " + t]))
        out.append(rec(["name: scalar0d_i32_%s" % dt, "expr: x[i] + s", "x: %s[64] %s" % (dt, data),
                        "s: i32 const 3", "expect: %s + %s" % (ref_cast("x", promote(dt, "i32")), ref_cast("s", promote(dt, "i32"))),
                        "dtype: " + promote(dt, "i32")]))
    # u32 n + 1 stays u32 and wraps there
    out.append(rec(["name: lit_int_u32_wrap", "expr: x[i] + 1", "x: u32[3] values 4294967295 0 7",
                    "expect: x + u32(1)", "dtype: u32"]))
    out.append(rec(["name: lit_index_dec", "expr: x[i] + i * 2.5", "x: f32[10] randn",
                    "expect: f64(x) + np.arange(10) * 2.5", "dtype: f64"]))
    out.append(rec(["name: lit_hex", "expr: x[i] & 0x7f", "x: i32[50] randint 0 100000",
                    "expect: x & 0x7f", "dtype: i32"]))
    return out


RED_TYPES_FOR = {
    "sum": DTYPES, "prod": DTYPES, "min": FLOATS + INTS, "max": FLOATS + INTS,
    "mean": FLOATS + INTS, "count": DTYPES, "any": DTYPES, "all": DTYPES,
    "argmin": FLOATS + INTS, "argmax": FLOATS + INTS,
}


def red_result_type(op, dt):
    if op in ("sum", "prod", "+", "*"):
        if dt in ("bool",) + tuple(SIGNED):
            return "i64"
        if dt in UNSIGNED:
            return "u64"
        return computed(dt)
    if op in ("min", "max"):
        return computed(dt)
    if op in ("&", "|", "^"):
        return dt
    if op in ("any", "all", "&&", "||"):
        return "bool"
    if op in ("count", "argmin", "argmax"):
        return "i64"
    if op == "mean":
        return "f64" if dt in INTS or dt == "bool" else computed(dt)
    raise ValueError(op)


def red_reference(op, dt):
    """(expect, mag or None, rtol override or None) for a whole-array reduction of x."""
    acc = {"i64": "np.int64", "u64": "np.uint64"}.get(red_result_type(op, dt))
    if op in ("sum", "+"):
        if acc:
            return "np.sum(x.astype(%s))" % acc, None, None
        return "np.sum(f64(x))", "np.sum(np.abs(f64(x)))", None
    if op in ("prod", "*"):
        if acc:
            return "np.prod(x.astype(%s))" % acc, None, None
        return "np.prod(f64(x))", None, None
    if op in ("min", "max"):
        return "np.%s(x)" % op, None, "0"
    if op == "mean":
        return "np.mean(f64(x))", "np.mean(np.abs(f64(x)))", None
    if op == "count":
        return "np.count_nonzero(x)", None, None
    if op in ("any", "||"):
        return "np.any(x != 0)", None, None
    if op in ("all", "&&"):
        return "np.all(x != 0)", None, None
    if op in ("argmin", "argmax"):
        return "np.%s(x)" % op, None, None
    if op in ("&", "|", "^"):
        f = {"&": "np.bitwise_and", "|": "np.bitwise_or", "^": "np.bitwise_xor"}[op]
        return "%s.reduce(x.reshape(-1))" % f, None, None
    raise ValueError(op)


def red_data(op, dt, n):
    if dt == "bool":
        return "bool %s" % ("0.995" if op in ("&", "all", "&&", "prod", "*") else "0.3")
    if op in ("prod", "*"):
        if dt in FLOATS:
            return "rand 0.99 1.01"
        return "randint 1 4"     # products wrap modulo 2^64
    if op in ("&",):
        return "randint 3840 4096"
    if op in ("count", "any", "all", "&&", "||"):
        return "randint -2 3" if dt not in UNSIGNED else "randint 0 3"
    if op in ("argmin", "argmax", "min", "max") and dt in INTS:
        return "randint -30 30" if dt in SIGNED else "randint 0 60"      # ties: first index wins
    if dt in FLOATS:
        return "randn 10"
    return "randint -1000 1000" if dt in SIGNED else "randint 0 2000"


def fam_reductions():
    out = []
    n = 1000
    forms = [("sum", "sum(x)"), ("prod", "prod(x)"), ("min", "min(x)"), ("max", "max(x)"),
             ("mean", "mean(x)"), ("count", "count(x)"), ("any", "any(x)"), ("all", "all(x)"),
             ("argmin", "argmin(x)"), ("argmax", "argmax(x)"),
             ("+", "reduce(+, x)"), ("*", "reduce(*, x)"), ("&&", "reduce(&&, x)"),
             ("||", "reduce(||, x)"), ("&", "reduce(&, x)"), ("|", "reduce(|, x)"),
             ("^", "reduce(^, x)")]
    tagof = {"+": "radd", "*": "rmul", "&&": "rland", "||": "rlor", "&": "rband", "|": "rbor", "^": "rbxor"}
    for op, form in forms:
        types = RED_TYPES_FOR.get(op, DTYPES if op in ("+", "*", "&&", "||") else ["bool"] + INTS)
        for dt in types:
            e, mag, rtol = red_reference(op, dt)
            r = ["name: red_%s_%s" % (tagof.get(op, op), dt), "expr: " + form,
                 "x: %s[%d] %s" % (dt, n, red_data(op, dt, n)), "expect: " + e,
                 "dtype: " + red_result_type(op, dt)]
            if mag:
                r.append("mag: " + mag)
            if rtol:
                r.append("rtol: " + rtol)
            out.append(rec(r))
    # reduce(min, ...), reduce(max, ...), reduce(argmax, ...) name the operator
    for op in ("min", "max", "argmin", "argmax"):
        out.append(rec(["name: red_reduce_%s_f32" % op, "expr: reduce(%s, x[i]) over i" % op,
                        "x: f32[500] randn", "expect: np.%s(x)" % op,
                        "dtype: " + red_result_type(op, "f32"), "rtol: 0"]))
    # empty reductions: the identity of every operator, in the documented type
    for dt in DTYPES:
        c = computed(dt)
        lines = []
        if dt != "bool":
            lines += [("sum", "0", red_result_type("sum", dt)), ("prod", "1", red_result_type("prod", dt))]
            if dt in FLOATS:
                lines += [("min", "np.inf", c), ("max", "-np.inf", c), ("mean", "np.nan", c)]
            else:
                info = "np.iinfo(np.%s)" % {"i32": "int32", "i64": "int64", "u32": "uint32", "u64": "uint64"}[dt]
                lines += [("min", info + ".max", dt), ("max", info + ".min", dt), ("mean", "np.nan", "f64")]
        lines += [("count", "0", "i64"), ("any", "False", "bool"), ("all", "True", "bool")]
        if dt in INTS or dt == "bool":
            allbits = {"i32": "-1", "i64": "-1", "u32": "0xffffffff", "u64": "0xffffffffffffffff", "bool": "True"}[dt]
            lines += [("reduce(&, x)", allbits, dt), ("reduce(|, x)", "0", dt), ("reduce(^, x)", "0", dt)]
        for form, e, t in lines:
            ex = form if "(" in form else "%s(x)" % form
            tag = {"reduce(&, x)": "band", "reduce(|, x)": "bor", "reduce(^, x)": "bxor"}.get(form, form)
            out.append(rec(["name: empty_%s_%s" % (tag, dt), "expr: " + ex, "x: %s[0] randn" % dt,
                            "expect: " + e, "dtype: " + t]))
    return out


def fam_axes():
    """Every choice of reduced axes of a 3-D array, exact (i64) and f32."""
    out = []
    idx = ["i", "j", "k"]
    shape = (4, 5, 6)
    for mask in range(1, 8):
        red = [idx[d] for d in range(3) if mask >> d & 1]
        axes = tuple(d for d in range(3) if mask >> d & 1)
        over = ", ".join(red)
        for dt, data in (("i64", "randint -1000 1000"), ("f32", "randn")):
            e = "np.sum(%s, axis=%r)" % ("A" if dt == "i64" else "f64(A)", axes)
            r = ["name: axes_sum_%s_%s" % ("".join(red), dt),
                 "expr: sum(A[i,j,k]) over " + over,
                 "A: %s[%d,%d,%d] %s" % ((dt,) + shape + (data,)), "expect: " + e,
                 "dtype: " + ("i64" if dt == "i64" else "f32")]
            if dt == "f32":
                r.append("mag: np.sum(np.abs(f64(A)), axis=%r)" % (axes,))
            out.append(rec(r))
        out.append(rec(["name: axes_max_%s" % "".join(red), "expr: max(A[i,j,k]) over " + over,
                        "A: i32[%d,%d,%d] randint -100000 100000" % shape,
                        "expect: np.max(A, axis=%r)" % (axes,), "dtype: i32"]))
        # argmax over several indices: the row-major position within their box
        keep = [d for d in range(3) if d not in axes]
        e = "np.argmax(np.transpose(A, %r).reshape(%s), axis=-1)" % (
            tuple(keep + list(axes)),
            ", ".join([str(shape[d]) for d in keep] + ["-1"]) if keep else "-1")
        if not keep:
            e = "np.argmax(A)"
        out.append(rec(["name: axes_argmax_%s" % "".join(red), "expr: argmax(A[i,j,k]) over " + over,
                        "A: f64[%d,%d,%d] randn" % shape, "expect: " + e, "dtype: i64"]))
    # free indices come out in order of first appearance
    out.append(rec(["name: order_outer", "expr: u[j] * v[i]", "u: i64[5] randint -100 100",
                    "v: i64[7] randint -100 100", "expect: np.outer(u, v)", "dtype: i64"]))
    out.append(rec(["name: order_scale_rows", "expr: B[j] * A[i,j]", "A: i64[4,6] randint -100 100",
                    "B: i64[6] randint -100 100", "expect: (A * B).T", "dtype: i64"]))
    out.append(rec(["name: order_matmul_ji", "expr: sum(B[k,j] * A[i,k]) over k",
                    "A: i64[3,4] randint -100 100", "B: i64[4,5] randint -100 100",
                    "expect: (A @ B).T", "dtype: i64"]))
    out.append(rec(["name: order_3d_kij", "expr: sum(A[i,j,k] * w[k,i]) over j",
                    "A: i64[2,3,4] randint -100 100", "w: i64[4,2] randint -100 100",
                    "expect: np.einsum('ijk,ki->ik', A, w)", "dtype: i64"]))
    return out


def fam_sizes():
    out = []
    for n in (0, 1, 2, 31, 1000, 100003):
        out.append(rec(["name: size_sum_f32_%d" % n, "expr: sum(x)", "x: f32[%d] randn" % n,
                        "expect: np.sum(f64(x))", "mag: np.sum(np.abs(f64(x)))", "dtype: f32"]))
        out.append(rec(["name: size_sum_i32_%d" % n, "expr: sum(x)", "x: i32[%d] randint -2000000000 2000000000" % n,
                        "expect: np.sum(x.astype(np.int64))", "dtype: i64"]))
        out.append(rec(["name: size_dot_f64_%d" % n, "expr: reduce(+, a[i]*b[i]) over i",
                        "a: f64[%d] randn" % n, "b: f64[%d] randn" % n,
                        "expect: np.dot(a, b)", "mag: np.sum(np.abs(a*b))", "dtype: f64"]))
        out.append(rec(["name: size_max_f64_%d" % n, "expr: max(x)", "x: f64[%d] randn" % n,
                        "expect: np.max(x) if x.size else -np.inf", "dtype: f64", "rtol: 0"]))
        out.append(rec(["name: size_count_%d" % n, "expr: count(x > 0.5)", "x: f32[%d] rand" % n,
                        "expect: np.count_nonzero(x > 0.5)", "dtype: i64"]))
        if n:
            out.append(rec(["name: size_argmax_f32_%d" % n, "expr: argmax(x)", "x: f32[%d] randn" % n,
                            "expect: np.argmax(x)", "dtype: i64"]))
            out.append(rec(["name: size_argmin_i32_%d" % n, "expr: argmin(x)", "x: i32[%d] randint -1000 1000" % n,
                            "expect: np.argmin(x)", "dtype: i64"]))
    big = 1 << 20
    out.append(rec(["name: big_sum_f32", "expr: sum(x)", "x: f32[%d] randn" % big,
                    "expect: np.sum(f64(x))", "mag: np.sum(np.abs(f64(x)))", "dtype: f32"]))
    out.append(rec(["name: big_fused_f32", "expr: sum(x), sum(x*x), max(abs(x)), argmax(x)",
                    "x: f32[%d] randn" % (big + 3), "expect: (np.sum(f64(x)), np.sum(f64(x)**2), np.max(np.abs(x)), np.argmax(x))",
                    "mag: (np.sum(np.abs(f64(x))), np.sum(f64(x)**2), 0, 0)", "dtype: f32, f32, f32, i64"]))
    out.append(rec(["name: big_dot_f64", "expr: reduce(+, a[i]*b[i]) over i",
                    "a: f64[1000000] randn", "b: f64[1000000] randn", "expect: np.dot(a, b)",
                    "mag: np.sum(np.abs(a*b))", "dtype: f64"]))
    out.append(rec(["name: big_count_i64", "expr: count(x % 3 == 0), sum(x)", "x: i64[1000000] randint -1000000000000 1000000000000",
                    "expect: (np.count_nonzero(crem(x, np.int64(3)) == 0), np.sum(x))", "dtype: i64, i64"]))
    # big enough that the executor splits the work: the thread-count
    # determinism check inside the runner means something here
    out.append(rec(["name: big_rows_f32", "expr: (sum(A[i,j]) over j), max(A[i,j]) over i",
                    "A: f32[1000,1000] randn", "expect: (np.sum(f64(A), axis=1), np.max(A, axis=0))",
                    "mag: (np.sum(np.abs(f64(A)), axis=1), 0)", "dtype: f32, f32"]))
    out.append(rec(["name: big_hist_f32_unsorted", "expr: sum(w[i]) by bin[i], count(true) by bin[i]",
                    "w: f32[1000000] randn", "bin: i32[1000000] randint 0 1000",
                    "expect: (keyed(w, bin, 'sum'), np.bincount(bin))",
                    "mag: (keyed(np.abs(f64(w)), bin, 'sum'), 0)", "dtype: f32, i64"]))
    out.append(rec(["name: big_segments_f64", "expr: sum(x[i]) by seg[i], max(x[i]) by seg[i]",
                    "x: f64[1000000] randn", "seg: i64[1000000] sortedkeys 5000",
                    "expect: (keyed(x, seg, 'sum'), keyed(x, seg, 'max'))",
                    "mag: (keyed(np.abs(x), seg, 'sum'), 0)", "dtype: f64, f64"]))
    out.append(rec(["name: big_csr_spmv", "expr: sum(v[k]*x[col[k]]) over k in ptr[r]..ptr[r+1]",
                    "ptr: i64[100001] csr 20", "v: f32[int(ptr[-1])] randn",
                    "col: i32[int(ptr[-1])] randint 0 100000", "x: f32[100000] randn",
                    "py: prod = f64(v) * x[col]",
                    "py: cs = np.concatenate([[0.0], np.cumsum(prod)])",
                    "py: ca = np.concatenate([[0.0], np.cumsum(np.abs(prod))])",
                    "expect: cs[ptr[1:]] - cs[ptr[:-1]]", "mag: ca[ptr[1:]] - ca[ptr[:-1]] + 1e-9 * ca[-1]",
                    "dtype: f32"]))
    out.append(rec(["name: big_cmul_f64",
                    "expr: op cmul(a, b) = (a.0*b.0 - a.1*b.1, a.0*b.1 + a.1*b.0) identity (1, 0)",
                    "expr: reduce(cmul, (re[i], im[i])) over i",
                    "th: f64[1000000] rand -3.14159 3.14159", "re: f64[1000000] py np.cos(th)",
                    "im: f64[1000000] py np.sin(th)", "py: P = np.prod(re + 1j * im)",
                    "expect: (P.real, P.imag)", "mag: (1e6, 1e6)", "dtype: f64, f64"]))
    out.append(rec(["name: big_ordered_affine",
                    "expr: ordered op aff(f, g) = ((f.0*g.0) % 1000003, (g.0*f.1 + g.1) % 1000003) identity (1, 0)",
                    "expr: reduce(aff, (a[i], b[i])) over i",
                    "a: i64[1000000] randint 1 1000003", "b: i64[1000000] randint 0 1000003",
                    "py: P = 1000003",
                    "py: acc = (1, 0)",
                    "py: for ai, bi in zip(a.tolist(), b.tolist()): acc = (acc[0] * ai % P, (ai * acc[1] + bi) % P)",
                    "expect: acc", "dtype: i64, i64"]))
    # positive f32 data summed in f32: a naive sequential sum of 2^20 terms can
    # be ~2e-5 off in relative terms, which the language allows (order depends
    # on the backend): a looser bound for this one case
    out.append(rec(["name: big_sum_f32_positive", "expr: sum(x)", "x: f32[%d] rand" % big,
                    "expect: np.sum(f64(x))", "dtype: f32", "rtol: 1e-4"]))
    out += fam_extremes()
    out += fam_columns()
    return out


def fam_columns():
    """Reductions over the slower index of a matrix (column sums), which the
    CPU executor walks a tile of outputs at a time: every operator and type it
    takes there, NaN, 3-D, a product with a vector, a transposed view (rows in
    memory become columns) and a stepped view."""
    out = []
    for dt in INTS + FLOATS:
        data = "randint 0 60" if dt in UNSIGNED else "randint -30 30" if dt in INTS else "randn 3 nan=0.01"
        A = ref_cast("A", red_result_type("sum", dt)) if dt in INTS else "f64(A)"
        out.append(rec(["name: col_sum_%s" % dt, "expr: sum(A[i,j]) over i", "A: %s[37,300] %s" % (dt, data),
                        "expect: np.sum(%s, axis=0)" % A, "mag: np.sum(np.abs(%s), axis=0)" % A,
                        "dtype: " + red_result_type("sum", dt)]))
        for op in ("min", "max"):
            out.append(rec(["name: col_%s_%s" % (op, dt), "expr: %s(A[i,j]) over i" % op,
                            "A: %s[37,300] %s" % (dt, data), "expect: np.%s(A, axis=0)" % op,
                            "dtype: " + red_result_type(op, dt), "rtol: 0"]))
    out.append(rec(["name: col_prod_f64", "expr: prod(A[i,j]) over i", "A: f64[50,64] rand 0.9 1.1",
                    "expect: np.prod(A, axis=0)", "dtype: f64"]))
    out.append(rec(["name: col_prod_i64", "expr: prod(A[i,j]) over i", "A: i64[40,64] randint -3 4",
                    "expect: np.prod(A, axis=0)", "dtype: i64"]))
    out.append(rec(["name: col_middle_3d_f32", "expr: sum(B[i,j,k]) over j", "B: f32[5,40,33] randn",
                    "expect: np.sum(f64(B), axis=1)", "mag: np.sum(np.abs(f64(B)), axis=1)", "dtype: f32"]))
    out.append(rec(["name: col_vecmat_f64", "expr: (sum(x[i]*A[i,j]) over i), max(A[i,j]) over i",
                    "x: f64[70] randn", "A: f64[70,129] randn",
                    "expect: (x @ A, np.max(A, axis=0))", "mag: (np.abs(x) @ np.abs(A), 0)", "dtype: f64, f64"]))
    out.append(rec(["name: col_transposed_rows_f32", "expr: sum(A[i,j]) over j", "A: f32[300,45] randn view=T",
                    "expect: np.sum(f64(A), axis=1)", "mag: np.sum(np.abs(f64(A)), axis=1)", "dtype: f32"]))
    out.append(rec(["name: col_stepped_i32", "expr: (max(A[i,j]) over i), min(A[i,j]) over i",
                    "A: i32[33,100] randint -1000 1000 step=-2,3",
                    "expect: (np.max(A, axis=0), np.min(A, axis=0))", "dtype: i32, i32"]))
    return out


def fam_extremes():
    """min, max, argmin and argmax over many of the CPU executor's blocks (1024
    values) and many GPU blocks, per type: few distinct values, so the extreme
    ties within a block and across blocks (the first index wins); NaN late
    (it wins, the first one); data that rises (every block beats the last);
    zeros of both signs (equal: the first wins)."""
    out = []
    n = 100003
    for dt in INTS + FLOATS:
        data = "randint 0 60" if dt in UNSIGNED else "randint -30 30"
        for op in ("min", "max", "argmin", "argmax"):
            out.append(rec(["name: ext_%s_%s_ties" % (op, dt), "expr: %s(x)" % op,
                            "x: %s[%d] %s" % (dt, n, data), "expect: np.%s(x)" % op,
                            "dtype: " + red_result_type(op, dt), "rtol: 0"]))
    for dt in ("f32", "f64", "bf16"):
        out.append(rec(["name: ext_nan_late_%s" % dt, "expr: argmax(x), argmin(x), max(x), min(x)",
                        "x: %s[%d] randn nanat=70001,90000" % (dt, n),
                        "expect: (70001, 70001, np.nan, np.nan)",
                        "dtype: i64, i64, %s, %s" % (computed(dt), computed(dt))]))
        out.append(rec(["name: ext_rising_%s" % dt, "expr: argmax(x), argmin(x), argmax(y), argmin(y)",
                        "x: %s[5000] iota" % dt, "y: %s[5000] iota step=-1" % dt,
                        "expect: (np.argmax(x), np.argmin(x), np.argmax(y), np.argmin(y))",
                        "dtype: i64, i64, i64, i64"]))
    out.append(rec(["name: ext_signed_zeros_f32", "expr: argmax(x), argmin(x), argmax(x[i]) over i",
                    "x: f32[5000] py np.where(rng.random(n) < 0.5, -0.0, 0.0) - (rng.random(n) < 0.01)",
                    "expect: (np.argmax(x), np.argmin(x), np.argmax(x))", "dtype: i64, i64, i64"]))
    out.append(rec(["name: ext_rows_i32_ties", "expr: (argmax(A[i,j]) over j), min(A[i,j]) over j",
                    "A: i32[7,3001] randint -5 5", "expect: (np.argmax(A, axis=1), np.min(A, axis=1))",
                    "dtype: i64, i32"]))
    return out


def families():
    parts = ["# Generated by gen_cases.py: operator x dtype matrices and the like.\n\n"]
    for f in (fam_binary, fam_compare, fam_logical, fam_bitops, fam_unary, fam_funcs, fam_casts,
              fam_literals, fam_reductions, fam_axes, fam_sizes):
        parts += f()
    return "".join(parts)


if __name__ == "__main__":
    main()
