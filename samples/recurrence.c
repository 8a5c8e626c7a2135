/*
 * recurrence.c -- a linear recurrence h[t] = a[t] * h[t-1] + b[t] (h[-1] = 0) as a scan:
 * each step is the affine map h -> a*h + b, and composing maps is associative but not
 * commutative, so an `ordered` operator over (a, b) pairs scans them, field 1 of the
 * running composition being h.  Checked against the sequential loop, exactly: the
 * arithmetic is in integers modulo a prime, where any misordering would show.
 */
#include <redjit.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define P 1000003   /* a prime: (P - 1)^2 + P - 1 fits in int64 */

static const char *text =
    "ordered op aff(p, q) = ((p.0 * q.0) % 1000003, (p.1 * q.0 + q.1) % 1000003) identity (1, 0)\n"
    "(scan(aff, (a[t], b[t])) over t).1";

int main(void)
{
    enum { N = 300000 };
    int64_t *a = malloc(N * sizeof *a), *b = malloc(N * sizeof *b), *h = malloc(N * sizeof *h);
    if (!a || !b || !h) {
        fprintf(stderr, "recurrence: out of memory\n");
        return 1;
    }
    uint64_t s = 11;
    for (int t = 0; t < N; t++) {
        s = s * 6364136223846793005u + 1442695040888963407u;
        a[t] = (int64_t)((s >> 20) % P);
        s = s * 6364136223846793005u + 1442695040888963407u;
        b[t] = (int64_t)((s >> 20) % P);
    }

    red_ctx *ctx;
    int rc = red_open(&ctx);
    if (rc != RED_OK) {
        fprintf(stderr, "recurrence: red_open: %s\n", red_errstr(rc));
        return 1;
    }
    red_binding bind[2] = {{.name = "a"}, {.name = "b"}};
    red_array_init(&bind[0].array, a, RED_I64, 1, (const int64_t[]){N}, NULL);
    red_array_init(&bind[1].array, b, RED_I64, 1, (const int64_t[]){N}, NULL);
    red_array out;   /* the scan's h, written straight into our array */
    red_array_init(&out, h, RED_I64, 1, (const int64_t[]){N}, NULL);
    int count = 0;
    rc = red_eval(ctx, text, bind, 2, &out, 1, &count);
    if (rc != RED_OK) {
        fprintf(stderr, "recurrence: red_eval: %s\n%s\n", red_errstr(rc), red_errmsg(ctx));
        red_close(ctx);
        return 1;
    }
    red_close(ctx);

    int64_t want = 0;
    int bad = -1;
    for (int t = 0; t < N && bad < 0; t++) {
        want = (a[t] * want + b[t]) % P;
        if (h[t] != want) bad = t;
    }
    printf("recurrence: %d steps, h[%d] = %lld%s\n", N, N - 1, (long long)h[N - 1],
           bad < 0 ? ", equal to the sequential loop at every step" : "");
    free(a);
    free(b);
    free(h);
    if (count != 1 || bad >= 0) {
        fprintf(stderr, "recurrence: MISMATCH at step %d\n", bad);
        return 1;
    }
    return 0;
}
