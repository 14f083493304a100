/* template_floats.h - instantiates the included template named by
 * NB_TEMPLATE (a "<family>.t.h" file) for float (T float, S f32) and double
 * (T double, S f64; each template #undefs its own parameters), then
 * forgets NB_TEMPLATE:
 *
 *   #define NB_TEMPLATE "softmax.t.h"
 *   #include "template_floats.h"
 *
 * No include guard: included once per template. */
#define T float
#define S f32
#include NB_TEMPLATE
#define T double
#define S f64
#include NB_TEMPLATE
#undef NB_TEMPLATE
