/* pointwise.c - the shared contract check of the pointwise slot (a fused
 * elementwise program, nb_pw_program): the program's shape (counts,
 * operands before their users, outputs that exist), each node's kind, op
 * and dtypes as the slot it stands for takes them (float dtypes and bool;
 * the integer dtypes are not fused), the views of one shape, and outputs
 * that overlap no input except as exactly the same view. */
#include "check.h"

#define SLOT "pointwise"
#define NB_CHK_PW (NB_CHK_FH | NB_DTM(NB_BOOL))

static bool is_compare(int op) { return op >= NB_BINARY_EQ && op <= NB_BINARY_LE; }

static nb_status bad_node(int i, const char *why) {
    return nb_set_error(NB_ERR_INVALID_ARG, SLOT ": node %d: %s", i, why);
}

static nb_status check_node(const nb_pw_program *p, const nb_kview *views, int i) {
    const nb_pw_node *nd = &p->nodes[i];
    if (!nb_dtype_in(nd->dtype, NB_CHK_PW))
        return nb_set_error(NB_ERR_DTYPE, SLOT ": node %d is %s; programs take float dtypes and bool", i,
                            nb_dtype_name(nd->dtype));
    if ((unsigned)nd->kind >= NB_PW_KIND_COUNT) return bad_node(i, "bad kind");
    int need = nd->kind == NB_PW_WHERE ? 3 : nd->kind == NB_PW_BINARY || nd->kind == NB_PW_UNARY_BACKWARD ? 2
               : nd->kind == NB_PW_INPUT || nd->kind == NB_PW_CONST || nd->kind == NB_PW_DROPOUT ? 0 : 1;
    const int ops[3] = {nd->a, nd->b, nd->c};
    for (int k = 0; k < need; k++) {
        bool optional = nd->kind == NB_PW_UNARY_BACKWARD && k == 1 &&
                        nb_unary_saved_of((nb_unary_op)nd->op) == NB_UNARY_SAVED_NONE;
        if (optional && ops[k] < 0) continue;
        if (ops[k] < 0 || ops[k] >= i) return bad_node(i, "an operand is not an earlier node");
    }
    const nb_dtype da = need ? p->nodes[nd->a].dtype : nd->dtype;
    switch (nd->kind) {
    case NB_PW_INPUT:
        if (nd->a < 0 || nd->a >= p->n_in) return bad_node(i, "no such input");
        if (views[p->n_out + nd->a].dtype != nd->dtype) return bad_node(i, "dtype differs from its input view's");
        return NB_OK;
    case NB_PW_CONST:
    case NB_PW_CAST: return NB_OK;
    case NB_PW_UNARY:
    case NB_PW_UNARY_BACKWARD:
        if ((unsigned)nd->op >= NB_UNARY_OP_COUNT) return bad_node(i, "bad unary op");
        if (nd->dtype == NB_BOOL || da != nd->dtype) return bad_node(i, "a unary op of a float operand keeps its dtype");
        if (nd->kind == NB_PW_UNARY_BACKWARD && nd->b >= 0 && p->nodes[nd->b].dtype != nd->dtype)
            return bad_node(i, "the saved operand's dtype differs");
        return NB_OK;
    case NB_PW_BINARY:
        if ((unsigned)nd->op >= NB_BINARY_OP_COUNT) return bad_node(i, "bad binary op");
        if (p->nodes[nd->b].dtype != da) return bad_node(i, "binary operands of two dtypes");
        if (!nb_pw_binary_takes(nd->op, da))
            return nb_set_error(NB_ERR_DTYPE, SLOT ": node %d: %s does not take %s", i,
                                nb_binary_name((nb_binary_op)nd->op), nb_dtype_name(da));
        if (nd->dtype != (is_compare(nd->op) ? NB_BOOL : da)) return bad_node(i, "binary result of the wrong dtype");
        return NB_OK;
    case NB_PW_WHERE:
        if (da != NB_BOOL) return bad_node(i, "where's condition is not bool");
        if (p->nodes[nd->b].dtype != nd->dtype || p->nodes[nd->c].dtype != nd->dtype)
            return bad_node(i, "where's values differ from its dtype");
        return NB_OK;
    case NB_PW_DROPOUT:
        if (nd->dtype == NB_BOOL) return bad_node(i, "a dropout mask is of a float dtype");
        if (!(nd->value >= 0 && nd->value < 1)) return bad_node(i, "dropout's p must be in [0, 1)");
        if (nd->a < 0 || nd->a >= p->n_rng) return bad_node(i, "no such random stream");
        return NB_OK;
    default: return bad_node(i, "bad kind");
    }
}

nb_status nb_check_pointwise(nb_backend *be, int n, const nb_kview *views, const nb_pw_program *p) {
    (void)be;
    char b1[NB_VIEW_STR], b2[NB_VIEW_STR];
    if (!p || !p->nodes || !p->outputs)
        return nb_set_error(NB_ERR_INVALID_ARG, SLOT ": the program, its nodes or its outputs are NULL");
    if (p->n_out < 1 || p->n_in < 0 || n != p->n_out + p->n_in || n > NB_PW_MAX_VIEWS)
        return nb_set_error(NB_ERR_INVALID_ARG, SLOT ": %d views for %d outputs and %d inputs (at most %d views)", n,
                            p->n_out, p->n_in, NB_PW_MAX_VIEWS);
    if (p->n_rng < 0 || p->n_rng > NB_PW_MAX_RNG || (p->n_rng && !p->rng))
        return nb_set_error(NB_ERR_INVALID_ARG, SLOT ": %d random streams (at most %d) or a NULL list", p->n_rng,
                            NB_PW_MAX_RNG);
    if (p->n_nodes < 1 || p->n_nodes > NB_PW_MAX_NODES)
        return nb_set_error(NB_ERR_INVALID_ARG, SLOT ": %d nodes (1 to %d)", p->n_nodes, NB_PW_MAX_NODES);
    for (int k = 1; k < n; k++)
        if (!nb_view_same_shape(&views[k], &views[0]))
            return nb_set_error(NB_ERR_SHAPE, SLOT ": view %d is %s, view 0 %s", k,
                                nb_view_str(&views[k], b1, sizeof b1), nb_view_str(&views[0], b2, sizeof b2));
    for (int i = 0; i < p->n_nodes; i++) {
        nb_status st = check_node(p, views, i);
        if (st) return st;
    }
    for (int k = 0; k < p->n_out; k++) {
        int v = p->outputs[k];
        if (v < 0 || v >= p->n_nodes)
            return nb_set_error(NB_ERR_INVALID_ARG, SLOT ": output %d stores node %d of %d", k, v, p->n_nodes);
        if (p->nodes[v].dtype != views[k].dtype)
            return nb_set_error(NB_ERR_DTYPE, SLOT ": output %d is %s, its node %s", k,
                                nb_dtype_name(views[k].dtype), nb_dtype_name(p->nodes[v].dtype));
        for (int d = 0; d < views[k].ndim; d++)
            if (views[k].shape[d] > 1 && views[k].strides[d] == 0)
                return nb_set_error(NB_ERR_INVALID_ARG, SLOT ": output %d is broadcast along dim %d", k, d);
        for (int j = 0; j < n; j++) {
            if (j == k || nb_view_numel(&views[k]) == 0) continue;
            bool ok = !nb_view_ranges_meet(&views[k], &views[j]) || (j >= p->n_out && nb_view_same_elements(&views[k], &views[j]));
            if (!ok)
                return nb_set_error(NB_ERR_INVALID_ARG, SLOT ": output %d overlaps %s %d", k,
                                    j < p->n_out ? "output" : "input", j < p->n_out ? j : j - p->n_out);
        }
    }
    return NB_OK;
}
