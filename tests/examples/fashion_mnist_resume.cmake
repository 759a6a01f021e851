# Checks that examples/03_fashion_mnist resumes from a checkpoint exactly: trains 2 epochs
# straight, then 1 epoch writing a checkpoint, then resumes from it to 2 epochs. Passes when the
# straight and the resumed run print the same "final:" line (loss of the last epoch as a hex
# float and the FNV-1a hash of every parameter: bit-identical models), and when resuming with
# another --batch-size is refused with a message naming it. Run it with
# ARCREDUCE_FUSION_THRESHOLD=0: fused buckets depend on timing, and a tensor's sums (so the last
# bits of the result) on its bucket, which would make even two uninterrupted runs differ; and with
# ARCREDUCE_AUTO_COMPRESS=0: the straight run and the first part each take the automatic choice
# by timing (the choice's own resume is CompressionChoice.ResumesAsDecided's test).
# cmake -DMPIRUN=<mpirun|args, | separated> -DNP=n -DEXE=path -DDATA_DIR=dir -DWORK_DIR=dir -P ...
string(REPLACE "|" ";" mpirun "${MPIRUN}")
set(common --data-dir ${DATA_DIR} --train-samples 480 --test-samples 200 --overlap-steps 0)
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})

# Runs the example with `common` and ARGN; sets out_var to its "final:" line.
function(run_training out_var)
  execute_process(COMMAND ${mpirun} -np ${NP} ${EXE} ${common} ${ARGN}
                  OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
  string(REGEX MATCH "final: [^\n]*" final "${out}")
  if(NOT rc EQUAL 0 OR final STREQUAL "")
    message(FATAL_ERROR "train_fashion_mnist ${ARGN} failed (exit ${rc}):\n${out}\n${err}")
  endif()
  message(STATUS "${ARGN}\n  ${final}")
  set(${out_var} "${final}" PARENT_SCOPE)
endfunction()

run_training(straight --batch-size 16 --epochs 2)
run_training(first --batch-size 16 --epochs 1 --checkpoint ${WORK_DIR}/ckpt)
run_training(resumed --batch-size 16 --epochs 2 --resume ${WORK_DIR}/ckpt)
if(NOT straight STREQUAL resumed)
  message(FATAL_ERROR "the resumed run differs from the straight one:\n  straight: ${straight}\n"
                      "  resumed:  ${resumed}")
endif()

execute_process(COMMAND ${mpirun} -np ${NP} ${EXE} ${common} --epochs 2 --batch-size 8
                        --resume ${WORK_DIR}/ckpt
                OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
if(rc EQUAL 0 OR NOT "${out}${err}" MATCHES "other settings: --batch-size 16")
  message(FATAL_ERROR "resuming with another --batch-size was not refused (exit ${rc}):\n"
                      "${out}\n${err}")
endif()
message(STATUS "resumed run identical to the straight run; other settings refused")
