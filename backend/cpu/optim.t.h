/* optim.t.h - the Adam/AdamW and SGD loops for one float type, included by
 * optim.c with T and S defined; no include guard, by design. TS(name_) pastes
 * the suffix (name_f32). */
#define TS(name) NB_CPU_CAT(name, S)

static void TS(adam_)(void *arg, int64_t i0, int64_t i1) {
    const adam_job *j = arg;
    /* restrict: the loop must vectorise (memory-bound) */
    T *restrict p = (T *)j->p, *restrict m = (T *)j->m, *restrict v = (T *)j->v;
    T *restrict vmax = (T *)j->vmax;
    const T *restrict grad = (const T *)j->g;
    const TS(nb_sm_adam_coef_) c = j->c.S;
    if (!c.maximize && !c.amsgrad && !c.l2 && c.small) {
        /* the common case with its flags constant, so the loop is branch-free; without
         * weight decay p * 1 == p exactly, the same bits as skipping it */
        TS(nb_sm_adam_coef_) f = c;
        f.decay = c.decoupled ? c.decay : 1;
        f.maximize = false, f.amsgrad = false, f.l2 = false, f.decoupled = true, f.small = true;
        for (int64_t i = i0; i < i1; i++) TS(nb_sm_adam_)(&p[i], grad[i], &m[i], &v[i], NULL, &f);
        return;
    }
    if (vmax)
        for (int64_t i = i0; i < i1; i++) TS(nb_sm_adam_)(&p[i], grad[i], &m[i], &v[i], &vmax[i], &c);
    else
        for (int64_t i = i0; i < i1; i++) TS(nb_sm_adam_)(&p[i], grad[i], &m[i], &v[i], NULL, &c);
}
static void TS(sgd_)(void *arg, int64_t i0, int64_t i1) {
    const sgd_job *j = arg;
    T *restrict p = (T *)j->p, *restrict buf = (T *)j->buf;
    const T *restrict grad = (const T *)j->g;
    TS(nb_sm_sgd_coef_) c = j->c.S;
    if (!buf) { /* no momentum (has_mom is false): a loop without the buffer */
        c.has_mom = false;
        for (int64_t i = i0; i < i1; i++) TS(nb_sm_sgd_)(&p[i], grad[i], NULL, &c);
        return;
    }
    c.has_mom = true;
    for (int64_t i = i0; i < i1; i++) TS(nb_sm_sgd_)(&p[i], grad[i], &buf[i], &c);
}

#undef TS

/* the template consumes its parameters: the includer defines them again for the next type */
#undef T
#undef S
