# Multi-process tests of ops/ (MpiCommunicator). Each run takes a few seconds.
add_executable(communicator_mpi_test ${CMAKE_CURRENT_LIST_DIR}/communicator_mpi_test.cc)
target_link_libraries(communicator_mpi_test PRIVATE arcreduce_common arcreduce_ops GTest::gtest)
foreach(np 1 2 3 4)
  foreach(algorithm ring mpi doubling rabenseifner)
    arcreduce_add_mpi_test(NAME ops_communicator_${algorithm}_np${np} NP ${np}
      COMMAND communicator_mpi_test --algorithm=${algorithm} TIMEOUT 120)
  endforeach()
endforeach()
# Rabenseifner folding two and three pairs into the four that exchange.
foreach(np 6 7)
  arcreduce_add_mpi_test(NAME ops_communicator_rabenseifner_np${np} NP ${np}
    COMMAND communicator_mpi_test --algorithm=rabenseifner TIMEOUT 180)
endforeach()
# Every rank a host of its own: the link probe, the model's choice, and its messages.
foreach(np 2 3 4)
  arcreduce_add_mpi_test(NAME ops_communicator_auto_hosts_apart_np${np} NP ${np}
    COMMAND communicator_mpi_test --algorithm=auto --hosts-apart TIMEOUT 120)
endforeach()
arcreduce_add_mpi_test(NAME ops_communicator_thresholds_hosts_apart_np3 NP 3
  COMMAND communicator_mpi_test --algorithm=thresholds --hosts-apart TIMEOUT 120)
# Several ranks a host (simulated by rank ranges): the hierarchical All-Reduce, even hosts and
# uneven ones (2+1, 2+2+1), under auto and each algorithm between hosts; one host of four ranks
# (nothing to do); and the hierarchy turned off on uneven hosts.
# `auto` sends by host only what the ring carries between hosts; `1` every message.
# Even hosts shard the exchange between hosts over their ranks, uneven ones and `leader` send it
# by each host's first rank.
foreach(case "4;2;auto;auto" "3;2;auto;auto" "5;2;auto;1" "4;4;auto;1" "6;3;ring;1"
        "4;2;doubling;1" "5;2;rabenseifner;1" "4;2;mpi;1" "3;2;ring;auto" "3;2;auto;1"
        "6;3;auto;auto" "6;2;ring;auto" "4;2;auto;leader" "6;2;rabenseifner;leader")
  list(GET case 0 np)
  list(GET case 1 per_host)
  list(GET case 2 algorithm)
  list(GET case 3 hierarchy)
  arcreduce_add_mpi_test(
    NAME ops_communicator_${algorithm}_hosts_of_${per_host}_hierarchy_${hierarchy}_np${np}
    NP ${np} TIMEOUT 180
    COMMAND communicator_mpi_test --algorithm=${algorithm} --ranks-per-host=${per_host}
            --hierarchy=${hierarchy})
endforeach()
# By host in many pieces (the sharded stages' pipeline, the leader's split messages).
foreach(case "4;2;auto" "6;3;auto" "5;2;auto")
  list(GET case 0 np)
  list(GET case 1 per_host)
  list(GET case 2 hierarchy)
  arcreduce_add_mpi_test(NAME ops_communicator_hosts_of_${per_host}_small_np${np} NP ${np}
    TIMEOUT 180 COMMAND communicator_mpi_test --algorithm=auto --ranks-per-host=${per_host}
                        --hierarchy=${hierarchy} --small-messages)
endforeach()
arcreduce_add_mpi_test(NAME ops_communicator_auto_hosts_of_2_flat_np3 NP 3
  COMMAND communicator_mpi_test --algorithm=auto --ranks-per-host=2 --hierarchy=0 TIMEOUT 120)
# Split paths (messages above max_message_bytes) and many ring segments, at odd and even sizes.
foreach(np 3 4)
  arcreduce_add_mpi_test(NAME ops_communicator_ring_small_np${np} NP ${np}
    COMMAND communicator_mpi_test --algorithm=ring --small-messages TIMEOUT 120)
endforeach()
# Doubling's messages above the limit take the ring; those below it stay doubling.
arcreduce_add_mpi_test(NAME ops_communicator_doubling_small_np3 NP 3
  COMMAND communicator_mpi_test --algorithm=doubling --small-messages TIMEOUT 120)
arcreduce_add_mpi_test(NAME ops_communicator_rabenseifner_small_np3 NP 3
  COMMAND communicator_mpi_test --algorithm=rabenseifner --small-messages TIMEOUT 120)
arcreduce_add_mpi_test(NAME ops_communicator_mpi_small_np3 NP 3
  COMMAND communicator_mpi_test --algorithm=mpi --small-messages TIMEOUT 120)
arcreduce_add_mpi_test(NAME ops_communicator_auto_np2 NP 2
  COMMAND communicator_mpi_test --algorithm=auto TIMEOUT 120)
# Wait modes (ops/mpi_wait.h): the default (sleep) runs above; the others, sleeping from the
# first poll, and ranks with different modes in one job.
foreach(wait busy yield sleep-at-once mixed)
  foreach(algorithm ring mpi doubling)
    arcreduce_add_mpi_test(NAME ops_communicator_${algorithm}_wait_${wait}_np3 NP 3
      COMMAND communicator_mpi_test --algorithm=${algorithm} --wait=${wait} TIMEOUT 120)
  endforeach()
endforeach()
