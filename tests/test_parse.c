/*
 * test_parse.c -- the front end on its own: every construct of the grammar
 * printed back in canonical form (and re-parsed to the same text), syntax
 * errors with their exact caret messages, positions, and the limits.
 */
#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ast.h"

static int passed, failed;

#define CHECK(cond, ...)                                  \
    do {                                                  \
        if (cond) {                                       \
            passed++;                                     \
        } else {                                          \
            failed++;                                     \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);   \
            printf(__VA_ARGS__);                          \
            printf("\n");                                 \
        }                                                 \
    } while (0)

/* ---- A program printed as text, statements joined by "; " ----------------- */

static int has_clause(const ast_node *n)
{
    return (n->kind == AST_CALL || n->kind == AST_REDUCE) && (n->has_over || n->by);
}

/* `e1, e2`: an `over` list before the comma would take e2 as an index. */
static void print_result(util_buf *b, const ast_node *n, int last)
{
    int wrap = !last && has_clause(n);
    if (wrap) util_buf_puts(b, "(");
    ast_print(b, n);
    if (wrap) util_buf_puts(b, ")");
}

static void print_program(util_buf *b, const ast_program *p)
{
    for (int i = 0; i < p->nstmts; i++) {
        const ast_stmt *s = &p->stmts[i];
        if (i) util_buf_puts(b, "; ");
        switch (s->kind) {
        case STMT_EXPR:
            for (int k = 0; k < s->nexprs; k++) {
                if (k) util_buf_puts(b, ", ");
                print_result(b, s->exprs[k], k + 1 == s->nexprs);
            }
            break;
        case STMT_LET:
            util_buf_printf(b, "%s = ", s->name);
            ast_print(b, s->exprs[0]);
            break;
        case STMT_ASSIGN:
            util_buf_printf(b, "%s[", s->name);
            for (int k = 0; k < s->nidx; k++) {
                util_buf_printf(b, "%s%s", k ? ", " : "", s->idx[k]);
                if (s->idx_lo && s->idx_lo[k]) {
                    util_buf_puts(b, " in ");
                    ast_print(b, s->idx_lo[k]);
                    util_buf_puts(b, "..");
                    ast_print(b, s->idx_hi[k]);
                }
            }
            util_buf_puts(b, "] = ");
            ast_print(b, s->exprs[0]);
            break;
        case STMT_OP:
            util_buf_printf(b, "%sop %s(%s, %s) = ", s->ordered ? "ordered " : "", s->name,
                            s->param[0], s->param[1]);
            ast_print(b, s->exprs[0]);
            util_buf_puts(b, " identity ");
            ast_print(b, s->exprs[1]);
            break;
        }
    }
}

/* Parse src and print it into out; returns the status. */
static int parse_print(const char *src, util_buf *out, util_diag *d, int *incomplete)
{
    util_arena a;
    util_arena_init(&a);
    ast_program *p = NULL;
    int rc = ast_parse(&a, src, &p, d, incomplete);
    if (rc == RED_OK) print_program(out, p);
    util_arena_free(&a);
    return rc;
}

/* ---- Parses that succeed: canonical text, and a round trip ---------------- */

static void ok(const char *src, const char *want)
{
    util_buf b, b2;
    util_diag d = {0};
    util_buf_init(&b);
    util_buf_init(&b2);
    int rc = parse_print(src, &b, &d, NULL);
    CHECK(rc == RED_OK, "parse of \"%s\" failed (%d):\n%s", src, rc, d.msg);
    if (rc == RED_OK) {
        CHECK(strcmp(util_buf_str(&b), want) == 0, "\"%s\"\n   printed \"%s\"\n  expected \"%s\"", src,
              util_buf_str(&b), want);
        /* The canonical text must parse to the same tree. */
        rc = parse_print(util_buf_str(&b), &b2, &d, NULL);
        CHECK(rc == RED_OK && strcmp(util_buf_str(&b), util_buf_str(&b2)) == 0,
              "round trip of \"%s\": \"%s\" -> \"%s\" (%d) %s", src, util_buf_str(&b),
              util_buf_str(&b2), rc, rc ? d.msg : "");
    }
    util_buf_free(&b);
    util_buf_free(&b2);
}

static void test_constructs(void)
{
    /* Literals and names. */
    ok("42", "42");
    ok("0x7f", "127");
    ok("0XfF", "255");
    ok("007", "7");
    ok("18446744073709551615", "18446744073709551615");
    ok("0xffffffffffffffff", "18446744073709551615");
    ok("0x0000000000000000000001", "1");
    ok("1.5", "1.5");
    ok("2e-3", "0.002");
    ok("1.0e10", "10000000000.0");
    ok("1E+2", "100.0");
    ok("0.1", "0.10000000000000001");
    ok("1e-400", "0.0");
    ok("true", "true");
    ok("false", "false");
    ok("inf", "inf");
    ok("nan", "nan");
    ok("x", "x");
    ok("_a1", "_a1");
    ok("overx + in_ + by2", "((overx + in_) + by2)");

    /* Operators: precedence, lowest to highest, and left associativity. */
    ok("a + b * c", "(a + (b * c))");
    ok("a * b + c", "((a * b) + c)");
    ok("a - b - c", "((a - b) - c)");
    ok("a * b / c % d", "(((a * b) / c) % d)");
    ok("a << 1 + 2", "(a << (1 + 2))");
    ok("a >> b << c", "((a >> b) << c)");
    ok("a < b << c", "(a < (b << c))");
    ok("a <= b >= c", "((a <= b) >= c)");
    ok("a < b == c > d", "((a < b) == (c > d))");
    ok("x == y != z", "((x == y) != z)");
    ok("a & b == c", "(a & (b == c))");
    ok("a & b ^ c | d", "(((a & b) ^ c) | d)");
    ok("a | b ^ c & d", "(a | (b ^ (c & d)))");
    ok("a && b | c", "(a && (b | c))");
    ok("a || b && c", "(a || (b && c))");
    ok("a && b || c && d", "((a && b) || (c && d))");
    ok("a || b ? c : d", "((a || b) ? c : d)");
    ok("a ? b : c ? d : e", "(a ? b : (c ? d : e))");
    ok("a ? b ? c : d : e", "(a ? (b ? c : d) : e)");
    ok("a ? (b, c) : d", "(a ? (b, c) : d)");
    ok("-x", "(-x)");
    ok("+x", "(+x)");
    ok("- -x", "(-(-x))");
    ok("--x", "(-(-x))");
    ok("!a && ~b", "((!a) && (~b))");
    ok("-a * b", "((-a) * b)");
    ok("-x[i]", "(-x[i])");
    ok("-a.0", "(-a.0)");
    ok("!a == b", "((!a) == b)");
    ok("(a + b) * c", "((a + b) * c)");
    ok("((a))", "a");

    /* `**`: Python's power, tighter than a unary operator on its left, a
     * unary operand on its right, grouping to the right. */
    ok("x**2", "(x ** 2)");
    ok("-x**2", "(-(x ** 2))");
    ok("2**-1", "(2 ** (-1))");
    ok("a**b**c", "(a ** (b ** c))");
    ok("(a**b)**c", "((a ** b) ** c)");
    ok("a*b**c", "(a * (b ** c))");
    ok("a**b*c", "((a ** b) * c)");
    ok("!a**b", "(!(a ** b))");
    ok("x[i]**a.0", "(x[i] ** a.0)");
    ok("f(x)**2", "(f(x) ** 2)");

    /* Subscripts, fields, tuples, calls. */
    ok("x[i]", "x[i]");
    ok("x[i, j+1]", "x[i, (j + 1)]");
    ok("x[col[k]]", "x[col[k]]");
    ok("(a)[i]", "a[i]");
    ok("a.0", "a.0");
    ok("a.0.1", "a.0.1");
    ok("a . 1 . 5", "a.1.5");
    ok("t.1 + t.0", "(t.1 + t.0)");
    ok("(a, b)", "(a, b)");
    ok("(a, b, c)", "(a, b, c)");
    ok("(a, (b, c)).1", "(a, (b, c)).1");
    ok("(1).0", "(1).0");
    ok("f(x).0", "f(x).0");
    ok("count()", "count()");
    ok("f(a, b, c)", "f(a, b, c)");
    ok("max(abs(x-y))", "max(abs((x - y)))");
    ok("f64(x) * 2.5", "(f64(x) * 2.5)");
    ok("fma(a, b, c)", "fma(a, b, c)");

    /* Reductions and their clauses. */
    ok("sum(x[i]) over i", "sum(x[i]) over i");
    ok("sum(x[i]) over i in 0..n", "sum(x[i]) over i in 0..n");
    ok("sum(x[i]) over i in 0..n-1", "sum(x[i]) over i in 0..(n - 1)");
    ok("sum(x[i]) over i in 1..n * 2", "sum(x[i]) over i in 1..(n * 2)");
    ok("sum(x[i]) over i in 1..n ** 2", "sum(x[i]) over i in 1..(n ** 2)");
    ok("sum(x[i]) over i ** 2", "((sum(x[i]) over i) ** 2)");
    ok("sum(x[i]) over i in a.0..n", "sum(x[i]) over i in a.0..n");
    ok("sum(x[i]) over i in 0..n[0]", "sum(x[i]) over i in 0..n[0]");
    ok("sum(x[i]) over i / n", "((sum(x[i]) over i) / n)");
    ok("sum(x[i]) over i in 0..n < 3", "((sum(x[i]) over i in 0..n) < 3)");
    ok("sum(x) over i, j in 0..m", "sum(x) over i, j in 0..m");
    ok("sum(A[i,j]) over i in 0..n, j by k", "sum(A[i, j]) over i in 0..n, j by k");
    ok("sum(A[i,j]) over j", "sum(A[i, j]) over j");
    ok("max(sum(A[i,j]) over j)", "max(sum(A[i, j]) over j)");
    ok("sum(v[k]*x[col[k]]) over k in ptr[r]..ptr[r+1]",
       "sum((v[k] * x[col[k]])) over k in ptr[r]..ptr[(r + 1)]");
    ok("sum(x[i]) by seg[i]", "sum(x[i]) by seg[i]");
    ok("sum(x[i]) by k + 1", "sum(x[i]) by (k + 1)");
    ok("sum(x[i]) by k.0", "sum(x[i]) by k.0");
    ok("sum(x[i]) by k == 0", "((sum(x[i]) by k) == 0)");
    ok("(sum(x[i]) by seg[i]) * 2", "((sum(x[i]) by seg[i]) * 2)");
    ok("count(true) by bin[i]", "count(true) by bin[i]");
    ok("reduce(+, a[i]*b[i]) over i", "reduce(+, (a[i] * b[i])) over i");
    ok("reduce(*, x)", "reduce(*, x)");
    ok("reduce(&, x) | reduce(|, x) ^ reduce(^, x)",
       "(reduce(&, x) | (reduce(|, x) ^ reduce(^, x)))");
    ok("reduce(&&, x) || reduce(||, x)", "(reduce(&&, x) || reduce(||, x))");
    ok("reduce(min, x[i]) over i by k", "reduce(min, x[i]) over i by k");
    ok("reduce(cmul, (re[i], im[i])) over i", "reduce(cmul, (re[i], im[i])) over i");
    ok("-sum(x) over i", "(-sum(x) over i)");
    ok("a ? sum(x) over i : b", "(a ? (sum(x) over i) : b)");
    ok("(sum(x) over i).0", "(sum(x) over i).0");
    ok("f(sum(x) over i, y)", "f(sum(x) over i, y)");
    ok("f((sum(x) over i), y)", "f((sum(x) over i), y)");
    ok("sum(x) over i in 0..f(y) by k", "sum(x) over i in 0..f(y) by k");
    ok("sum(x) over i in 0..(f(y) by k) by j", "sum(x) over i in 0..(f(y) by k) by j");
    /* An over list goes on over a comma only when a plain name follows. */
    ok("sum(A[i,j]) over j, sum(A[i,j]*A[i,j]) over j",
       "(sum(A[i, j]) over j), sum((A[i, j] * A[i, j])) over j");
    ok("sum(x) over i, j in 0..m, f(y)", "(sum(x) over i, j in 0..m), f(y)");
    ok("sum(x) over i, reduce(+, y) over j", "(sum(x) over i), reduce(+, y) over j");
    ok("sum(x) over i, sum (y)", "(sum(x) over i), sum(y)");
    ok("sum(x) over i, 2, -y, (z), !w, true", "(sum(x) over i), 2, (-y), z, (!w), true");
    ok("sum(x) over i, y", "sum(x) over i, y");
    ok("sum(x[i]) over i, x[i] - 1", "(sum(x[i]) over i), (x[i] - 1)");
    /* A result's index with a range: on the left of '=' only (the checker says so elsewhere). */
    ok("C[x in 0..10] = sum(a[x*100+y]) over y in 0..100",
       "C[x in 0..10] = sum(a[((x * 100) + y)]) over y in 0..100");
    ok("C[x in 2..n-1, j] = A[x, j]", "C[x in 2..(n - 1), j] = A[x, j]");
    ok("a[x in 0..3]", "a[x in 0..3]");
    ok("sum(x) over i, y [j]", "(sum(x) over i), y[j]");
    ok("f(sum(x) over i,\n y)", "f(sum(x) over i, y)");
    ok("f(sum(x) over i, g(y))", "f((sum(x) over i), g(y))");
    ok("(sum(x) over i, sum(y) over j)", "((sum(x) over i), sum(y) over j)");
    ok("a[sum(x) over i, f(j)]", "a[(sum(x) over i), f(j)]");
    ok("sum(x) over i in 0..sum(y) over k, j, f(z)",
       "(sum(x) over i in 0..sum(y) over k, j), f(z)");
    ok("x[i] - mean(x)", "(x[i] - mean(x))");
    ok("sqrt(sum(x*x))", "sqrt(sum((x * x)))");

    /* Statements and separators. */
    ok("sum(x), sum(x*x), max(abs(x))", "sum(x), sum((x * x)), max(abs(x))");
    ok("(sum(x) over i), y", "(sum(x) over i), y");
    ok("d = x - y; max(abs(d))", "d = (x - y); max(abs(d))");
    ok("d = x - y\nmax(abs(d))", "d = (x - y); max(abs(d))");
    ok("(d) = 1", "d = 1");
    ok("C[j,i] = sum(A[i,k]*B[k,j]) over k", "C[j, i] = sum((A[i, k] * B[k, j])) over k");
    ok("op cmul(a, b) = (a.0*b.0 - a.1*b.1, a.0*b.1 + a.1*b.0) identity (1, 0);\n"
       "reduce(cmul, (re[i], im[i])) over i",
       "op cmul(a, b) = (((a.0 * b.0) - (a.1 * b.1)), ((a.0 * b.1) + (a.1 * b.0))) identity (1, 0); "
       "reduce(cmul, (re[i], im[i])) over i");
    ok("ordered op f(a, b) = b identity 0; reduce(f, x)",
       "ordered op f(a, b) = b identity 0; reduce(f, x)");
    ok("op f(a, b) = a ? a : b identity -inf; reduce(f, x)",
       "op f(a, b) = (a ? a : b) identity (-inf); reduce(f, x)");
    ok(";;a;;\n\nb;\n", "a; b");
    ok("\n\n  a\n", "a");
    ok("a # a comment\n# another\nb # last", "a; b");
    ok("sum(x\n + y)", "sum((x + y))");
    ok("f(a,\n  b)\ng(c)", "f(a, b); g(c)");
    ok("x[i,\n j]", "x[i, j]");
    ok("f(a\r\n+b)", "f((a + b))");
    ok("a;\tb\r\n", "a; b");
}

/* ---- Parses that fail: code, exact message, incomplete flag --------------- */

static void err(const char *src, int code, const char *want, int want_incomplete)
{
    util_buf b;
    util_diag d = {0};
    int inc = -1;
    util_buf_init(&b);
    int rc = parse_print(src, &b, &d, &inc);
    CHECK(rc == code, "\"%s\": status %d, expected %d (%s)", src, rc, code, d.msg);
    CHECK(d.code == code, "\"%s\": diag code %d, expected %d", src, d.code, code);
    if (want) CHECK(strcmp(d.msg, want) == 0, "\"%s\"\n   message:\n%s\n  expected:\n%s", src, d.msg, want);
    CHECK(inc == want_incomplete, "\"%s\": incomplete %d, expected %d", src, inc, want_incomplete);
    util_buf_free(&b);
}

#define SYN RED_ERR_SYNTAX

static void test_errors(void)
{
    /* At the end of the input: incomplete. */
    err("sum(x", SYN, "1:6: unexpected end of input\n  sum(x\n       ^", 1);
    err("a +", SYN, "1:4: unexpected end of input\n  a +\n     ^", 1);
    err("(1,", SYN, "1:4: unexpected end of input\n  (1,\n     ^", 1);
    err("a +\n", SYN, "1:4: unexpected end of input\n  a +\n     ^", 1);
    err("a + # more to come\n\n", SYN,
        "1:4: unexpected end of input\n  a + # more to come\n     ^", 1);
    err("x = ", SYN, "1:4: unexpected end of input\n  x = \n     ^", 1);
    err("sum(x) over", SYN, "1:12: unexpected end of input\n  sum(x) over\n             ^", 1);
    err("sum(x) over i in 0..", SYN, NULL, 1);
    err("sum(x) over i in 0..n,", SYN, NULL, 1);
    err("sum(x) by", SYN, NULL, 1);
    err("a ? b", SYN, NULL, 1);
    err("a **", SYN, "1:5: unexpected end of input\n  a **\n      ^", 1);
    err("op f(a, b) = a", SYN, NULL, 1);
    err("f(a,\n", SYN, "1:5: unexpected end of input\n  f(a,\n      ^", 1);
    err("x[i,\n  j", SYN, "2:4: unexpected end of input\n    j\n     ^", 1);
    err("1.", SYN, "1:3: unexpected end of input\n  1.\n    ^", 1);

    /* Not at the end. */
    err("a )", SYN, "1:3: unexpected ')'\n  a )\n    ^", 0);
    err("a b", SYN, "1:3: unexpected name 'b'\n  a b\n    ^", 0);
    err("a 1.5", SYN, "1:3: unexpected number '1.5'\n  a 1.5\n    ^~~", 0);
    err("a inf", SYN, "1:3: unexpected 'inf'\n  a inf\n    ^~~", 0);
    err("over", SYN, "1:1: unexpected 'over'\n  over\n  ^~~~", 0);
    err("x in y", SYN, "1:3: unexpected 'in'\n  x in y\n    ^~", 0);
    err("f(a,)", SYN, "1:5: unexpected ')'\n  f(a,)\n      ^", 0);
    err("(a,)", SYN, "1:4: unexpected ')'\n  (a,)\n     ^", 0);
    err("()", SYN, "1:2: unexpected ')'\n  ()\n   ^", 0);
    err("a[]", SYN, "1:3: unexpected ']'\n  a[]\n    ^", 0);
    err("(a]", SYN, "1:3: unexpected ']'\n  (a]\n    ^", 0);
    err("x * *y", SYN, "1:5: unexpected '*'\n  x * *y\n      ^", 0);
    err("x ***y", SYN, "1:5: unexpected '*'\n  x ***y\n      ^", 0);
    err("a ! b", SYN, "1:3: unexpected '!'\n  a ! b\n    ^", 0);
    err("a..b", SYN, "1:2: unexpected '..'\n  a..b\n   ^~", 0);
    err(".5", SYN, "1:1: unexpected '.'\n  .5\n  ^", 0);

    err("x = y = z", SYN, "1:7: unexpected '='\n  x = y = z\n        ^", 0);
    err("a, b = c", SYN, "1:6: unexpected '='\n  a, b = c\n       ^", 0);
    err("a ? b ; c", SYN, "1:7: unexpected ';'\n  a ? b ; c\n        ^", 0);
    err("sum(x) by k by j", SYN, "1:13: unexpected 'by'\n  sum(x) by k by j\n              ^~", 0);
    err("sum(x) over i over j", SYN,
        "1:15: unexpected 'over'\n  sum(x) over i over j\n                ^~~~", 0);
    err("sum(x) over i in 0..n in", SYN, NULL, 0);
    err("reduce(-, x)", SYN, "1:8: unexpected '-'\n  reduce(-, x)\n         ^", 0);
    err("reduce(+ x)", SYN, "1:10: unexpected name 'x'\n  reduce(+ x)\n           ^", 0);
    err("reduce(+, x, y)", SYN, "1:12: unexpected ','\n  reduce(+, x, y)\n             ^", 0);
    err("reduce x", SYN, "1:8: unexpected name 'x'\n  reduce x\n         ^", 0);
    err("op f(a) = a identity 0", SYN, "1:7: unexpected ')'\n  op f(a) = a identity 0\n        ^", 0);
    err("op f(a, 1) = a identity 0", SYN, NULL, 0);
    err("ordered f(a, b) = a identity 0", SYN,
        "1:9: unexpected name 'f'\n  ordered f(a, b) = a identity 0\n          ^", 0);
    err("a identity b", SYN, NULL, 0);
    err("x;\n  y +* z", SYN, "2:6: unexpected '*'\n    y +* z\n       ^", 0);
    err("a +\nb", SYN,
        "1:4: unexpected newline (outside brackets a newline ends the statement)\n  a +\n     ^", 0);
    err("x = 1\ny = (2 +\n 3))", SYN, "3:4: unexpected ')'\n   3))\n     ^", 0);
    err("a 1234567890.1234567890123456789012345678901", SYN,
        "1:3: unexpected number '1234567890.12345678901234567890123456...'\n"
        "  a 1234567890.1234567890123456789012345678901\n"
        "    ^~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~", 0);

    /* Python and NumPy spellings get a hint of what to write instead. */
    err("x > 0 and x < 1", SYN,
        "1:7: 'and' is not an operator: logical and is written '&&'\n  x > 0 and x < 1\n        ^~~", 0);
    err("a or b", SYN, "1:3: 'or' is not an operator: logical or is written '||'\n  a or b\n    ^~", 0);
    err("sum(not a)", SYN,
        "1:5: 'not' is not an operator: logical not is written '!'\n  sum(not a)\n      ^~~", 0);
    err("a if c else b", SYN,
        "1:3: 'if' is not an operator: a conditional is written c ? a : b\n  a if c else b\n    ^~", 0);
    err("a and", SYN, "1:3: 'and' is not an operator: logical and is written '&&'\n  a and\n    ^~~", 0);
    err("sum(A, axis=1)", SYN,
        "1:8: 'axis=' is not part of the language: subscript the array and name the index to reduce "
        "with 'over', e.g. sum(A[i,j]) over j for NumPy's axis=1 (row sums)\n"
        "  sum(A, axis=1)\n         ^~~~~", 0);
    err("sum(A, axis = 0)", SYN,
        "1:8: 'axis=' is not part of the language: subscript the array and name the index to reduce "
        "with 'over', e.g. sum(A[i,j]) over i for NumPy's axis=0 (column sums)\n"
        "  sum(A, axis = 0)\n         ^~~~~~", 0);
    err("sum(x, dtype=f64)", SYN,
        "1:8: 'dtype=' is not part of the language: cast the operand instead, e.g. sum(f64(x))\n"
        "  sum(x, dtype=f64)\n         ^~~~~~", 0);
    err("f(x, w=2)", SYN,
        "1:6: keyword arguments such as 'w=' are not part of the language: arguments are given by "
        "position\n  f(x, w=2)\n       ^~", 0);
    err("x[i=1]", SYN, "1:4: unexpected '='\n  x[i=1]\n     ^", 0);
    err("A[:, 0]", SYN,
        "1:3: slices are not part of the language: write an index variable where NumPy has ':', "
        "e.g. A[i, 0] for column 0 (one result per i), and 'over i in lo..hi' for part of a range\n"
        "  A[:, 0]\n    ^", 0);
    err("f(x[1:3])", SYN, NULL, 0);
    err("a ? b : c : d", SYN, "1:11: unexpected ':'\n  a ? b : c : d\n            ^", 0);
    err("x.sum()", SYN,
        "1:2: methods are not part of the language: write sum(x), not x.sum()\n  x.sum()\n   ^~~~", 0);
    err("(x + 1).max(axis=0)", SYN,
        "1:8: methods are not part of the language: write max(x + 1), not (x + 1).max()\n"
        "  (x + 1).max(axis=0)\n         ^~~~", 0);
    err("x.astype(f64)", SYN,
        "1:2: methods are not part of the language: cast with the type's name, e.g. f64(x)\n"
        "  x.astype(f64)\n   ^~~~~~~", 0);
    err("np.sum(x)", SYN,
        "1:1: drop the 'np.' prefix: functions are called by their own names, e.g. sum(x)\n"
        "  np.sum(x)\n  ^~~", 0);
    err("a.b", SYN,
        "1:2: '.b' is not a field: tuple fields are selected by number (t.0, t.1, ...)\n  a.b\n   ^~", 0);
    err("a.b\n(1)", SYN,
        "1:2: '.b' is not a field: tuple fields are selected by number (t.0, t.1, ...)\n  a.b\n   ^~", 0);
    err("f(a.b\n(1))", SYN,
        "1:4: methods are not part of the language: write b(a), not a.b()\n  f(a.b\n     ^~", 0);

    /* The left side of '='. */
    err("a + 1 = 3", SYN,
        "1:1: left side of '=' must be a name or name[i, j, ...] (an index may take a range: x in lo..hi)\n  a + 1 = 3\n  ^~~~~", 0);
    err("C[i+1, j] = x", SYN,
        "1:3: left side of '=' must be a name or name[i, j, ...] (an index may take a range: x in lo..hi)\n  C[i+1, j] = x\n    ^~~", 0);
    err("C[i, 2] = x", SYN, NULL, 0);
    err("f(x) = 1", SYN, NULL, 0);
    err("true = 1", SYN, NULL, 0);
    err("(a, b) = c", SYN, NULL, 0);

    /* Subscripts of something other than a name. */
    err("a[i][j]", SYN,
        "1:5: only an array name can be subscripted: write a[i, j], not a[i][j]\n  a[i][j]\n      ^", 0);
    err("f(x)[i]", SYN, "1:5: only an array name can be subscripted\n  f(x)[i]\n      ^", 0);
    err("a.99999", SYN, "1:3: tuple field number too large (at most 65535)\n  a.99999\n    ^~~~~", 0);

    /* Lexical errors. */
    err("x @ y", SYN, "1:3: unexpected character '@'\n  x @ y\n    ^", 0);
    err("x $", SYN, "1:3: unexpected character '$'\n  x $\n    ^", 0);
    err("x \x01", SYN, "1:3: unexpected character '\\x01'\n  x \x01\n    ^", 0);
    err("x \xc3\xa9", SYN, "1:3: unexpected character '\xc3\xa9'\n  x \xc3\xa9\n    ^~", 0);
    err("\"s\"", SYN, "1:1: unexpected character '\"'\n  \"s\"\n  ^", 0);
    err("18446744073709551616", SYN,
        "1:1: integer literal too large (the largest is 18446744073709551615)\n"
        "  18446744073709551616\n  ^~~~~~~~~~~~~~~~~~~~", 0);
    err("x + 0x10000000000000000", SYN,
        "1:5: integer literal too large (the largest is 18446744073709551615)\n"
        "  x + 0x10000000000000000\n      ^~~~~~~~~~~~~~~~~~~", 0);
    err("1e999", SYN, "1:1: decimal literal too large (write inf for infinity)\n  1e999\n  ^~~~~", 0);
    err("12abc", SYN, "1:1: invalid number '12abc'\n  12abc\n  ^~~~~", 0);
    err("0x", SYN, "1:1: invalid number '0x'\n  0x\n  ^~", 0);
    err("1e", SYN, "1:1: invalid number '1e'\n  1e\n  ^~", 0);
    err("1.5f", SYN, "1:1: invalid number '1.5f'\n  1.5f\n  ^~~~", 0);
    err("0x1g", SYN, "1:1: invalid number '0x1g'\n  0x1g\n  ^~~~", 0);

    /* Nothing to evaluate. */
    err("", SYN, "1:1: empty expression\n  \n  ^", 0);
    err("  ;; \n # only a comment", SYN, NULL, 0);
    err("\n\n", SYN, NULL, 0);
}

/* ---- Positions -------------------------------------------------------------- */

static int pos_is(util_pos p, int off, int len) { return p.off == off && p.len == len; }

static void test_positions(void)
{
    util_arena a;
    util_arena_init(&a);
    util_diag d = {0};
    ast_program *p;

    const char *s1 = "x = 1\n  (a+b)*c[i] , -f(y).0";
    CHECK(ast_parse(&a, s1, &p, &d, NULL) == RED_OK && p->nstmts == 2, "positions 1: %s", d.msg);
    if (p && p->nstmts == 2) {
        const ast_stmt *let = &p->stmts[0], *ex = &p->stmts[1];
        CHECK(let->kind == STMT_LET && pos_is(let->pos, 0, 5) && pos_is(let->name_pos, 0, 1),
              "let pos %d+%d", let->pos.off, let->pos.len);
        CHECK(pos_is(let->exprs[0]->pos, 4, 1), "let value pos");
        CHECK(ex->kind == STMT_EXPR && ex->nexprs == 2 && pos_is(ex->pos, 8, 20), "stmt pos %d+%d",
              ex->pos.off, ex->pos.len);
        const ast_node *mul = ex->exprs[0];
        CHECK(mul->kind == AST_BINARY && mul->op == BOP_MUL && pos_is(mul->pos, 8, 10),
              "binary covers its parentheses: %d+%d", mul->pos.off, mul->pos.len);
        CHECK(pos_is(mul->args[0]->pos, 9, 3), "inner a+b without its parentheses");
        CHECK(mul->args[1]->kind == AST_INDEX && pos_is(mul->args[1]->pos, 14, 4) &&
                  pos_is(mul->args[1]->name_pos, 14, 1), "index pos");
        const ast_node *neg = ex->exprs[1];
        CHECK(neg->kind == AST_UNARY && neg->op == '-' && pos_is(neg->pos, 21, 7), "unary pos %d+%d",
              neg->pos.off, neg->pos.len);
        const ast_node *fld = neg->args[0];
        CHECK(fld->kind == AST_FIELD && fld->field == 0 && pos_is(fld->pos, 22, 6), "field pos");
        CHECK(fld->args[0]->kind == AST_CALL && pos_is(fld->args[0]->pos, 22, 4) &&
                  pos_is(fld->args[0]->name_pos, 22, 1), "call pos");
    }

    const char *s2 = "sum(x[i]) over i in 0..n-1, j by k[j]";
    CHECK(ast_parse(&a, s2, &p, &d, NULL) == RED_OK && p->nstmts == 1, "positions 2: %s", d.msg);
    if (p) {
        const ast_node *c = p->stmts[0].exprs[0];
        CHECK(c->kind == AST_CALL && pos_is(c->pos, 0, (int)strlen(s2)), "call with clauses pos %d+%d",
              c->pos.off, c->pos.len);
        CHECK(c->has_over && c->nover == 2 && pos_is(c->over[0].pos, 15, 1) &&
                  pos_is(c->over[1].pos, 28, 1), "over index pos");
        CHECK(c->over[0].lo && c->over[0].lo->kind == AST_INT && c->over[0].hi->kind == AST_BINARY &&
                  !c->over[1].lo && !c->over[1].hi, "over bounds");
        CHECK(c->by && c->by->kind == AST_INDEX && pos_is(c->by->pos, 33, 4), "by key pos");
        CHECK(c->depth == 3, "depth of sum(...) over i in 0..n-1: %d", c->depth);
    }

    const char *s3 = "reduce(&&, x) over i";
    CHECK(ast_parse(&a, s3, &p, &d, NULL) == RED_OK, "positions 3: %s", d.msg);
    if (p) {
        const ast_node *r = p->stmts[0].exprs[0];
        CHECK(r->kind == AST_REDUCE && strcmp(r->name, "&&") == 0 && pos_is(r->name_pos, 7, 2) &&
                  r->nargs == 1 && pos_is(r->pos, 0, 20), "reduce node");
    }

    /* The inner call of a bound takes a `by` that follows it. */
    CHECK(ast_parse(&a, "sum(x) over i in 0..f(y) by k", &p, &d, NULL) == RED_OK, "%s", d.msg);
    if (p) {
        const ast_node *c = p->stmts[0].exprs[0];
        CHECK(!c->by && c->over[0].hi->kind == AST_CALL && c->over[0].hi->by, "by binds inward");
    }

    const char *s4 = "ordered op m(p, q) = p identity 0\nC[j, i] = A[i, j]";
    CHECK(ast_parse(&a, s4, &p, &d, NULL) == RED_OK && p->nstmts == 2, "positions 4: %s", d.msg);
    if (p && p->nstmts == 2) {
        const ast_stmt *o = &p->stmts[0], *as = &p->stmts[1];
        CHECK(o->kind == STMT_OP && o->ordered && strcmp(o->name, "m") == 0 &&
                  strcmp(o->param[0], "p") == 0 && strcmp(o->param[1], "q") == 0 &&
                  pos_is(o->param_pos[1], 16, 1) && o->nexprs == 2 && pos_is(o->pos, 0, 33),
              "op statement");
        CHECK(as->kind == STMT_ASSIGN && as->nidx == 2 && strcmp(as->idx[0], "j") == 0 &&
                  pos_is(as->idx_pos[1], 39, 1) && pos_is(as->name_pos, 34, 1) && as->nexprs == 1,
              "assign statement");
    }
    CHECK(ast_parse(&a, "x", &p, NULL, NULL) == RED_OK && p && strcmp(p->src, "x") == 0,
          "NULL diag and incomplete are allowed");
    util_arena_free(&a);
}

/* ---- Limits ------------------------------------------------------------------ */

static char *repeat(const char *head, const char *unit, long n, const char *mid, const char *tail,
                    long ntail)
{
    size_t lh = strlen(head), lu = strlen(unit), lm = strlen(mid), lt = strlen(tail);
    char *s = malloc(lh + lu * (size_t)n + lm + lt * (size_t)ntail + 1), *p = s;
    memcpy(p, head, lh);
    p += lh;
    for (long i = 0; i < n; i++, p += lu) memcpy(p, unit, lu);
    memcpy(p, mid, lm);
    p += lm;
    for (long i = 0; i < ntail; i++, p += lt) memcpy(p, tail, lt);
    *p = 0;
    return s;
}

static int parse_status(const char *src, util_diag *d)
{
    util_arena a;
    util_arena_init(&a);
    ast_program *p;
    int rc = ast_parse(&a, src, &p, d, NULL);
    util_arena_free(&a);
    return rc;
}

static void limit_ok(char *src, const char *what)
{
    util_diag d = {0};
    int rc = parse_status(src, &d);
    CHECK(rc == RED_OK, "%s: %d %s", what, rc, d.msg);
    free(src);
}

static void limit_err(char *src, const char *what, const char *msg_start)
{
    util_diag d = {0};
    int rc = parse_status(src, &d);
    CHECK(rc == RED_ERR_LIMIT && strncmp(d.msg, msg_start, strlen(msg_start)) == 0,
          "%s: %d\n%s\n  expected: %s", what, rc, d.msg, msg_start);
    free(src);
}

static void test_limits(void)
{
    /* Brackets: 256 levels are fine, the 257th is reported where it opens. */
    limit_ok(repeat("", "(", 256, "x", ")", 256), "256 parentheses");
    limit_ok(repeat("", "a[", 256, "i", "]", 256), "256 subscripts");
    limit_err(repeat("", "(", 257, "x", ")", 257), "257 parentheses",
              "1:257: expression nested too deeply: the limit is 256 open brackets");
    limit_err(repeat("", "f(", 300, "x", ")", 300), "300 calls",
              "1:514: expression nested too deeply: the limit is 256 open brackets");
    {
        util_diag d = {0};
        char *s = repeat("", "(", 300, "", "", 0);
        int inc = 0;
        util_arena a;
        util_arena_init(&a);
        ast_program *p;
        CHECK(ast_parse(&a, s, &p, &d, &inc) == RED_ERR_LIMIT && inc == 0,
              "over-deep brackets are not incomplete");
        util_arena_free(&a);
        free(s);
    }

    /* Tree depth: 512 levels are fine, 513 are not, whatever the shape. */
    limit_ok(repeat("", "-", 511, "x", "", 0), "511 unary minuses");
    limit_err(repeat("", "-", 512, "x", "", 0), "512 unary minuses",
              "1:1: expression nested too deeply: the limit is 512 levels");
    limit_ok(repeat("", "a ? b : ", 511, "c", "", 0), "511 chained conditionals");
    limit_err(repeat("", "a ? b : ", 512, "c", "", 0), "512 chained conditionals",
              "1:3: expression nested too deeply: the limit is 512 levels");
    limit_ok(repeat("x", "**x", 511, "", "", 0), "x**x**... 512 terms, nested to the right");
    limit_err(repeat("x", "**x", 512, "", "", 0), "x**x**... 513 terms",
              "1:2: expression nested too deeply: the limit is 512 levels");
    limit_ok(repeat("", "x+(", 255, "x", ")", 255), "255 right operands in parentheses");
    limit_ok(repeat("", "a.0", 1, "", ".0", 510), "511 fields");
    limit_err(repeat("", "a.0", 1, "", ".0", 511), "512 fields",
              "1:1024: expression nested too deeply: the limit is 512 levels");
    /* Depth counts through over bounds: 511 sums nested in range bounds. */
    limit_ok(repeat("", "sum(x) over i in 0..", 511, "n", "", 0), "511 sums in bounds");
    limit_err(repeat("", "sum(x) over i in 0..", 512, "n", "", 0), "512 sums in bounds",
              "1:1: expression nested too deeply: the limit is 512 levels");

    /* A chain of binary operators down their left operands is one level,
     * however long: a sum of many terms is not deep nesting.  Its right
     * operands are nested one level deeper. */
    limit_ok(repeat("x", "+x", 512, "", "", 0), "x+x+... 513 terms");
    limit_ok(repeat("x", "*x-x", 50000, "", "", 0), "x*x-x*x-... 100 001 terms");
    limit_ok(repeat("", "x+x+-(", 200, "x", ")", 200), "chains at every one of 200 levels");
    limit_ok(repeat("", "x < ", 511, "x", "", 0), "x < x < ... 512 terms");
    {
        /* printed back in a loop too */
        char *s = repeat("x", "+x", 100000, "", "", 0);
        util_buf b;
        util_diag d = {0};
        util_buf_init(&b);
        int rc = parse_print(s, &b, &d, NULL);
        const char *p = util_buf_str(&b);
        size_t n = strlen(p);
        CHECK(rc == RED_OK && n == 6 * 100000 + 1 && strncmp(p + 99999, "(x + x) + x)", 12) == 0 &&
                  strcmp(p + n - 10, " + x) + x)") == 0,
              "x+x+... 100 001 terms printed: %d, %zu bytes", rc, n);
        util_buf_free(&b);
        free(s);
    }
    limit_ok(repeat("", "-", 510, "(x+x+x)", "", 0), "510 unary minuses of a chain");
    limit_err(repeat("", "-", 511, "(x+x+x)", "", 0), "511 unary minuses of a chain",
              "1:1: expression nested too deeply: the limit is 512 levels");

    /* The parser's stack: the most it holds for input within the limits
     * (seven symbols per level, one more per bracket; `sum(` needs one
     * bracket level of its own) still fits. */
    {
        char *inner = repeat("", "sum(x) over j, i in 0..", 256, "n", "", 0);
        char *s = repeat("", "sum(x) over j, i in 0..(", 255, inner, ")", 255);
        limit_ok(s, "255 + 256 sums in bounds with brackets");
        free(inner);
    }
    limit_ok(repeat("", "reduce(+, a ? b : ", 255, "x", ")", 255), "255 reduces and conditionals");
    limit_err(repeat("", "-", 100000, "x", "", 0), "100000 unary minuses",
              "1:4096: expression nested too deeply: the limit is 512 levels");
    limit_err(repeat("", "!", 1000000, "x", "", 0), "a million !",
              "1:4096: expression nested too deeply: the limit is 512 levels");

    /* The two 10 MB parses below are timed to catch a parser gone quadratic, which would take
     * hours at this size.  An unoptimised build with ASan runs lemon's tables about ten times
     * slower: CI's took 5.05 s of CPU for the list (against 5.0 allowed then) while the
     * Release build takes well under one. */
#if defined(__SANITIZE_ADDRESS__) || !defined(__OPTIMIZE__)
    const double slow = 10.0;
#else
    const double slow = 1.0;
#endif
    /* 10 MB of x+x+...+x: a left-associative chain is not nesting, but it is
     * bounded in size like any other text, without recursion and without
     * reading the rest. */
    {
        char *s = repeat("x", "+x", 5 * 1024 * 1024, "", "", 0);
        clock_t t0 = clock();
        util_diag d = {0};
        int rc = parse_status(s, &d);
        double secs = (double)(clock() - t0) / CLOCKS_PER_SEC;
        CHECK(rc == RED_ERR_LIMIT && strstr(d.msg, "expression has more than 1048576 syntax-tree nodes: the limit is 1048576 (RED_OPT_MAX_NODES)"),
              "10 MB chain: %d %s", rc, d.msg);
        CHECK(secs < 2.0 * slow, "10 MB chain took %.2f s", secs);
        free(s);
    }
    /* 10 MB of results, x,x,x,...: breadth is bounded too. */
    {
        char *s = repeat("x", ",x", 5 * 1024 * 1024, "", "", 0);
        clock_t t0 = clock();
        util_diag d = {0};
        int rc = parse_status(s, &d);
        double secs = (double)(clock() - t0) / CLOCKS_PER_SEC;
        CHECK(rc == RED_ERR_LIMIT && strstr(d.msg, "expression has more than 1048576 syntax-tree nodes: the limit is 1048576 (RED_OPT_MAX_NODES)"),
              "10 MB list: %d %s", rc, d.msg);
        CHECK(secs < 5.0 * slow, "10 MB list took %.2f s", secs);
        free(s);
    }
    /* 10 MB of blank lines and comments is just empty. */
    {
        char *s = repeat("", "\n# c\n;", 2 * 1024 * 1024, "x", "", 0);
        limit_ok(s, "10 MB of separators then x");
    }

    /* Huge literals: long digit strings are read exactly, not overflowed. */
    limit_ok(repeat("0", "0", 10000, "1", "", 0), "10001-digit integer with leading zeros");
    limit_ok(repeat("1.", "0", 10000, "1", "", 0), "10000-digit decimal");
    {
        char *s = repeat("", "9", 10000, "", "", 0);
        util_diag d = {0};
        CHECK(parse_status(s, &d) == RED_ERR_SYNTAX && strstr(d.msg, "integer literal too large"),
              "10000 nines: %s", d.msg);
        CHECK(strlen(d.msg) < 400, "a huge literal gives a short message");
        free(s);
    }
    {
        util_arena a;
        util_arena_init(&a);
        ast_program *p;
        util_diag d = {0};
        int rc = ast_parse(&a, "0x8000000000000000 + 1.7976931348623157e308", &p, &d, NULL);
        CHECK(rc == RED_OK && p->stmts[0].exprs[0]->args[0]->u.ival == 0x8000000000000000u &&
                  p->stmts[0].exprs[0]->args[1]->u.fval == 1.7976931348623157e308,
              "literal values");
        util_arena_free(&a);
    }
}

/* strtod reads the locale's decimal point; a host that set a locale with a
 * decimal comma must not change what 1.5 means. */
static void test_locale(void)
{
    const char *names[] = {"de_DE.UTF-8", "de_DE.utf8", "fr_FR.UTF-8", "ru_RU.UTF-8", NULL};
    for (int i = 0; names[i]; i++) {
        if (!setlocale(LC_NUMERIC, names[i])) continue;
        util_arena a;
        util_arena_init(&a);
        ast_program *p;
        util_diag d = {0};
        int rc = ast_parse(&a, "2.5e1 + 1.25", &p, &d, NULL);
        CHECK(rc == RED_OK && p->stmts[0].exprs[0]->args[0]->u.fval == 25.0 &&
                  p->stmts[0].exprs[0]->args[1]->u.fval == 1.25,
              "decimal literal under locale %s", names[i]);
        util_arena_free(&a);
        setlocale(LC_NUMERIC, "C");
        return;
    }
    printf("note: no locale with a decimal comma installed; locale test skipped\n");
}

/* ---- Random input ------------------------------------------------------------ */

static unsigned long rng_state = 12345;
static unsigned rnd(unsigned n)
{
    rng_state = rng_state * 6364136223846793005UL + 1442695040888963407UL;
    return (unsigned)(rng_state >> 33) % n;
}

/* A loosely grammatical expression: most of them parse, some do not. */
static void gen_expr(util_buf *b, int depth)
{
    static const char *leaf[] = {"x", "y", "n", "0", "1", "2.5", "0x1f", "true", "inf", "a.0"};
    static const char *bin[] = {"+", "-", "*", "/", "%", "&", "|", "^", "<<", ">>", "<",
                                "<=", ">", ">=", "==", "!=", "&&", "||", "**"};
    static const char *red[] = {"+", "*", "&&", "||", "min", "cmul"};
    if (depth <= 0) {
        util_buf_puts(b, leaf[rnd(10)]);
        return;
    }
    switch (rnd(11)) {
    case 0: util_buf_puts(b, leaf[rnd(10)]); break;
    case 1:
    case 2:
        gen_expr(b, depth - 1);
        util_buf_printf(b, rnd(2) ? " %s " : "%s", bin[rnd(19)]);
        gen_expr(b, depth - 1);
        break;
    case 3: util_buf_puts(b, rnd(2) ? "-" : "!"); gen_expr(b, depth - 1); break;
    case 4:
        gen_expr(b, depth - 1); util_buf_puts(b, " ? ");
        gen_expr(b, depth - 1); util_buf_puts(b, " : ");
        gen_expr(b, depth - 1);
        break;
    case 5:
        util_buf_puts(b, "(");
        gen_expr(b, depth - 1);
        if (rnd(2)) { util_buf_puts(b, ", "); gen_expr(b, depth - 1); }
        util_buf_puts(b, ")");
        if (!rnd(3)) util_buf_puts(b, ".1");
        break;
    case 6: util_buf_puts(b, "v["); gen_expr(b, depth - 1); util_buf_puts(b, ", i]"); break;
    case 7:
    case 8:
        if (rnd(2)) {
            util_buf_printf(b, "reduce(%s, ", red[rnd(6)]);
        } else {
            util_buf_puts(b, "sum(");
        }
        gen_expr(b, depth - 1);
        util_buf_puts(b, ")");
        if (rnd(2)) {
            util_buf_puts(b, " over i");
            if (rnd(2)) { util_buf_puts(b, " in 0.."); gen_expr(b, depth - 1); }
            if (rnd(2)) util_buf_puts(b, ", j");
        }
        if (rnd(3) == 0) { util_buf_puts(b, " by "); gen_expr(b, depth - 1); }
        break;
    case 9: util_buf_puts(b, "f("); gen_expr(b, depth - 1); util_buf_puts(b, ")"); break;
    default: util_buf_puts(b, "(("); gen_expr(b, depth - 1); util_buf_puts(b, "))"); break;
    }
}

/* Whatever parses must print to text that parses to the same print: the
 * canonical form is a fixed point.  Token soup must never crash. */
static void test_random(void)
{
    static const char *tok[] = {"x", "1", "2.5", "(", ")", "[", "]", ",", ";", "\n", "+", "-",
                                "*", "?", ":", "=", ".", "..", "0", "over", "in", "by",
                                "reduce(", "sum(", "op", "identity", "&&", "#c\n", "a.0", "**"};
    int parsed = 0, roundtrip_bad = 0, silent = 0;
    for (int it = 0; it < 30000; it++) {
        util_buf src, p1, p2;
        util_diag d = {0};
        util_buf_init(&src);
        util_buf_init(&p1);
        util_buf_init(&p2);
        if (it % 3 == 0) {
            int n = 1 + (int)rnd(12);
            for (int k = 0; k < n; k++) util_buf_printf(&src, "%s ", tok[rnd(30)]);
        } else {
            gen_expr(&src, 1 + (int)rnd(6));
            if (rnd(4) == 0) { util_buf_puts(&src, rnd(2) ? "; " : "\n"); gen_expr(&src, 3); }
        }
        if (parse_print(util_buf_str(&src), &p1, &d, NULL) == RED_OK) {
            parsed++;
            if (parse_print(util_buf_str(&p1), &p2, &d, NULL) != RED_OK ||
                strcmp(util_buf_str(&p1), util_buf_str(&p2)) != 0) {
                if (roundtrip_bad++ < 5)
                    printf("round trip: \"%s\"\n  -> \"%s\"\n  -> \"%s\"\n", util_buf_str(&src),
                           util_buf_str(&p1), util_buf_str(&p2));
            }
        } else if (d.code == RED_OK || !d.msg[0]) {
            if (silent++ < 5) printf("no message for \"%s\"\n", util_buf_str(&src));
        }
        util_buf_free(&src);
        util_buf_free(&p1);
        util_buf_free(&p2);
    }
    CHECK(roundtrip_bad == 0, "%d random programs did not round-trip", roundtrip_bad);
    CHECK(silent == 0, "%d random errors came without a message", silent);
    CHECK(parsed > 10000, "only %d random programs parsed", parsed);
    if (getenv("TEST_PARSE_VERBOSE")) printf("random: %d of 30000 parsed\n", parsed);
}

int main(void)
{
    test_constructs();
    test_errors();
    test_positions();
    test_limits();
    test_locale();
    test_random();
    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}
