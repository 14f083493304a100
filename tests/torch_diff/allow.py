"""allow.py - the differential suite's known differences from PyTorch 1.13.

Each entry: (op or "*", case tag or "*", a substring of the mismatch) -> the
reason. A failing case matching an entry counts as allowed; every entry must
be used by some case (torch_diff.py reports stale ones). Keep this list and
autograd/OPS.md's section "Differences from PyTorch" in step: a deliberate
difference documented there, or PyTorch 1.13 being wrong by the mathematics
(or crashing, or reading out of bounds).
"""

DAZ = ("nabla runs with flush-to-zero and denormals-are-zero (documented: denormals make backward GEMMs "
       "several times slower); subnormal inputs read as zero in arithmetic, while libm functions that inspect "
       "the bits (log, atan2, pow, fmod, ...) see them, so results on subnormals are those of neither mode")
STORAGE = ("float16 and bfloat16 compute only in the ops marked lp in OPS.md (float32 arithmetic inside); "
           "the other compute ops reject them (NB_ERR_DTYPE, documented)")
HALF_CPU = ("nabla computes float16 on the CPU (through float32) for the ops marked lp and the binary ops, where "
            "PyTorch 1.13's CPU has no Half kernel")
STRICT = "stricter dtype rules, documented in the op's docstring (cast with nb_to_dtype first)"
SHIFT = ("PyTorch 1.13 shifts by the count modulo the bit width (C's undefined behaviour, as x86 does it); nabla "
         "gives the arithmetic result: 0, or the sign fill for >> (as PyTorch 2)")
SCALAR = ("a scalar an integer dtype cannot hold: PyTorch wraps it into the dtype, nabla takes it as a Python float "
          "(nb_scalar_result_type, documented), and the bitwise ops then reject the float")
FLOORDIV = ("PyTorch 1.13's floor division gives NaN where the quotient overflows (and so do remainder's gradient "
            "and remainder/fmod themselves, computed from it); the answers are +-inf and the exact remainder "
            "(wrong by the mathematics in PyTorch)")

QINF = ("PyTorch 1.13's quantize_per_tensor/per_channel turn +inf into the range's minimum (an out-of-range float to "
        "int conversion, undefined behaviour; 1e10 clamps to the maximum there); nabla clamps +inf to the maximum, "
        "as it clamps every value above the range")

ENTRIES = {
    ("quantize_per_tensor", "ties nan inf", "element 12:"): QINF,
    ("quantize_per_tensor", "ties uint8", "element 12:"): QINF,
    ("quantize_per_channel", "ties nan inf", "element 12:"): QINF,
    ("fake_quantize_per_channel_affine", "ties nan inf", "element 12 of 14"): (
        "PyTorch 1.13's per-channel CPU kernel casts nearbyint(x / scale) to int64 before clamping: +inf is outside "
        "int64 (undefined behaviour; x86 gives INT64_MIN), so +inf lands on quant_min; nabla clamps the level as "
        "a double, so +inf lands on quant_max, as PyTorch's per-tensor kernel does"),
    ("gather", "int32 index", "PyTorch fails"): ("PyTorch 1.13 takes only int64 indices for gather; PyTorch 2.x takes "
                                                 "int32 too (2.11 checked on the GPU machine), as nabla"),
    ("*", "subnormal", "element"): DAZ,
    ("*", "f16", "float16"): STORAGE,
    ("*", "f16", "nabla does not"): HALF_CPU,
    ("relu", "int", "int32 is not supported"): STRICT + ": relu takes float32/float64",
    ("relu6", "int", "int32 is not supported"): STRICT + ": relu6 (hardtanh) takes float32/float64",
    ("hardtanh", "int", "int32 is not supported"): STRICT + ": hardtanh takes float32/float64",
    ("pow_scalar", "int", "int32 is not supported"): STRICT + ": pow_scalar takes float32/float64",
    ("sign", "bool", "bool is not supported"): STRICT + ": sign takes numbers, not bool",
    ("max", "bool", "bool is not supported"): STRICT + ": max/min/amax/amin take numbers, not bool (use all/any)",
    ("min", "bool", "bool is not supported"): STRICT + ": max/min/amax/amin take numbers, not bool (use all/any)",
    ("amax", "bool", "bool is not supported"): STRICT + ": max/min/amax/amin take numbers, not bool (use all/any)",
    ("amin", "bool", "bool is not supported"): STRICT + ": max/min/amax/amin take numbers, not bool (use all/any)",
    ("logsumexp", "int", "int32 is not supported"): STRICT + ": logsumexp takes float32/float64",
    ("logsumexp", "bool", "bool is not supported"): STRICT + ": logsumexp takes float32/float64",
    ("matmul", "int", "int32 is not supported"): STRICT + ": matmul is BLAS GEMM, float32/float64",
    ("embedding", "int weight", "int32 is not supported"): STRICT + ": embedding weights are float32/float64",
    ("argmax", "bool", "nabla does not"): "nabla's argmax/argmin take bool (as 0/1); PyTorch 1.13 has no bool kernel",
    ("argmin", "bool", "nabla does not"): "nabla's argmax/argmin take bool (as 0/1); PyTorch 1.13 has no bool kernel",
    ("hardswish", "special", "gradient of input 0"): "at x = 3 PyTorch 1.13's vectorized kernel gives g, its scalar "
                                                     "kernel 1.5 g (aten's hardswish_backward formula); nabla "
                                                     "uses the formula at every size",
    ("softplus", "bad beta", "beta must be finite"): "nabla rejects beta 0 (documented); PyTorch divides by it",
    ("norm", "*", "p = 0.5 is not supported"): "nb_norm takes p >= 1 and +-inf (documented); PyTorch also p < 1",
    ("cat", "legacy empty", "they must match"): "PyTorch's legacy exception for 1-D empty tensors in cat is not kept",
    ("pad", "pads", "PyTorch fails (Invalid padding size"): "nabla pads any number of dims in every mode "
                                                            "(documented); PyTorch limits the non-constant modes",
    ("pad", "pads", "circular padding"): "PyTorch 1.13 reads outside the input (garbage values) for a circular pad "
                                         "wider than the cropped dim; nabla reports the error",
    ("pad", "pads", "crops more than its size"): "PyTorch 1.13 reads outside the input (garbage values) for a "
                                                 "circular crop larger than the dim; nabla reports the error",
    ("bitwise_left_shift", "*", "element"): SHIFT,
    ("bitwise_right_shift", "*", "element"): SHIFT,
    ("bitwise_left_shift_scalar", "*", "element"): SHIFT,
    ("bitwise_right_shift_scalar", "*", "element"): SHIFT,
    ("bitwise_and_scalar", "scalar", "needs integer"): SCALAR,
    ("bitwise_or_scalar", "scalar", "needs integer"): SCALAR,
    ("bitwise_xor_scalar", "scalar", "needs integer"): SCALAR,
    ("bitwise_left_shift_scalar", "scalar", "needs integer"): SCALAR,
    ("bitwise_right_shift_scalar", "scalar", "needs integer"): SCALAR,
    ("div_mode", "special", "PyTorch nan"): FLOORDIV,
    ("floor_divide", "special", "PyTorch nan"): FLOORDIV,
    ("remainder", "special", "PyTorch nan"): FLOORDIV,
    ("fmod", "special", "PyTorch nan"): FLOORDIV,
    ("floor_divide", "*", "derivative for aten::floor_divide is not implemented"):
        "nabla gives floor_divide the zero gradient of div(rounding_mode='floor'); PyTorch 1.13 has none",
    ("log1p", "special", "PyTorch inf"): "PyTorch 1.13's float64 log1p(1e308) is inf; it is 709.196 (wrong by the "
                                         "mathematics in PyTorch)",
    ("hardsigmoid", "*", "gradient of input 0"): "PyTorch 1.13's hardsigmoid backward multiplies by 1/6 rounded to "
                                                  "float32 even in float64 (its constant is 1.0f / 6.0f)",
    ("prod", "special", "PyTorch 0"): "PyTorch 1.13 gives 0 gradient to a slice with two zeros even when another "
                                      "element is inf or NaN; the product of the others is NaN there (nabla)",
    ("cumprod", "special", "gradient of input 0"): "PyTorch 1.13's cumprod backward after a zero ignores a later "
                                                   "inf (0 * inf is NaN, nabla's answer)",
    ("topk", "special", "gradient of input 0"): "topk among equal values (+0 and -0): PyTorch's order is "
                                                "unspecified, nabla's stable; the gradient follows the pick",
    ("scatter", "f64", "ScatterBackward0 returned an invalid gradient"):
        "PyTorch 1.13's scatter backward fails when src is larger than index (wrong in PyTorch)",
    ("scatter_add", "f64", "ScatterAddBackward0 returned an invalid gradient"):
        "PyTorch 1.13's scatter_add backward fails when src is larger than index (wrong in PyTorch)",
    ("multinomial", "too few", "not enough categories"): "PyTorch 1.13 draws zero-probability categories when "
                                                         "more samples than nonzero ones are asked without "
                                                         "replacement (its documentation forbids it); nabla reports "
                                                         "the error",
    ("linalg_slogdet", "nan", "PyTorch 0"): "the sign of a determinant of a matrix holding NaN is NaN (nabla, "
                                            "documented); PyTorch 1.13 says 0",
    ("linalg_lstsq", "nan", "PyTorch's backward fails"): "PyTorch 1.13's lstsq backward runs an SVD that refuses "
                                                         "NaN; nabla's gives NaN gradients",
}


def match(op, tag, why):
    for key in ENTRIES:
        o, t, s = key
        if (o == "*" or o == op) and (t == "*" or t == tag) and s in why:
            return key
    return None
