// Includes <mpi.h> without the deprecated MPI C++ bindings, which Open MPI's header otherwise
// pulls into every C++ translation unit (and which MPI::MPI_C does not link). Include this
// instead of <mpi.h>.
#pragma once

#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1
#endif
#ifndef MPICH_SKIP_MPICXX
#define MPICH_SKIP_MPICXX 1
#endif
#include <mpi.h>
