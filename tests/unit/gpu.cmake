# The GPU correlation module (daemon/gpu/) driven with a real store: joins, weights, held
# samples, NVTX labels, traces, the GC holder and the ring bounds.
profd_unit(test_gpu)
# White-box: the exact memory accounting checks need the module's private sizes.
target_include_directories(test_gpu PRIVATE ${CMAKE_SOURCE_DIR}/daemon/gpu)
# The request handlers' GPU side, with a stub sampler (handlers.c is the daemon's, not the core's).
profd_unit(test_gpu_handlers ${CMAKE_SOURCE_DIR}/daemon/handlers.c
           ${CMAKE_SOURCE_DIR}/daemon/handle_stacks.c ${CMAKE_SOURCE_DIR}/daemon/memory.c)
target_link_libraries(test_gpu_handlers PRIVATE profd_export)
# What an uplink and a user may cost: records and bytes a second, waiting records per user.
profd_unit(test_gpu_rate)
# White-box: reads the module's count of refused strings.
target_include_directories(test_gpu_rate PRIVATE ${CMAKE_SOURCE_DIR}/daemon/gpu)
