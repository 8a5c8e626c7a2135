/*
 * repl_pty_test.c -- drives the interactive prompt through a pseudo-terminal,
 * as a person would: types statements and keys (Tab, Ctrl-C, arrows) and
 * checks what comes back, including history kept across two sessions and
 * Ctrl-C stopping a long evaluation.
 *
 * usage: repl_pty_test REDJIT WORKDIR
 */
#define _DEFAULT_SOURCE

#include <errno.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Sanitizer builds start slowly; nothing here takes long otherwise. */
#define TIMEOUT_S 30.0

typedef struct term {
    pid_t pid;
    int fd;
    char buf[1 << 17];
    size_t len, mark;   /* output seen; where the next expect starts */
} term;

static int passed, failed;
static const char *redjit, *workdir;
static char histpath[4400];

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Start the prompt, with one extra argument `arg` unless it is NULL. */
static bool term_start(term *t, const char *arg)
{
    memset(t, 0, sizeof *t);
    struct winsize ws = {40, 120, 0, 0};
    t->pid = forkpty(&t->fd, NULL, NULL, &ws);
    if (t->pid < 0) {
        perror("forkpty");
        return false;
    }
    if (t->pid == 0) {
        setenv("REDJIT_HISTORY", histpath, 1);
        setenv("TERM", "xterm", 1);
        unsetenv("EDITRC");
        setenv("HOME", workdir, 1);   /* no ~/.editrc of the person running the tests */
        execl(redjit, redjit, arg, (char *)NULL);
        _exit(127);
    }
    return true;
}

/* Read what is available for up to `wait` seconds. */
static void term_pump(term *t, double wait)
{
    struct pollfd p = {t->fd, POLLIN, 0};
    if (poll(&p, 1, (int)(wait * 1000)) <= 0)
        return;
    ssize_t n = read(t->fd, t->buf + t->len, sizeof t->buf - 1 - t->len);
    if (n > 0) {
        t->len += (size_t)n;
        t->buf[t->len] = '\0';
    }
}

/* The line editor puts the terminal in raw mode around drawing the prompt;
 * a control key that arrives before that is the terminal's to handle. */
static void settle(term *t)
{
    double end = now_s() + 0.2;
    while (now_s() < end)
        term_pump(t, 0.05);
}

static void term_send(term *t, const char *s)
{
    size_t n = strlen(s);
    while (n > 0) {
        ssize_t w = write(t->fd, s, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return;
        s += w;
        n -= (size_t)w;
    }
}

/* Wait until `needle` appears after the mark; the mark moves past it. */
static bool term_wait(term *t, const char *needle)
{
    double end = now_s() + TIMEOUT_S;
    for (;;) {
        char *hit = strstr(t->buf + t->mark, needle);
        if (hit) {
            t->mark = (size_t)(hit - t->buf) + strlen(needle);
            return true;
        }
        if (now_s() > end || t->len + 1 >= sizeof t->buf)
            return false;
        term_pump(t, 0.05);
    }
}

static void check(term *t, bool ok, const char *what)
{
    if (ok) {
        passed++;
        return;
    }
    failed++;
    size_t from = t->len > 600 ? t->len - 600 : 0;
    fprintf(stderr, "FAIL: %s\n  last output: ", what);
    for (size_t i = from; i < t->len; i++) {
        unsigned char c = (unsigned char)t->buf[i];
        if (c == '\n' || (c >= 32 && c < 127))
            fputc(c, stderr);
        else
            fprintf(stderr, "\\x%02x", c);
    }
    fputc('\n', stderr);
}

/* Type `input` and expect `output` after it. */
static void expect(term *t, const char *input, const char *output, const char *what)
{
    if (input)
        term_send(t, input);
    check(t, term_wait(t, output), what);
}

/* Whether `needle` occurs in the output from `from` up to the mark. */
static bool seen_between(term *t, size_t from, const char *needle)
{
    char save = t->buf[t->mark];
    t->buf[t->mark] = '\0';
    bool r = strstr(t->buf + from, needle) != NULL;
    t->buf[t->mark] = save;
    return r;
}

/* Wait for the first of `a` and `b` after the mark: 1 for a, 2 for b (the
 * mark moves past it), 0 after the timeout. */
static int term_wait2(term *t, const char *a, const char *b, double timeout)
{
    double end = now_s() + timeout;
    for (;;) {
        char *ha = strstr(t->buf + t->mark, a), *hb = strstr(t->buf + t->mark, b);
        if (ha && (!hb || ha <= hb)) {
            t->mark = (size_t)(ha - t->buf) + strlen(a);
            return 1;
        }
        if (hb) {
            t->mark = (size_t)(hb - t->buf) + strlen(b);
            return 2;
        }
        if (now_s() > end || t->len + 1 >= sizeof t->buf)
            return 0;
        term_pump(t, 0.02);
    }
}

static int term_exit(term *t)
{
    double end = now_s() + TIMEOUT_S;
    int st;
    for (;;) {
        pid_t r = waitpid(t->pid, &st, WNOHANG);
        if (r == t->pid)
            break;
        if (now_s() > end) {
            kill(t->pid, SIGKILL);
            waitpid(t->pid, &st, 0);
            close(t->fd);
            return -1;
        }
        term_pump(t, 0.05);
    }
    close(t->fd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void first_session(void)
{
    term t;
    char line[8192];
    if (!term_start(&t, NULL)) {
        failed++;
        return;
    }
    expect(&t, NULL, "redjit> ", "the prompt appears");
    expect(&t, "1 + 2\r", "\n3\r\n", "a statement's result");
    expect(&t, "sum(iota(\r", "...> ", "an open bracket asks for more with the secondary prompt");
    expect(&t, "4))\r", "\n6\r\n", "the continued statement runs");
    expect(&t, NULL, "redjit> ", "the prompt is back");
    settle(&t);
    expect(&t, "\x1b[A", "sum(iota(", "Up brings back the statement of two lines ...");
    expect(&t, NULL, "4))", "... whole, both lines at once");
    expect(&t, "\r", "\n6\r\n", "... and it runs again");
    expect(&t, "x = 2 *\r", "...> ", "a trailing operator asks for more");
    expect(&t, "21\r", "redjit> ", "the continued assignment runs");
    expect(&t, "x\r", "\n42\r\n", "the value was stored");

    expect(&t, "max(abs(1 - yy))\r", "unknown name 'yy'", "an error prints its message");
    expect(&t, NULL, "^~", "... with a caret");
    expect(&t, "6*7\r", "\n42\r\n", "the session goes on after an error");

    /* Keys typed before the prompt is drawn are handled by the terminal,
     * not by the line editor: wait for each prompt as a person would. */
    expect(&t, NULL, "redjit> ", "the prompt is back");
    size_t from = t.mark;
    expect(&t, "sum(zzz", "zzz", "typing a line");
    settle(&t);
    term_send(&t, "\x03");   /* Ctrl-C */
    expect(&t, NULL, "redjit> ", "Ctrl-C gives a new prompt");
    expect(&t, "2*21\r", "\n42\r\n", "... and the session goes on");
    check(&t, !seen_between(&t, from, "unknown name 'zzz'"), "the interrupted line was not run");
    expect(&t, NULL, "redjit> ", "the prompt is back");
    expect(&t, "sum(1,\r", "...> ", "a continuation line");
    settle(&t);
    term_send(&t, "\x03");
    expect(&t, NULL, "redjit> ", "Ctrl-C on a continuation line gives the first prompt");
    expect(&t, "5*5\r", "\n25\r\n", "Ctrl-C drops an unfinished statement");

    expect(&t, "abcdef = 5\r", "redjit> ", "an assignment");
    expect(&t, "abc\t", "def", "Tab completes a session name");
    expect(&t, "\r", "\n5\r\n", "... and the completed name evaluates");
    expect(&t, ":he\t", "lp", "Tab completes :he to :help");
    expect(&t, "\r", "commands:", "... which runs");
    expect(&t, NULL, "keeps its history in ", ":help says where the history is kept ...");
    expect(&t, NULL, histpath, "... naming the file");
    expect(&t, ":vars\r", "abcdef", ":vars lists the values");
    expect(&t, NULL, "i64", ":vars shows the dtype");
    expect(&t, NULL, "host", ":vars shows where it lives");

    expect(&t, ":seed 7\r", "redjit> ", ":seed");
    expect(&t, "a = rand(5)\r", "redjit> ", "a generator");
    expect(&t, ":seed 7\r", "redjit> ", ":seed again");
    expect(&t, "b = rand(5)\r", "redjit> ", "the same generator");
    expect(&t, "all(a == b), min(a) >= 0, max(a) < 1\r", "\ntrue\r\ntrue\r\ntrue\r\n",
           "the same seed gives the same values (one result a line, as redjit -e prints them)");
    expect(&t, ":seed 8\r", "redjit> ", ":seed another");
    expect(&t, "c = rand(5)\r", "redjit> ", "another draw");
    expect(&t, "any(a != c)\r", "true", "another seed gives other values");
    expect(&t, "y = 1 + 0.001 * randn(1000)\r", "redjit> ", "a generator inside arithmetic");
    expect(&t, "max(abs(y - 1)) < 0.01\r", "true", "its values");

    snprintf(line, sizeof line, "v = iota(6)\r:save v %s/v.npy\r:load w %s/v.npy\r", workdir, workdir);
    expect(&t, line, "redjit> ", ":save / :load .npy");
    expect(&t, "all(v == w)\r", "true", ".npy round trip");
    snprintf(line, sizeof line, "m = rand(3, 4)\r:save m %s/m.csv\r:load m2 %s/m.csv\r", workdir, workdir);
    expect(&t, line, "redjit> ", ":save / :load .csv");
    /* Tab after :load NAME completes file names: one match, then a list */
    settle(&t);
    snprintf(line, sizeof line, ":load w2 %s/v.n\t", workdir);
    expect(&t, line, "v.n", "typing :load NAME and the start of a file name");
    expect(&t, NULL, "py", "Tab completes the file of :load NAME");
    expect(&t, "\r", "redjit> ", "... which loads");
    expect(&t, "all(v == w2)\r", "true", "... the file named");
    settle(&t);
    snprintf(line, sizeof line, ":save v %s/\t", workdir);
    expect(&t, line, "state/", "Tab after :save NAME lists the directory (a directory with '/')");
    check(&t, seen_between(&t, t.mark > 200 ? t.mark - 200 : 0, "m.csv"), "... and its files");
    expect(&t, NULL, "redjit> ", "the line is drawn again under the list");
    settle(&t);
    term_send(&t, "\x03");
    expect(&t, NULL, "redjit> ", "Ctrl-C drops the line");
    expect(&t, "max(abs(m - m2)) < 1e-6, sum(m2[i,j] * 0 + 1)\r", "\ntrue\r\n12\r\n", ".csv round trip, 3 x 4");
    expect(&t, "op mx(a, b) = a > b ? a : b identity -inf\r", "redjit> ", "an operator definition");
    expect(&t, "reduce(mx, v)\r", "\n5\r\n", "the operator is kept for later statements");
    expect(&t, "sum(iota(4)), max(iota(4))\r", "\n6\r\n3\r\n", "two results");
    term_send(&t, ":quit\r");
    check(&t, term_exit(&t) == 0, ":quit leaves with status 0");
}

/* Ctrl-C while a statement is being evaluated: the library stops it at its
 * next safe point (red_interrupt), "interrupted" is printed, nothing is
 * stored, and the session goes on.  The workload is a reduction over an
 * n x n domain built from two small arrays (little memory): n = 1e5 takes
 * seconds on two cores, far longer than an interrupt needs.  Should it end
 * before the key arrives, it is tried once more with n = 3e5.  On the CPU
 * executor, which stops every 64K elements: a GPU stops between kernels,
 * and a GPU finishes this sum before the key arrives. */
static void interrupt_session(void)
{
    term t;
    char line[256];
    if (!term_start(&t, "--device=cpu")) {
        failed++;
        return;
    }
    expect(&t, NULL, "redjit> ", "a session for Ctrl-C starts");
    static const int sizes[] = {100000, 300000};
    int got = 0;
    double latency = 0;
    for (int k = 0; k < 2 && got != 1; k++) {
        snprintf(line, sizeof line, "a = rand(%d)\r", sizes[k]);
        expect(&t, line, "redjit> ", "an array for a long reduction");
        snprintf(line, sizeof line, "b = rand(%d)\r", sizes[k]);
        expect(&t, line, "redjit> ", "another");
        expect(&t, "z = sum(sqrt(a[i] * b[j]))\r", "b[j]))", "a long evaluation starts");
        /* about 100 ms into the evaluation */
        double until = now_s() + 0.1;
        while (now_s() < until)
            term_pump(&t, 0.02);
        double sent = now_s();
        term_send(&t, "\x03");
        /* "interrupted" comes before the next prompt; a prompt first means
         * the evaluation had ended and the key only cleared the next line */
        got = term_wait2(&t, "interrupted", "redjit> ", TIMEOUT_S);
        latency = now_s() - sent;
        if (got == 2)
            expect(&t, NULL, "redjit> ", "the prompt after a Ctrl-C that came too late");
    }
    check(&t, got == 1, "Ctrl-C during an evaluation prints \"interrupted\"");
    if (got == 1) {
        /* A safe point comes every 64K elements: well under a second, even
         * in a sanitizer build.  Without red_interrupt the sum would run on
         * for seconds and only then say "interrupted". */
        if (latency >= 2.0)
            fprintf(stderr, "interrupt latency %.3f s\n", latency);
        check(&t, latency < 2.0, "the evaluation stops at once");
    }
    expect(&t, NULL, "redjit> ", "the prompt is back after the interrupt");
    expect(&t, "z\r", "unknown name 'z'", "an interrupted assignment stores nothing");
    expect(&t, "sum(iota(10)) + 32\r", "\n77\r\n", "the next evaluation works");
    expect(&t, "count(a >= 0) > 0, all(b < 1)\r", "\ntrue\r\ntrue\r\n", "the session's arrays are still there");
    term_send(&t, ":quit\r");
    check(&t, term_exit(&t) == 0, ":quit after an interrupt leaves with status 0");
}

static void second_session(void)
{
    term t;
    struct stat st;
    memset(&t, 0, sizeof t);
    check(&t, stat(histpath, &st) == 0 && st.st_size > 0, "the history file was written");
    if (!term_start(&t, NULL)) {
        failed++;
        return;
    }
    expect(&t, NULL, "redjit> ", "a second session starts");
    settle(&t);
    /* Up twice: past ":quit" to the two results asked for in the first session. */
    expect(&t, "\x1b[A\x1b[A", "max(iota(4))", "history from the first session");
    expect(&t, "\r", "\n6\r\n3\r\n", "a recalled statement runs");
    expect(&t, NULL, "redjit> ", "the prompt is back");
    settle(&t);
    term_send(&t, "\x04");   /* Ctrl-D */
    int rc = term_exit(&t);
    if (rc != 0)
        fprintf(stderr, "exit status %d\n", rc);
    check(&t, rc == 0, "Ctrl-D leaves with status 0");
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: repl_pty_test REDJIT WORKDIR\n");
        return 2;
    }
    redjit = argv[1];
    static char dir[4096];
    snprintf(dir, sizeof dir, "%s/pty.XXXXXX", argv[2]);
    mkdir(argv[2], 0755);
    if (!mkdtemp(dir)) {
        perror(dir);
        return 2;
    }
    workdir = dir;
    char sub[4200];
    snprintf(sub, sizeof sub, "%s/state", dir);
    mkdir(sub, 0755);
    snprintf(histpath, sizeof histpath, "%s/history", sub);
    first_session();
    second_session();
    interrupt_session();
    static const char *const made[] = {"v.npy", "m.csv", "state/history", "state", "", NULL};
    for (int i = 0; made[i]; i++) {
        snprintf(sub, sizeof sub, "%s/%s", dir, made[i]);
        (void)(remove(sub) == 0);
    }
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
