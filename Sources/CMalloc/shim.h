#ifndef UBIQUITY_CMALLOC_SHIM_H
#define UBIQUITY_CMALLOC_SHIM_H
/* glibc's malloc.h (mallinfo2, malloc_trim), which Swift's Glibc module does not export. */
#include <stddef.h>
#if __has_include(<malloc.h>)
#include <malloc.h>
#endif

/* Bytes held in free chunks of every arena (mallinfo2().fordblks), or 0 where unknown. */
static inline size_t ubq_malloc_free_bytes(void) {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))  /* macOS: none */
    return mallinfo2().fordblks;
#else
    return 0;
#endif
}

/* Gives free memory of every arena back to the kernel; 1 if some was released. */
static inline int ubq_malloc_trim(void) {
#if defined(__GLIBC__)
    return malloc_trim(0);
#else
    return 0;
#endif
}
#endif
