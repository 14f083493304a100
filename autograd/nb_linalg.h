/* nb_linalg.h - linear algebra (torch.linalg): placeholder until it lands. */
#ifndef NB_LINALG_H
#define NB_LINALG_H
#include "nb_core.h"
#endif
