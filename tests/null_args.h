/* null_args.h - the checks of test_null_args.c, shared with the files it
 * is split into: each macro calls fn with the arguments given (NULL where a
 * pointer is expected), notes its name for the header scan, and checks it
 * failed the way its return type says. */
#ifndef NB_NULL_ARGS_H
#define NB_NULL_ARGS_H

#include <math.h>
#include <stdbool.h>

#include "nb_test.h"

void nb_null_args_note(const char *fn);
void nb_null_args_failed(const char *fn, bool failed);
/* The data headers' functions (test_null_args_data.c). */
void nb_null_args_data(void);
/* autograd/nb_ops.h's functions, with x a valid [2, 2] float32 tensor (test_null_args_ops.c). */
void nb_null_args_ops(nb_tensor *x);

/* pointer results: NULL; const char * and borrowed arrays: NULL */
#define NP(fn, ...) do { nb_null_args_note(#fn); nb_clear_error(); nb_null_args_failed(#fn, fn(__VA_ARGS__) == NULL); } while (0)
#define NQ NP
/* nb_status results */
#define NS(fn, ...) do { nb_null_args_note(#fn); nb_clear_error(); nb_null_args_failed(#fn, fn(__VA_ARGS__) != NB_OK); } while (0)
/* counts and sizes: -1 (any negative) */
#define NI(fn, ...) do { nb_null_args_note(#fn); nb_clear_error(); nb_null_args_failed(#fn, fn(__VA_ARGS__) < 0); } while (0)
/* doubles: NaN */
#define ND(fn, ...) do { nb_null_args_note(#fn); nb_clear_error(); nb_null_args_failed(#fn, isnan((double)fn(__VA_ARGS__))); } while (0)
/* predicates: false, no message needed */
#define NB(fn, ...) do { nb_null_args_note(#fn); nb_clear_error(); ck_assert_msg(!fn(__VA_ARGS__), "%s(NULL) is true", #fn); } while (0)
/* void: just returns */
#define NV(fn, ...) do { nb_null_args_note(#fn); nb_clear_error(); fn(__VA_ARGS__); } while (0)
/* NULL means a default here (a generator): the call succeeds */
#define NSOK(fn, ...) do { nb_null_args_note(#fn); nb_clear_error(); ck_assert_msg(fn(__VA_ARGS__) == NB_OK, "%s: %s", #fn, nb_last_error()); } while (0)
#define NOK(fn, ...) do { nb_null_args_note(#fn); nb_clear_error(); ck_assert_msg(fn(__VA_ARGS__) != NULL, "%s: %s", #fn, nb_last_error()); } while (0)
/* struct or enum results: an error message (the value is a default) */
#define NX(fn, ...) do { nb_null_args_note(#fn); nb_clear_error(); (void)fn(__VA_ARGS__); nb_null_args_failed(#fn, true); } while (0)

#endif
