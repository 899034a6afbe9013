/* msgsend_abi.c - the stand-in's objc_msgSend trampoline
 * (tests/objc_standin/msgsend.S) passes every kind of argument and result
 * through untouched: integers past the argument registers (on the stack),
 * doubles past the vector registers, a float and a double returned, MTLSize
 * by value (x86-64: on the stack; AArch64: by reference) and, on AArch64,
 * returned through x8 (x86-64 returns structs through objc_msgSend_stret,
 * which nothing here needs), a BOOL. Built with its own mq_standin_lookup, so it runs
 * alone: natively in make test, and for AArch64 under qemu-user
 * (tests/test_msgsend_arm64.sh), the ABI of an arm64 Linux runner or a Mac. */
#include <stdio.h>
#include <string.h>

#include "objc_rt.h"

typedef void (*IMP)(void);
void objc_msgSend(void); /* msgsend.S */
/* reached through a pointer, as objc_rt.c reaches the real one (a call
 * through a cast of the function itself is one the compiler may refuse) */
static void (*volatile msg_send)(void) = objc_msgSend;

static int failed, passed;
#define EXPECT(cond, ...)                                                                         \
    do {                                                                                          \
        if (cond)                                                                                 \
            passed++;                                                                             \
        else {                                                                                    \
            failed++;                                                                             \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);                                           \
            printf(__VA_ARGS__);                                                                  \
            printf("\n");                                                                         \
        }                                                                                         \
    } while (0)

static long ints(id self, SEL s, long a, long b, long c, long d, long e, long f, long g, long h,
                 long i, long j)
{
    (void)self, (void)s;
    return a + 2 * b + 3 * c + 4 * d + 5 * e + 6 * f + 7 * g + 8 * h + 9 * i + 10 * j;
}

static double doubles(id self, SEL s, double a, int n, double b, double c, double d, double e,
                      double f, double g, double h, double i, double j)
{
    (void)self, (void)s;
    return a + 2 * b + 3 * c + 4 * d + 5 * e + 6 * f + 7 * g + 8 * h + 9 * i + 10 * j + 100 * n;
}

static float halve(id self, SEL s, float x) { return (void)self, (void)s, x / 2; }

static NSUInteger sizes(id self, SEL s, MTLSize grid, MTLSize threads, NSUInteger tail)
{
    (void)self, (void)s;
    return grid.width + 10 * grid.height + 100 * grid.depth + 1000 * threads.width +
           10000 * threads.height + 100000 * threads.depth + 1000000 * tail;
}

static MTLSize make_size(id self, SEL s, NSUInteger w)
{
    (void)self, (void)s;
    return (MTLSize){w, w + 1, w + 2};
}

static BOOL is_self(id self, SEL s, id other) { return (void)s, self == other; }

static const struct {
    const char *sel;
    IMP imp;
} methods[] = {{"ints", (IMP)ints},         {"doubles", (IMP)doubles}, {"halve", (IMP)halve},
               {"sizes", (IMP)sizes},       {"makeSize", (IMP)make_size},
               {"isSelf", (IMP)is_self}};

static int lookups;
/* What the real stand-in's runtime.c answers; here, by selector name. */
IMP mq_standin_lookup(id self, SEL sel);
IMP mq_standin_lookup(id self, SEL sel)
{
    (void)self;
    lookups++;
    for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++)
        if (!strcmp(methods[i].sel, (const char *)sel))
            return methods[i].imp;
    return NULL;
}

int main(void)
{
    static int object;
    id obj = &object;
    int sent = 5; /* messages below on every target */
    long r = ((long (*)(id, SEL, long, long, long, long, long, long, long, long, long, long))
                  msg_send)(obj, "ints", 1, 2, 3, 4, 5, 6, 7, 8, 9, 10);
    EXPECT(r == 385, "ten longs (four on the x86-64 stack, two on AArch64's): 385, got %ld", r);
    double d = ((double (*)(id, SEL, double, int, double, double, double, double, double, double,
                            double, double, double))msg_send)(obj, "doubles", 1, 7, 2, 3, 4, 5,
                                                                 6, 7, 8, 9, 10);
    EXPECT(d == 1 + 4 + 9 + 16 + 25 + 36 + 49 + 64 + 81 + 100 + 700,
           "ten doubles and an int (two doubles on the stack): 1085, got %g", d);
    float f = ((float (*)(id, SEL, float))msg_send)(obj, "halve", 3.0f);
    EXPECT(f == 1.5f, "a float returned: 1.5, got %g", (double)f);
    NSUInteger u = ((NSUInteger(*)(id, SEL, MTLSize, MTLSize, NSUInteger))msg_send)(
        obj, "sizes", (MTLSize){1, 2, 3}, (MTLSize){4, 5, 6}, 7);
    EXPECT(u == 7654321, "two MTLSize by value and a tail argument: 7654321, got %lu",
           (unsigned long)u);
#if defined(__aarch64__) || defined(__arm64__)
    /* AArch64 returns a large struct through x8 with plain objc_msgSend;
     * x86-64 would need objc_msgSend_stret (the receiver moves to rsi), which
     * metal.c never calls: it receives no struct */
    MTLSize m = ((MTLSize(*)(id, SEL, NSUInteger))msg_send)(obj, "makeSize", 40);
    EXPECT(m.width == 40 && m.height == 41 && m.depth == 42,
           "an MTLSize returned through the indirect result: {40,41,42}, got {%lu,%lu,%lu}",
           (unsigned long)m.width, (unsigned long)m.height, (unsigned long)m.depth);
    sent++;
#endif
    BOOL b = ((BOOL(*)(id, SEL, id))msg_send)(obj, "isSelf", obj);
    EXPECT(b, "a BOOL returned: YES");
    EXPECT(lookups == sent, "one lookup per message: %d, got %d", sent, lookups);
    printf("msgsend_abi: %d passed, %d failed\n", passed, failed);
    return failed != 0;
}
