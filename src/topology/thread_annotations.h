// Clang thread-safety annotations: attributes that let clang's -Wthread-safety prove at
// compile time that a member marked GUARDED_BY(mu_) is only touched with mu_ held, that a
// function marked REQUIRES(mu_) is only called with it held, and that a scoped lock releases
// what it took. See https://clang.llvm.org/docs/ThreadSafetyAnalysis.html; the names are the
// ones that page (and LevelDB's port/thread_annotations.h, abseil's) use.
//
// They expand to nothing on other compilers: g++ builds and runs everything; the ctest
// `thread_safety` (tools/thread_safety.py) runs clang's analysis over src/ in `make test`
// (docs/design.md "Locking"). The analysis only sees capabilities it is told about, and
// libstdc++'s std::mutex carries none, so annotated code locks the wrappers of
// topology/mutex.h. Macros only: no state, nothing to synchronise.
#pragma once

#if defined(__clang__)
#define TOPOSCHED_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define TOPOSCHED_THREAD_ANNOTATION(x)
#endif

// On a class: its objects are capabilities (a mutex) that functions acquire and release.
#define CAPABILITY(name) TOPOSCHED_THREAD_ANNOTATION(capability(name))
// On a class: an RAII object that holds a capability from its constructor to its destructor.
#define SCOPED_CAPABILITY TOPOSCHED_THREAD_ANNOTATION(scoped_lockable)

// On a member: read or written only while the capability is held (read: held shared).
#define GUARDED_BY(x) TOPOSCHED_THREAD_ANNOTATION(guarded_by(x))
// On a pointer member: what it points at is guarded by the capability (the pointer is not).
#define PT_GUARDED_BY(x) TOPOSCHED_THREAD_ANNOTATION(pt_guarded_by(x))

// On a function: the caller must hold the capabilities (exclusively / at least shared).
#define REQUIRES(...) TOPOSCHED_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define REQUIRES_SHARED(...) TOPOSCHED_THREAD_ANNOTATION(requires_shared_capability(__VA_ARGS__))
// On a function: the caller must not hold the capabilities (the function takes them).
#define EXCLUDES(...) TOPOSCHED_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))

// On a function: it acquires / releases the capabilities (no argument: `this`).
#define ACQUIRE(...) TOPOSCHED_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define ACQUIRE_SHARED(...) TOPOSCHED_THREAD_ANNOTATION(acquire_shared_capability(__VA_ARGS__))
#define RELEASE(...) TOPOSCHED_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define RELEASE_SHARED(...) TOPOSCHED_THREAD_ANNOTATION(release_shared_capability(__VA_ARGS__))
// On a function: from its return on, the analysis takes the capability as held (it checks
// nothing at run time; for a lock held through a type the analysis cannot follow).
#define ASSERT_CAPABILITY(x) TOPOSCHED_THREAD_ANNOTATION(assert_capability(x))

// On a function: not analysed. Use only with a one-line comment saying why it is safe.
#define NO_THREAD_SAFETY_ANALYSIS TOPOSCHED_THREAD_ANNOTATION(no_thread_safety_analysis)
