/* unary.c - the shared contract checks of unary and unary_backward: the op, shapes, dtypes (the op's) and the
 * saved tensor the backward rule reads. */
#include "check.h"

/* Every op takes the floats (16-bit ones computed in float32); the
 * integers only neg, add/mul_scalar, abs, sign and the rounding ops. */
static bool un_supported(nb_unary_op op, nb_dtype dt) {
    if (nb_dtype_in(dt, NB_CHK_FH)) return true;
    if (!nb_dtype_in(dt, NB_DTM_INT)) return false;
    switch (op) {
    case NB_UNARY_NEG:
    case NB_UNARY_ADD_SCALAR:
    case NB_UNARY_MUL_SCALAR:
    case NB_UNARY_ABS:
    case NB_UNARY_SIGN:
    case NB_UNARY_FLOOR:
    case NB_UNARY_CEIL:
    case NB_UNARY_ROUND:
    case NB_UNARY_TRUNC: return true;
    default: return false;
    }
}

nb_status nb_check_unary(nb_backend *be, nb_unary_op op, const nb_kview *out, const nb_kview *x, double alpha) {
    (void)be, (void)alpha; /* any alpha */
    char b1[NB_VIEW_STR], b2[NB_VIEW_STR];
    if ((unsigned)op >= NB_UNARY_OP_COUNT) return nb_set_error(NB_ERR_INVALID_ARG, "unary: bad op %d", (int)op);
    const char *name = nb_unary_name(op);
    if (!nb_view_same_shape(out, x))
        return nb_set_error(NB_ERR_SHAPE, "%s: out %s and input %s differ", name, nb_view_str(out, b1, sizeof b1),
                            nb_view_str(x, b2, sizeof b2));
    if ((unsigned)x->dtype >= NB_DTYPE_COUNT || out->dtype != x->dtype)
        return nb_set_error(NB_ERR_DTYPE, "%s: out dtype %s differs from input %s", name, nb_dtype_name(out->dtype),
                            nb_dtype_name(x->dtype));
    if (!un_supported(op, x->dtype))
        return nb_set_error(NB_ERR_DTYPE, "%s: not supported for %s", name, nb_dtype_name(x->dtype));
    return NB_OK;
}

nb_status nb_check_unary_backward(nb_backend *be, nb_unary_op op, const nb_kview *gx, const nb_kview *gy,
                                  const nb_kview *x, const nb_kview *y, double alpha) {
    (void)be, (void)alpha;
    char b1[NB_VIEW_STR], b2[NB_VIEW_STR], b3[NB_VIEW_STR];
    if ((unsigned)op >= NB_UNARY_OP_COUNT)
        return nb_set_error(NB_ERR_INVALID_ARG, "unary_backward: bad op %d", (int)op);
    const char *name = nb_unary_name(op);
    const nb_kview *v = nb_unary_saved_view(op, gy, x, y);
    if (!v)
        return nb_set_error(NB_ERR_INVALID_ARG, "%s backward: needs the forward's %s", name,
                            nb_unary_saved_of(op) == NB_UNARY_SAVED_IN ? "input x" : "output y");
    if (!nb_view_same_shape(gx, gy) || !nb_view_same_shape(gx, v))
        return nb_set_error(NB_ERR_SHAPE, "%s backward: gx %s, gy %s and saved %s differ", name,
                            nb_view_str(gx, b1, sizeof b1), nb_view_str(gy, b2, sizeof b2),
                            nb_view_str(v, b3, sizeof b3));
    nb_dtype dt = gx->dtype;
    if ((dt != NB_F32 && dt != NB_F64 && dt != NB_F16 && dt != NB_BF16) || gy->dtype != dt || v->dtype != dt)
        return nb_set_error(NB_ERR_DTYPE, "%s backward: needs one float dtype (gx %s, gy %s, saved %s)", name,
                            nb_dtype_name(gx->dtype), nb_dtype_name(gy->dtype), nb_dtype_name(v->dtype));
    /* the other saved tensor, where given, too: a backend may read or copy it */
    const nb_kview *saved[2] = {x, y};
    for (int i = 0; i < 2; i++)
        if (saved[i] && (!nb_view_same_shape(gx, saved[i]) || saved[i]->dtype != dt))
            return nb_set_error(NB_ERR_SHAPE, "%s backward: saved %s does not match gx %s", name,
                                nb_view_str(saved[i], b1, sizeof b1), nb_view_str(gx, b2, sizeof b2));
    return NB_OK;
}

nb_status nb_check_silu_mul(nb_backend *be, const nb_kview *out, const nb_kview *a, const nb_kview *b) {
    (void)be;
    return nb_check_alike("silu_mul", 3, (const nb_kview *[]){out, a, b}, NB_CHK_FH, "float", false);
}
