#!/usr/bin/env python3
"""make_corpus.py -- writes the fuzzers' seed corpus: every `expr:` of tests/cases/*.cases and
errors.txt (a record's several expr: lines joined by newlines) plus a few hostile seeds, one small
text file each, into corpus/frontend and corpus/cpu.  Run it again after adding cases:

    python3 tests/fuzz/make_corpus.py
"""
import glob
import hashlib
import os

here = os.path.dirname(os.path.abspath(__file__))
cases = os.path.join(here, '..', 'cases')

def exprs(path):
    rec = []
    for line in open(path, encoding='utf-8'):
        if line.startswith('#'):
            continue
        if not line.strip():
            if rec:
                yield '\n'.join(rec)
            rec = []
        elif line.startswith('expr:'):
            rec.append(line[5:].split('  #')[0].strip())
    if rec:
        yield '\n'.join(rec)

hostile = [
    '(' * 255 + 'x' + ')' * 255,                    # just inside the nesting limit
    '(' * 257 + 'x' + ')' * 257,                    # just outside it
    '(' * 1000,                                     # unclosed
    'sum(' * 300 + 'x' + ')' * 300,
    '-' * 2000 + 'x',
    '1e999', '99999999999999999999999', '0xffffffffffffffffff', '18446744073709551615 + 1',
    'sum(x[i*9223372036854775807]) over i',
    'sum(x[i + 9223372036854775807]) over i',
    'sum(x[i*2305843009213693952]) over i in 0..9',
    'sum(x[-9223372036854775807 - 1 + i]) over i',
    'count(true) over i in 0..9223372036854775807',
    'count(true) over i in -9223372036854775807-1..9223372036854775807',
    'sum(i) over i in 0..3000000000',
    'sum(A[i,j]) over j in 0..100000000000',
    'x << 64, x >> -1',
    'a=x+x; b=a+a; c=b+b; d=c+c; e=d+d; f=e+e; g=f+f; sum(g)',
    'op f(a, b) = a identity 0; reduce(f, reduce(f, x[i]) over j in 0..3) over i',
    'sum(x[col[k]]) over k in ptr[r]..ptr[r+1]',
    '\u00e9\x01\t"',
]

# Texts that take the checker its whole lowering budget (4M steps, a second in a
# Release build, over fuzz_cpu's 10-s limit under the sanitizers): a seed must run fast.
slow = ('a0 = x*x; a1 = a0*a0;',)

seen = set()
items = []
for f in sorted(glob.glob(os.path.join(cases, '*.cases'))) + [os.path.join(cases, 'errors.txt')]:
    for e in exprs(f):
        if any(e.startswith(s) for s in slow):
            continue
        if e not in seen:
            seen.add(e)
            items.append(e)
items += hostile
for sub in ('frontend', 'cpu'):
    d = os.path.join(here, 'corpus', sub)
    os.makedirs(d, exist_ok=True)
    for old in os.listdir(d):
        os.remove(os.path.join(d, old))
    for e in items:
        data = e.encode('utf-8')
        name = hashlib.sha1(data).hexdigest()[:16]
        with open(os.path.join(d, name), 'wb') as fh:
            fh.write(data)
print('%d seeds in corpus/frontend and corpus/cpu' % len(items))
