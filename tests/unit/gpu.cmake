# The GPU correlation module (daemon/gpu*.c) driven with a real store: joins, weights, held
# samples, NVTX labels, traces, the GC holder and the ring bounds.
profd_unit(test_gpu)
# The request handlers' GPU side, with a stub sampler (handlers.c is the daemon's, not the core's).
profd_unit(test_gpu_handlers ${CMAKE_SOURCE_DIR}/daemon/handlers.c)
