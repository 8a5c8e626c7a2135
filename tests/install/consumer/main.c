/*
 * main.c -- the smallest useful redjit program, built against an installed redjit by the
 * install test: checks that header and library versions agree and that sum(x) is right.
 */
#include <redjit.h>
#include <stdio.h>

int main(void)
{
    if (red_version_number() != REDJIT_VERSION_NUMBER) {
        fprintf(stderr, "header is %s but the library is %s\n",
                REDJIT_VERSION_STRING, red_version_string());
        return 1;
    }

    enum { N = 1000 };
    float x[N];
    for (int i = 0; i < N; i++)
        x[i] = (float)(i + 1);          /* 1 + 2 + ... + 1000 = 500500, exact in f32 */

    red_ctx *ctx;
    int rc = red_open(&ctx);
    if (rc != RED_OK) {
        fprintf(stderr, "red_open: %s\n", red_errstr(rc));
        return 1;
    }
    red_binding b = {.name = "x"};
    red_array_init(&b.array, x, RED_F32, 1, (const int64_t[]){N}, NULL);

    double s = 0;
    rc = red_eval_f64(ctx, "sum(x)", &b, 1, &s);
    if (rc != RED_OK) {
        fprintf(stderr, "red_eval_f64: %s\n%s\n", red_errstr(rc), red_errmsg(ctx));
        red_close(ctx);
        return 1;
    }
    red_close(ctx);

    printf("redjit %s: sum(x) = %.1f\n", red_version_string(), s);
    return s == 500500.0 ? 0 : 1;
}
