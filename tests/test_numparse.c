/* test_numparse.c - the one number parser every file and flag goes through:
 * text that is not wholly a number, a number past its range or one that
 * wraps an int, NaN and infinities are refused with a reason quoting the
 * text; what is accepted is exactly the number written. */
#include <math.h>
#include <string.h>

#include "check.h"
#include "cli.h"
#include "numparse.h"

int main(void)
{
    char why[200];
    int v = -7;
    long l;
    double d;
    static const char *const not_int[] = {"", " 5", "5 ", "5x", "1e10", "0x10", "1.0", "--1", "nan"};
    for (size_t i = 0; i < sizeof not_int / sizeof not_int[0]; i++) {
        why[0] = '\0';
        CHECK(mq_parse_int(not_int[i], 0, 100, &v, why, sizeof why) != 0 &&
                  strstr(why, "is not an integer"),
              "'%s' is refused as not an integer (why: '%s')", not_int[i], why);
    }
    CHECK(mq_parse_int("4294967297", 0, 1 << 30, &v, why, sizeof why) != 0 &&
              strstr(why, "'4294967297' is out of range (0 to 1073741824)"),
          "2^32+1 is out of range, not 1 (why: '%s')", why);
    CHECK(mq_parse_long("99999999999999999999", 0, 10, &l, why, sizeof why) != 0 &&
              strstr(why, "out of range"),
          "a long overflow (ERANGE) is out of range (why: '%s')", why);
    CHECK(mq_parse_int("-3", 1, 10, &v, why, sizeof why) != 0, "-3 is below 1");
    CHECK(mq_parse_int("+42", 0, 100, &v, why, sizeof why) == 0 && v == 42, "+42 is 42");
    static const char *const not_finite[] = {"nan", "inf", "-inf", "1e999", "NAN"};
    for (size_t i = 0; i < sizeof not_finite / sizeof not_finite[0]; i++)
        CHECK(mq_parse_double(not_finite[i], -1e308, 1e308, &d, why, sizeof why) != 0 &&
                  strstr(why, "is not a finite number"),
              "'%s' is refused as not finite (why: '%s')", not_finite[i], why);
    CHECK(mq_parse_double("1e300", 0, 1e6, &d, why, sizeof why) != 0 &&
              strstr(why, "out of range"),
          "1e300 is out of the range 0..1e6 (why: '%s')", why);
    CHECK(mq_parse_double("2.5e-3", 0, 1, &d, why, sizeof why) == 0 && d == 2.5e-3,
          "2.5e-3 reads as 2.5e-3");
    CHECK(mq_parse_double("1e-320", 0, 1, &d, why, sizeof why) == 0 && d > 0,
          "a subnormal is a finite number, not an error");
    CHECK(mq_parse_double_or_nan("nan", 0, 1, &d, why, sizeof why) == 0 && isnan(d),
          "nan is accepted where a statistic may be missing");
    CHECK(mq_parse_double_or_nan("inf", 0, 1, &d, why, sizeof why) != 0,
          "inf is still refused there");
    int dims[3];
    CHECK(mq_parse_dims("16x4096x14336", 3, 1, 1 << 24, dims, why, sizeof why) == 0 &&
              dims[0] == 16 && dims[1] == 4096 && dims[2] == 14336,
          "16x4096x14336 reads as its three numbers");
    static const char *const bad_dims[] = {"1x4294967552x512", "1x2", "1x2x3x4", "0x1x1",
                                           "1xx2", "x1x2", "1x2x"};
    for (size_t i = 0; i < sizeof bad_dims / sizeof bad_dims[0]; i++)
        CHECK(mq_parse_dims(bad_dims[i], 3, 1, 1 << 24, dims, why, sizeof why) != 0,
              "'%s' is not a shape (why: '%s')", bad_dims[i], why);
    int M, N, K;
    CHECK(mq_cli_shape("1x4294967552x512", &M, &N, &K) != 0,
          "bench --shape 1x4294967552x512 is refused (it used to mean 1x256x512)");
    unsigned mask = 0;
    CHECK(mq_cli_formats("", &mask, why, sizeof why) != 0 && mask == 0,
          "--formats '' is an error, not fp4 (why: '%s')", why);
    CHECK(mq_cli_formats(",", &mask, why, sizeof why) != 0 && mask == 0, "--formats , too");
    CHECK(mq_cli_formats("fp4,", &mask, why, sizeof why) != 0 && mask == 0,
          "--formats fp4, too, and the mask is left as it was");
    CHECK(mq_cli_formats("fp4,u4", &mask, why, sizeof why) == 0 && mask == 3,
          "fp4,u4 sets two bits (mask %u)", mask);
    mq_candidate c;
    CHECK(mq_cli_candidate("marlin_gemm_fp4 64 64 32 0 4294967297", &c, why, sizeof why) != 0 &&
              strstr(why, "split_k"),
          "a candidate whose split_k wraps is refused naming split_k (why: '%s')", why);
    CHECK(mq_cli_candidate("marlin_gemm_fp4 64 64 32 0 1", &c, why, sizeof why) == 0 &&
              c.p.tile_m == 64 && c.p.split_k == 1,
          "a good candidate reads back (why: '%s')", why);
    return check_done("numparse");
}
