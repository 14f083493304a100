/* rope.t.h - the rotary embedding loops for one type, included by rope.c with
 * T_, S defined; no include guard, by design. TS(name_) pastes the suffix
 * (name_f32). */
#define TS(name) NB_CPU_CAT(name, S)

static void TS(rope_rows_)(void *arg, int64_t r0, int64_t r1) {
    const rope_job *j = arg;
    int64_t h = j->h;
    const T_ sg = j->inverse ? (T_)-1 : (T_)1;
    for (int64_t r = r0; r < r1; r++) {
        int64_t t = r % j->T;
        const T_ *x = (const T_ *)j->x + r * 2 * h;
        const T_ *c = (const T_ *)j->cos + t * h, *s = (const T_ *)j->sin + t * h;
        T_ *y = (T_ *)j->out + r * 2 * h;
        for (int64_t i = 0; i < h; i++) {
            T_ x1 = x[i], x2 = x[i + h], si = sg * s[i];
            y[i] = x1 * c[i] - x2 * si;
            y[i + h] = x2 * c[i] + x1 * si;
        }
    }
}

#undef TS

/* the template consumes its parameters: the includer defines them again for the next type */
#undef T_
#undef S
