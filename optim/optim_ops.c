/* optim_ops.c - the tensor methods torch.optim's update rules use (add_
 * with alpha, addcmul_, addcdiv_, ...) written as nabla ops, so that the
 * optimizers built from them run on any device. Each evaluates in the order
 * of ATen's CPU kernel (addcmul: self + value * t1 * t2, left to right), so
 * float64 results agree with PyTorch's to rounding.
 */
#include <math.h>

#include "nb_ops.h"
#include "optim_impl.h"

nb_tensor *nb_optim_scalar(const nb_tensor *like, double v) {
    return like ? nb_scalar_like(like, v, nb_dtype_of(like)) : NULL;
}

nb_tensor *nb_optim_axpy(nb_tensor *y, double a, nb_tensor *x) {
    if (a == 1.0) return nb_add(y, x);
    return nb_add(y, nb_mul_scalar(x, a));
}

nb_tensor *nb_optim_addcmul(nb_tensor *y, double v, nb_tensor *a, nb_tensor *b) {
    return nb_add(y, nb_mul(v == 1.0 ? a : nb_mul_scalar(a, v), b));
}

nb_tensor *nb_optim_addcdiv(nb_tensor *y, double v, nb_tensor *a, nb_tensor *b) {
    return nb_add(y, nb_div(v == 1.0 ? a : nb_mul_scalar(a, v), b));
}

nb_tensor *nb_optim_div_scalar(nb_tensor *x, double s) { return nb_div(x, nb_optim_scalar(x, s)); }

nb_tensor *nb_optim_grad(nb_tensor *grad, bool maximize, nb_tensor *p, double weight_decay) {
    nb_tensor *g = maximize ? nb_neg(grad) : grad;
    return weight_decay != 0.0 ? nb_optim_axpy(g, weight_decay, p) : g;
}

nb_status nb_optim_assign(nb_tensor *dst, nb_tensor *src) {
    if (!src) {
        nb_status st = nb_last_status();
        return st ? st : nb_set_error(NB_ERR_STATE, "optimizer: an update produced no tensor");
    }
    return nb_copy_(dst, src);
}

double nb_optim_item(nb_tensor *t) { return t ? nb_item(t) : NAN; }
