// Open MPI / MPICH detection and executable lookup.
#include "launcher/mpi_flavor.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include <gtest/gtest.h>

namespace arcreduce::launcher {
namespace {

TEST(MpiFlavor, FromVersionText) {
  EXPECT_EQ(flavor_from_version("mpirun (Open MPI) 4.1.4\n\nReport bugs to ..."),
            MpiFlavor::kOpenMpi);
  EXPECT_EQ(flavor_from_version("HYDRA build details:\n    Version: 4.0.2"), MpiFlavor::kMpich);
  EXPECT_EQ(flavor_from_version("Intel(R) MPI Library for Linux* OS, Version 2021.6"),
            MpiFlavor::kMpich);
  EXPECT_EQ(flavor_from_version("mpiexec: something else"), std::nullopt);
}

TEST(MpiFlavor, FromName) {
  EXPECT_EQ(flavor_from_name("openmpi"), MpiFlavor::kOpenMpi);
  EXPECT_EQ(flavor_from_name("mpich"), MpiFlavor::kMpich);
  EXPECT_THROW(flavor_from_name("OpenMPI"), UsageError);
}

TEST(MpiFlavor, FindExecutable) {
  EXPECT_EQ(find_executable("sh", "/nonexistent:/bin"), "/bin/sh");
  EXPECT_EQ(find_executable("/bin/sh", ""), "/bin/sh");
  EXPECT_EQ(find_executable("no-such-mpirun", "/bin:/usr/bin"), "");
  char name[] = "/tmp/arcrun_not_executable_XXXXXX";  // mkstemp creates it with mode 0600
  close(mkstemp(name));
  EXPECT_EQ(find_executable(name, "/bin"), "");
  std::remove(name);
}

TEST(MpiFlavor, ReadVersionOfMissingProgramFailsWith127) {
  try {
    read_version("/nonexistent/mpirun");
    FAIL() << "no error";
  } catch (const UsageError& e) {
    EXPECT_EQ(e.exit_code(), 127);
  }
}

}  // namespace
}  // namespace arcreduce::launcher
