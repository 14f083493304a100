/* PLACEHOLDER (being written) */
#ifndef NB_TRANSFORMER_H
#define NB_TRANSFORMER_H
#include "nb_core.h"
#endif
