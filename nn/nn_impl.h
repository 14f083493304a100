/* nn_impl.h - internals shared by the module files of nn/ (not installed). */
#ifndef NB_NN_IMPL_H
#define NB_NN_IMPL_H

#include "nb_nn.h"
#include "nb_op_table.h"

/* Registers t, taking the caller's own reference (a tensor made with
 * nb_tensor_new_unscoped): the module ends up the only owner. On failure t
 * is released. */
nb_status nb_module_adopt_parameter(nb_module *m, const char *name, nb_tensor *t);
nb_status nb_module_adopt_buffer(nb_module *m, const char *name, nb_tensor *t);

/* A module's dtype check through the capability query: whether the default
 * device runs op in dt (NB_ERR_DTYPE naming the dtypes the op takes, or
 * NB_ERR_UNSUPPORTED naming the backend). `module` names it in messages. */
bool nb_nn_check_dtype(const char *module, nb_op_id op, nb_dtype dt);

#endif
