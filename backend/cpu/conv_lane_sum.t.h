/* conv_lane_sum.t.h - the lane sums for one type, included by conv.c with T, S
 * defined; no include guard, by design. TS(name_) pastes the suffix
 * (name_f32). */
#define TS(name) NB_CPU_CAT(name, S)

static double TS(lane_sum_)(const T *v, int64_t n) {
    double acc[8] = {0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int l = 0; l < 8; l++) acc[l] += (double)v[i + l];
    double s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    for (; i < n; i++) s += (double)v[i];
    return s;
}

#undef TS

/* the template consumes its parameters: the includer defines them again for the next type */
#undef T
#undef S
