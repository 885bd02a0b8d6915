// Names the reader of one fuzz target (TOPOSCHED_FUZZ_READER, set per target by CMake).
#ifndef TOPOSCHED_FUZZ_READER
#error "TOPOSCHED_FUZZ_READER must name an entry of fuzz_readers()"
#endif
extern "C" const char* const toposched_fuzz_reader_name = TOPOSCHED_FUZZ_READER;
