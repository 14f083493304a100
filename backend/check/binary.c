/* binary.c - the shared contract checks of binary and where: the op, inputs expanded to out, dtypes and the op's. */
#include "check.h"

static bool is_compare(nb_binary_op op) { return op >= NB_BINARY_EQ && op <= NB_BINARY_LE; }

/* The dtypes of each op (PyTorch's); the 16-bit floats wherever float32
 * is (the CPU computes them in float32, backend/cpu/iter16.c). */
static bool bin_supported(nb_binary_op op, nb_dtype dt) {
    unsigned m = NB_DTM(dt);
    switch (op) {
    case NB_BINARY_DIV:
    case NB_BINARY_ATAN2: return m & NB_CHK_FH;
    case NB_BINARY_SUB:
    case NB_BINARY_POW:
    case NB_BINARY_REMAINDER:
    case NB_BINARY_FMOD:
    case NB_BINARY_DIV_TRUNC:
    case NB_BINARY_DIV_FLOOR: return m & (NB_CHK_FH | NB_DTM_INT);
    case NB_BINARY_BITWISE_AND:
    case NB_BINARY_BITWISE_OR:
    case NB_BINARY_BITWISE_XOR: return m & NB_DTM_INTB;
    case NB_BINARY_LSHIFT:
    case NB_BINARY_RSHIFT: return m & NB_DTM_INT;
    default: return m & (NB_CHK_FH | NB_DTM_INTB); /* add, mul, maximum, minimum, comparisons */
    }
}

nb_status nb_check_binary(nb_backend *be, nb_binary_op op, const nb_kview *out, const nb_kview *a, const nb_kview *b) {
    (void)be;
    char b1[NB_VIEW_STR], b2[NB_VIEW_STR], b3[NB_VIEW_STR];
    if ((unsigned)op >= NB_BINARY_OP_COUNT) return nb_set_error(NB_ERR_INVALID_ARG, "binary: bad op %d", (int)op);
    const char *name = nb_binary_name(op);
    if (!nb_view_same_shape(out, a) || !nb_view_same_shape(out, b))
        return nb_set_error(NB_ERR_SHAPE, "%s: inputs %s and %s are not expanded to out %s", name,
                            nb_view_str(a, b1, sizeof b1), nb_view_str(b, b2, sizeof b2),
                            nb_view_str(out, b3, sizeof b3));
    bool cmp = is_compare(op);
    nb_dtype want_out = cmp ? NB_BOOL : a->dtype;
    if ((unsigned)a->dtype >= NB_DTYPE_COUNT || a->dtype != b->dtype || out->dtype != want_out)
        return nb_set_error(NB_ERR_DTYPE, "%s: dtypes %s, %s -> %s do not match (out must be %s)", name,
                            nb_dtype_name(a->dtype), nb_dtype_name(b->dtype), nb_dtype_name(out->dtype),
                            cmp ? "bool" : "the inputs' dtype");
    if (!bin_supported(op, a->dtype))
        return nb_set_error(NB_ERR_DTYPE, "%s: not supported for %s", name, nb_dtype_name(a->dtype));
    return NB_OK;
}

nb_status nb_check_where(nb_backend *be, const nb_kview *out, const nb_kview *cond, const nb_kview *a,
                         const nb_kview *b) {
    (void)be;
    char b1[NB_VIEW_STR], b2[NB_VIEW_STR], b3[NB_VIEW_STR], b4[NB_VIEW_STR];
    if (!nb_view_same_shape(out, cond) || !nb_view_same_shape(out, a) || !nb_view_same_shape(out, b))
        return nb_set_error(NB_ERR_SHAPE, "where: cond %s, a %s and b %s are not expanded to out %s",
                            nb_view_str(cond, b1, sizeof b1), nb_view_str(a, b2, sizeof b2),
                            nb_view_str(b, b3, sizeof b3), nb_view_str(out, b4, sizeof b4));
    if (cond->dtype != NB_BOOL)
        return nb_set_error(NB_ERR_DTYPE, "where: cond must be bool, got %s", nb_dtype_name(cond->dtype));
    if ((unsigned)out->dtype >= NB_DTYPE_COUNT || a->dtype != out->dtype || b->dtype != out->dtype)
        return nb_set_error(NB_ERR_DTYPE, "where: dtypes of a (%s), b (%s) and out (%s) differ",
                            nb_dtype_name(a->dtype), nb_dtype_name(b->dtype), nb_dtype_name(out->dtype));
    return NB_OK;
}
